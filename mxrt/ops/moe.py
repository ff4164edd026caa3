"""GPU twin of :func:`mxrt.moe_align_block_size` (kernels_src/moe/), vLLM semantics, deterministic.

A stable counting sort, bit-identical to the numpy reference (ascending flat index inside each expert's segment):

- ``numel <= SMALL_NUMEL`` (decode batches): one kernel, one CTA (``moe_align_block_size``) counts, scans and
  scatters in shared memory;
- larger ``numel``: three kernels over ``num_ctas`` contiguous chunks: per-chunk histograms
  (``_count``), per-expert prefix over chunks and the padded scan over experts (``_scan``, one CTA), and the
  stable scatter plus padding and ``expert_ids`` (``_scatter``).

Outputs stay on the device and every size is computed on the host from shapes, so the op never synchronises
with the host and can be captured in a CUDA graph. numpy in -> numpy out (uploaded and downloaded here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kinds import is_device_array
from ..errors import DtypeError, LayoutError, ShapeError
from ..layouts._check import cdiv, check_int32_limit
from ..layouts.moe import _check_ids, check_expert_map, moe_align_capacity
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import moe_kernels

#: numel up to which the one-CTA kernel runs.
SMALL_NUMEL = 4096
#: experts the one-CTA kernel holds in shared memory: (3E+1)*4 bytes = 24 KiB at 2048.
SMALL_MAX_EXPERTS = 2048
#: experts the multi-CTA kernels hold in shared memory: E*4 bytes = 32 KiB at 8192.
MAX_EXPERTS = 8192
#: fewest ids per CTA of the multi-CTA path, most CTAs, and the largest workspace histogram (int32 words).
MIN_CHUNK = 2048
MAX_CTAS = 1024
MAX_HIST_WORDS = 2**22

_ID_BYTES = {"int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
_MAP_BYTES = {"int32": 4, "int64": 8}


@dataclass(frozen=True)
class MoeAlignPlan:
    """How one call runs: the one-CTA kernel (``small``) or ``num_ctas`` chunks of ``chunk`` ids, and the
    launch configurations (with their dynamic shared memory)."""

    small: bool
    num_ctas: int
    chunk: int
    configs: tuple[LaunchConfig, ...]  # small: (fused,); else (count, scan, scatter)
    workspace_words: int


def plan_moe_align(numel: int, num_experts: int) -> MoeAlignPlan:
    """The launch plan for ``numel`` ids and ``num_experts`` experts (``num_experts <= MAX_EXPERTS``)."""
    t = moe_kernels.MOE_THREADS
    e = num_experts
    if numel <= SMALL_NUMEL and e <= SMALL_MAX_EXPERTS:
        cfg = LaunchConfig(grid=(1, 1, 1), block=(t, 1, 1), shared_mem=(3 * e + 1) * 4)
        return MoeAlignPlan(True, 1, max(numel, 1), (cfg,), 0)
    ctas = max(1, min(cdiv(numel, MIN_CHUNK), MAX_CTAS, MAX_HIST_WORDS // e))
    chunk = cdiv(cdiv(max(numel, 1), ctas), t) * t
    ctas = max(1, cdiv(numel, chunk))
    count = LaunchConfig(grid=(ctas, 1, 1), block=(t, 1, 1), shared_mem=e * 4)
    scan = LaunchConfig(grid=(1, 1, 1), block=(t, 1, 1))
    scatter = LaunchConfig(grid=(ctas, 1, 1), block=(t, 1, 1), shared_mem=e * 4)
    return MoeAlignPlan(False, ctas, chunk, (count, scan, scatter), ctas * e + 2 * e + 1)


def _empty(shape: tuple[int, ...]) -> Any:
    """int32 output allocation (poisoned inside mxrt.runtime.debug(poison=...))."""
    return alloc.empty(shape, np.int32)


def _device_ids(op: str, ids: Any) -> int:
    """Validate a CuPy ``topk_ids``; returns its ID_BYTES."""
    name = str(ids.dtype)
    if name not in _ID_BYTES:
        raise DtypeError(
            f"{op}: argument 'topk_ids' is a CuPy array of dtype {name}, expected int32, int64, uint32 or uint64 "
            "(pass topk_ids.astype(cupy.int32))"
        )
    if ids.ndim == 0:
        raise ShapeError(f"{op}: argument 'topk_ids' has shape (), expected [num_tokens, topk]")
    if not ids.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument 'topk_ids' has strides {ids.strides} for shape {tuple(ids.shape)}: the kernels read the "
            "flat index i = t*topk + j of a C-contiguous array (pass cupy.ascontiguousarray(topk_ids))"
        )
    check_int32_limit(int(ids.size), op, "topk_ids.size")
    return _ID_BYTES[name]


def _device_map(op: str, expert_map: Any, num_experts: int) -> tuple[Any, int]:
    if expert_map is None:
        return None, 0
    if not is_device_array(expert_map):
        raise DtypeError(
            f"{op}: argument 'expert_map' is a {type(expert_map).__name__} while topk_ids is a CuPy array; pass "
            "cupy.asarray(expert_map) (mxrt makes no implicit host-to-device copy)"
        )
    name = str(expert_map.dtype)
    if name not in _MAP_BYTES:
        raise DtypeError(f"{op}: argument 'expert_map' has dtype {name}, expected int32 or int64")
    if tuple(expert_map.shape) != (num_experts,):
        raise ShapeError(
            f"{op}: argument 'expert_map' has shape {tuple(expert_map.shape)}, expected ({num_experts},) = "
            "[num_experts]"
        )
    if not expert_map.flags.c_contiguous:
        raise LayoutError(f"{op}: argument 'expert_map' has strides {expert_map.strides}, expected contiguous")
    return expert_map, _MAP_BYTES[name]


def _check_experts(op: str, num_experts: int) -> None:
    if num_experts > MAX_EXPERTS:
        raise ShapeError(
            f"{op}: argument 'num_experts' is {num_experts}, the GPU kernels hold per-expert counts in shared memory "
            f"and support at most {MAX_EXPERTS} (backend='numpy' has no limit)"
        )


def moe_align_block_size_gpu(
    topk_ids: Any,
    block_size: int,
    num_experts: int,
    expert_map: Any = None,
    *,
    pad_sorted_ids: bool = False,
) -> tuple[Any, Any, Any]:
    """GPU twin of :func:`mxrt.moe_align_block_size` (same arguments, bit-identical result).

    CuPy ``topk_ids`` (int32/int64/uint32/uint64, C-contiguous, any rank >= 1) and an optional CuPy
    ``expert_map`` (int32/int64 ``[num_experts]``): returns CuPy ``(sorted_token_ids, expert_ids,
    num_tokens_post_padded)``, all int32, with no host synchronisation. Values are not read back, so ids < 0 in a
    CuPy array are skipped like ids >= num_experts (the numpy twin raises on them), and ``expert_map`` values
    are used as they are (int64 values are truncated to int32).
    """
    op = "moe_align_block_size"
    device_in = is_device_array(topk_ids)
    if device_in:
        id_bytes = _device_ids(op, topk_ids)
        numel = int(topk_ids.size)
        bs, e_num, cap = moe_align_capacity(numel, block_size, num_experts, pad_sorted_ids, op)
        emap, map_bytes = _device_map(op, expert_map, e_num)
        ids = topk_ids
    else:
        import cupy

        host = _check_ids(topk_ids, op)
        numel = host.size
        bs, e_num, cap = moe_align_capacity(numel, block_size, num_experts, pad_sorted_ids, op)
        emap, map_bytes = None, 0
        if expert_map is not None:
            emap, map_bytes = cupy.asarray(check_expert_map(expert_map, e_num, op).astype(np.int32)), 4
        id_bytes = 8 if host.dtype.itemsize == 8 else 4
        host = host.view(np.int64) if id_bytes == 8 else host.astype(np.int32)  # unsigned: same bits
        ids = cupy.asarray(np.ascontiguousarray(host).reshape(-1))
    _check_experts(op, e_num)
    sorted_ids, expert_ids, post = _empty((cap,)), _empty((cdiv(cap, bs),)), _empty((1,))
    run_moe_align(ids, sorted_ids, expert_ids, post, emap, map_bytes, numel, e_num, bs, cap, id_bytes)
    if not device_in:
        return sorted_ids.get(), expert_ids.get(), post.get()
    return sorted_ids, expert_ids, post


def run_moe_align(
    ids: Any,
    sorted_ids: Any,
    expert_ids: Any,
    post: Any,
    emap: Any,
    map_bytes: int,
    numel: int,
    num_experts: int,
    block_size: int,
    cap: int,
    id_bytes: int,
) -> None:
    """Launch the plan for validated device arguments (outputs allocated by the caller)."""
    op = "moe_align_block_size"
    arch = get_arch()
    d = defines(ID_BYTES=id_bytes, THREADS=moe_kernels.MOE_THREADS)
    p = plan_moe_align(numel, num_experts)
    emap_arg = emap if emap is not None else post  # never read when map_bytes == 0
    e, bs, i32 = num_experts, block_size, np.int32
    if p.small:
        kernel = build(moe_kernels.MOE_ALIGN_BLOCK_SIZE, d, arch)
        args = (ids, sorted_ids, expert_ids, post, emap_arg, i32(numel), i32(e), i32(bs), i32(cap), i32(map_bytes))
        launch(op, kernel, p.configs[0], args)
        return
    ws = _empty((p.workspace_words,))
    count, scan, scatter = p.configs
    k_count = build(moe_kernels.MOE_ALIGN_BLOCK_SIZE_COUNT, d, arch)
    k_scan = build(moe_kernels.MOE_ALIGN_BLOCK_SIZE_SCAN, d, arch)
    k_scatter = build(moe_kernels.MOE_ALIGN_BLOCK_SIZE_SCATTER, d, arch)
    launch(op, k_count, count, (ids, ws, i32(numel), i32(e), i32(p.chunk)))
    launch(op, k_scan, scan, (ws, post, i32(e), i32(p.num_ctas), i32(bs)))
    args = (ids, sorted_ids, expert_ids, ws, emap_arg, i32(numel), i32(e), i32(bs), i32(cap), i32(p.chunk))
    launch(op, k_scatter, scatter, (*args, i32(p.num_ctas), i32(map_bytes)))


def moe_align_unsupported(topk_ids: Any, block_size: Any = None, num_experts: Any = None, **_: Any) -> str | None:
    """Why a numpy call has no kernel (``backend="auto"`` then runs numpy); CuPy inputs get the op's typed error."""
    if is_device_array(topk_ids):
        return None
    if isinstance(num_experts, (int, np.integer)) and not isinstance(num_experts, bool):
        if int(num_experts) > MAX_EXPERTS:
            return f"argument 'num_experts' is {num_experts}, the GPU kernels support at most {MAX_EXPERTS}"
    return None
