"""Every environment variable mxrt reads lives here (and is listed in the README)."""

from __future__ import annotations

import os
from pathlib import Path

# os.environ's own dict (bytes keys on POSIX): a lookup there costs ~50 ns where os.environ.get costs ~0.7 us
# (key encoding and a KeyError for an unset name). The small-call dispatch reads MXRT_GEMM_PATH and MXRT_LAUNCH on
# every call, so a change of either (os.environ, monkeypatch.setenv) still takes effect on the next call.
_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
if not isinstance(_ENV_DATA, dict) or not all(type(k) is bytes for k in list(_ENV_DATA)[:1]):
    _ENV_DATA = None


def _env(name: str, key: bytes) -> str | None:
    """``os.environ.get(name)`` at the cost of one dict lookup (``key`` = ``name`` encoded)."""
    if _ENV_DATA is None:
        return os.environ.get(name)
    raw = _ENV_DATA.get(key)
    return None if raw is None else os.fsdecode(raw)


#: ``MXRT_BACKEND``: what ``backend="auto"`` resolves to. ``auto`` (default) picks a GPU when mxrt has
#: kernels for the op on the current device, numpy otherwise; ``numpy`` forces the reference everywhere.
ENV_BACKEND = "MXRT_BACKEND"


def default_backend() -> str:
    return os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"


#: ``MXRT_ARCH``: override the detected GPU target (``gfx942``, ``gfx950``, ``sm_90a``, ...), e.g. to pick a
#: code path on a device whose name mxrt does not know. Normalised by :func:`mxrt.runtime.arch.normalize_target`.
ENV_ARCH = "MXRT_ARCH"

#: ``MXRT_KERNELS_SRC``: folder holding ``kernels_src`` (default: the checkout beside the package, then
#: ``<prefix>/share/mxrt/kernels_src`` of an installed wheel).
ENV_KERNELS_SRC = "MXRT_KERNELS_SRC"

#: ``MXRT_DUMP_DIR``: where a kernel source that failed to compile is written (default: the temp folder).
ENV_DUMP_DIR = "MXRT_DUMP_DIR"


def arch_override() -> str | None:
    return os.environ.get(ENV_ARCH, "").strip() or None


def kernels_src_override() -> str | None:
    return os.environ.get(ENV_KERNELS_SRC, "").strip() or None


def dump_dir() -> str | None:
    return os.environ.get(ENV_DUMP_DIR, "").strip() or None


#: ``MXRT_GEMM_PATH``: force one GPU GEMM path by name (``generic``, ``sm90_wgmma``, ...; see
#: :func:`mxrt.ops.gemm_paths.gemm_paths`) instead of the best one that supports the problem. For tests and
#: benchmarks; a forced path that cannot run the problem raises UnsupportedArchError.
ENV_GEMM_PATH = "MXRT_GEMM_PATH"


_KEY_GEMM_PATH = os.fsencode(ENV_GEMM_PATH)


def gemm_path_override() -> str | None:
    raw = _env(ENV_GEMM_PATH, _KEY_GEMM_PATH)
    return None if raw is None else raw.strip() or None


#: ``MXRT_LAUNCH``: how kernels are launched on CUDA. ``driver`` (default) calls ``cuLaunchKernel`` through ctypes
#: with a parameter block packed once per call (a few microseconds); ``cupy`` uses CuPy's ``RawKernel`` call
#: (~15-20 us with by-value tensor maps). ROCm always uses CuPy's call.
ENV_LAUNCH = "MXRT_LAUNCH"


_KEY_LAUNCH = os.fsencode(ENV_LAUNCH)


def launch_mode() -> str:
    raw = _env(ENV_LAUNCH, _KEY_LAUNCH)
    return "driver" if raw is None else raw.strip().lower() or "driver"


#: ``MXRT_TUNED_TABLE``: the user's tuned decode table (a JSON file), read before the one shipped in the package
#: and written by ``mxrt tune gemm``. Default: ``$XDG_CACHE_HOME/mxrt/tuned_decode.json``, else
#: ``~/.cache/mxrt/tuned_decode.json`` (:mod:`mxrt.ops.decode_table`).
ENV_TUNED_TABLE = "MXRT_TUNED_TABLE"


def tuned_table_path() -> Path:
    path = os.environ.get(ENV_TUNED_TABLE, "").strip()
    if path:
        return Path(path).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(cache) if cache else Path.home() / ".cache") / "mxrt" / "tuned_decode.json"


#: ``MXRT_GROUPED_GEMM_KERNEL``: force the kernel of the grouped GEMMs (``grouped_gemm_mx``, ``_wgrad``, the DeepGEMM
#: calls): ``torch`` (sm_90a: the torch route, exact dequantisation + ``torch._grouped_mm``,
#: mxrt/ops/grouped_gemm_torch.py; raises where it declines; every other value keeps the route out), ``generic``
#: (the portable kernel, e.g. for A/B timings) or the target's own (``sm90``: the Hopper grouped
#: engine, else the older Hopper kernel; ``sm90_ws`` / ``sm90_wgmma``: one of them, for A/B timings; ``gfx950``,
#: ``gfx942``: raises UnsupportedArchError with the kernels' reasons where none takes the problem). Unset or
#: ``auto``: the target's kernel where it takes the problem, else generic (:func:`mxrt.ops.grouped_gemm.choose_kernel`).
ENV_GROUPED_GEMM_KERNEL = "MXRT_GROUPED_GEMM_KERNEL"


_KEY_GROUPED_GEMM_KERNEL = os.fsencode(ENV_GROUPED_GEMM_KERNEL)


def grouped_gemm_kernel_override() -> str | None:
    raw = _env(ENV_GROUPED_GEMM_KERNEL, _KEY_GROUPED_GEMM_KERNEL)  # read on every grouped call (its plan key)
    v = "" if raw is None else raw.strip().lower()
    return None if v in ("", "auto") else v


#: ``MXRT_GROUPED_PLANS``: ``0`` turns off the call plans of ``grouped_gemm_mx`` / ``grouped_gemm_mx_wgrad`` (every
#: call validated and dispatched afresh; the A/B of their host cost in benchmarks/profile_route_host.py). Read on
#: every call. Default ``1``.
ENV_GROUPED_PLANS = "MXRT_GROUPED_PLANS"
_KEY_GROUPED_PLANS = os.fsencode(ENV_GROUPED_PLANS)


def grouped_plans_enabled() -> bool:
    raw = _env(ENV_GROUPED_PLANS, _KEY_GROUPED_PLANS)
    return raw is None or raw.strip().lower() not in ("0", "off", "false", "no")


#: ``MXRT_EP_DISPATCH``: how :func:`mxrt.ep.dispatch` lays its rows out. ``fused``: mxrt's device layout kernels
#: (kernels_src/moe/ep_*.hip: counting-sort send order and counts, packed row gathers, receive maps) with the counts'
#: exchange on a side stream; CPU tensors run the kernels' numpy twins (the tests' way to run this flow on gloo).
#: ``torch``: torch ops only (the session-8 path: bincount-free counts, radix argsort, index_select). Unset or
#: ``auto``: ``fused`` for CUDA tensors where CuPy imports and the kernels take the problem, else ``torch``.
ENV_EP_DISPATCH = "MXRT_EP_DISPATCH"


def ep_dispatch_mode() -> str:
    v = os.environ.get(ENV_EP_DISPATCH, "").strip().lower()
    return v or "auto"


#: ``LOCAL_RANK`` (set by ``torchrun``): the GPU ``python -m mxrt.ep.launch`` binds its process to (default 0).
#: ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR`` / ``MASTER_PORT`` are torch.distributed's own; the launcher fills
#: in :data:`EP_WORLD_OF_ONE` where they are unset (a run without torchrun is a world of one). mxrt.ep also
#: *writes* ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1`` (NVLink
#: multicast off, :data:`mxrt.ep.NVLS_OFF`) before NCCL starts; it never reads them.
ENV_LOCAL_RANK = "LOCAL_RANK"
EP_WORLD_OF_ONE = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511", "RANK": "0", "WORLD_SIZE": "1"}


def local_rank() -> int:
    raw = os.environ.get(ENV_LOCAL_RANK, "").strip()
    return int(raw) if raw else 0
