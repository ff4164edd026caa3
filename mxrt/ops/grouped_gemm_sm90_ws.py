"""The Hopper grouped engine (kernels_src/gemm/gemm_mx_grouped_sm90_ws.hip): the issue-10 engine ``gemm_mx_sm90_ws``
(persistent CTAs of 384 threads: a TMA thread, three scale warps, two consumer warpgroups) walking a grouped work list
built on the device. Which problems it takes, its launch geometry (pure host math, no cupy) and its launch
(:func:`launch_sm90_ws`, from :func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu`).

Serves the forward / dgrad by device ``group_lens`` (``"lens"``) and DeepGEMM's ``"indices"`` (per-row ids, -1 rows
untouched) and ``"masked"`` layouts with E8M0 row-major scales and bfloat16 / float16 out (e2m1 operands expanded to
e4m3 first, as :mod:`mxrt.ops.grouped_gemm_sm90`); the DeepGEMM layouts also with DeepGEMM's Hopper recipe (float32
scales, a 1x128, b 128x128: build ``SCALE_F32``, whose stage is one 128-K block accumulated over its four k32 steps in
the tensor core and promoted once, DeepGEMM's own precision; b's 128 x 128 scales read per block row in place).

Group sizes never leave the device: each CTA builds the schedule in shared memory (``"lens"``: the row offsets and
row-tile prefix of ``gemm_grouped_tiles.h``; ``"masked"``: the row-tile prefix of the clamped ``masked_m``, so only
tiles holding rows are walked; ``"indices"``: none, a tile's groups are found by warp reductions over its ids) and every
role walks the same tile sequence from it. The grid is ``min(#SMs, a host bound of the tiles)``, so a launch is
capture-safe as the older kernel's.

Declines (:func:`unsupported`; :data:`mxrt.ops.grouped_gemm_kernels.FALLBACK`, ``gemm_mx_grouped_sm90``, then the
generic kernel run these): the variable-K wgrad and the k-grouped wgrad, float32 out (e2m1 x e2m1 runs on the older
kernel), more than ``GROUPED_MAX_GROUPS`` groups in the masked layout (its schedule lives in shared memory), no group,
scale bases that are not 4-byte aligned (the scale warps copy 32-bit words), float32 scales in another recipe than
DeepGEMM's, and everything the older kernel declines (TMA alignment, k == 0, 2^31 sizes).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..problems.grouped_gemm import GroupedGemmProblem
from ..runtime.kernel_spec import Defines, defines
from ..runtime.launch import LaunchConfig
from . import grouped_gemm_sm90
from .grouped_gemm_kernels import (
    GEMM_MX_GROUPED_SM90_WS,
    GROUPED_GEMM_MODES,
    GROUPED_SM90_WS_KINDS,
    SM90_WS_STAGES,
)

TARGET = "sm_90a"
THREADS = 384  # the engine's block: two consumer warpgroups and the producer warpgroup
BM = BN = 128
_OUT = ("bfloat16", "float16")
_LIMIT = 2**31
#: the schedule's shared memory after the engine's (the kernel's GWS_SCHED_BYTES: 8 bytes of alignment, the scans'
#: i64 scratch per thread, starts[] and tiles[] of MXRT_MAX_GROUPS + 2 entries)
SCHED_BYTES = 8 + THREADS * 8 + 2 * (codes.GROUPED_MAX_GROUPS + 2) * 4


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tiles_bound(p: GroupedGemmProblem) -> int:
    """A host bound of the work list's output tiles (the device list may be shorter): lens ``(ceil(m/128) + G + 1)``
    row tiles (every group's, the tail's), indices ``ceil(m/128)`` (a tile's rounds run on the CTA that owns it),
    masked ``G * ceil(max_m/128)``; times ``ceil(n/128)`` column tiles."""
    if p.kind == "lens":
        rows = _cdiv(p.m, BM) + p.num_groups + 1
    elif p.kind == "indices":
        rows = _cdiv(p.m, BM)
    else:
        rows = p.num_groups * _cdiv(p.max_m, BM)
    return max(1, rows * _cdiv(p.n, BN))


def grid(p: GroupedGemmProblem, num_sms: int | None = None) -> tuple[int, int, int]:
    """Persistent: one CTA per SM (``num_sms``; None: one per tile of the bound), at most one per tile."""
    bound = tiles_bound(p)
    return (bound if num_sms is None else max(1, min(num_sms, bound)), 1, 1)


def smem_bytes() -> int:
    """The dense engine's ring and scale staging (mxrt/ops/gemm_sm90_ws.py) plus the schedule."""
    from .gemm_sm90 import smem_bytes as ring_bytes
    from .gemm_sm90_ws import staging_bytes

    return ring_bytes(BM, BN, SM90_WS_STAGES) + staging_bytes(SM90_WS_STAGES) + SCHED_BYTES


def unsupported(target: str, p: GroupedGemmProblem) -> str | None:
    """Why the grouped engine does not run ``p`` on ``target`` (a short reason), or None when it does. Device
    pointers are checked only for device problems (a host problem is uploaded to fresh, aligned buffers)."""
    if target != TARGET:
        return f"no Hopper grouped engine for target {target!r} (it needs {TARGET})"
    if p.kind not in GROUPED_SM90_WS_KINDS:
        return f"kind {p.kind!r}: the grouped engine runs {GROUPED_SM90_WS_KINDS} (the wgrads run on other kernels)"
    if dtype_name(p.out_dtype) not in _OUT:
        return (
            f"{dtype_name(p.out_dtype)} output: the grouped engine stores bfloat16 / float16 (e2m1 x e2m1 with fp32 "
            "out runs on gemm_mx_grouped_sm90)"
        )
    if p.scale_f32 or p.sf_k128:
        what = "float32" if p.scale_f32 else "UE8M0 per-128"
        if p.kind not in ("indices", "masked") or p.sf_gmn_b != 128:
            return f"{what} scales with kind {p.kind!r}, b's rows per scale {p.sf_gmn_b} (DeepGEMM's recipe only)"
        a_sf, b_sf, kb = tuple(p.a.scales.shape), tuple(p.b.scales.shape), int(p.b.shape[-1])
        if a_sf != (p.m, _cdiv(p.k, 128)) or b_sf != (p.num_groups * _cdiv(p.n, 128), _cdiv(kb, 128)):
            return f"{what} scales of shapes {a_sf}, {b_sf}: expected a 1x128 and b 128x128 per group, row-major"
        if max(a_sf[0] * a_sf[1], b_sf[0] * b_sf[1]) * 4 >= _LIMIT:
            return f"{what} scale bytes of a or b reach 2^31 (32-bit offsets)"
    # the TMA, format and size rules the two kernels share (the older one has no float32 scales)
    why = grouped_gemm_sm90.unsupported(target, p, f32_scales=True)
    if why is not None:
        return why
    if p.num_groups < 1:
        return "no group (the B map needs a row)"
    if p.kind == "masked" and p.num_groups > codes.GROUPED_MAX_GROUPS:
        return f"{p.num_groups} masked groups, the engine's schedule takes at most {codes.GROUPED_MAX_GROUPS}"
    if p.kind == "masked" and p.num_groups * _cdiv(p.max_m, BM) * BM >= _LIMIT:
        return f"G * ceil(max_m / 128) * 128 = {p.num_groups * _cdiv(p.max_m, BM) * BM} rows reach 2^31"
    if p.device:
        for name, scales in (("a", p.a.scales), ("b", p.b.scales)):
            if scales.data.ptr % 4:
                return f"{name} scales start at {scales.data.ptr:#x}, not 4-byte aligned (32-bit word copies)"
    return None


def kernel_defines(p: GroupedGemmProblem) -> Defines:
    return defines(
        A_FMT=grouped_gemm_sm90._KERNEL_FMT[p.a_fmt],
        B_FMT=grouped_gemm_sm90._KERNEL_FMT[p.b_fmt],
        MODE=GROUPED_GEMM_MODES[p.kind],
        OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        STAGES=SM90_WS_STAGES,
        **({"SCALE_F32": 1} if p.scale_f32 else {"SCALE_F32": 2} if p.sf_k128 else {}),
    )


def launch_config(p: GroupedGemmProblem, num_sms: int | None = None) -> LaunchConfig:
    return LaunchConfig(grid=grid(p, num_sms), block=(THREADS, 1, 1), shared_mem=smem_bytes())


_KERNELS: dict = {}
#: launch_sm90_ws's record of its launches while :func:`recording` is active on this thread (call plans)
_RECORD = threading.local()


@contextlib.contextmanager
def recording(into: list) -> Iterator[list]:
    """Append ``(kernel, cfg, args, map_ptrs)`` of every engine launch on this thread to ``into`` meanwhile:
    ``args`` with each array as its device pointer (``np.uint64``), ``map_ptrs`` the code buffers the tensor maps
    address (the inputs' own unless e2m1 codes were expanded)."""
    prev = getattr(_RECORD, "into", None)
    _RECORD.into = into
    try:
        yield into
    finally:
        _RECORD.into = prev


def _kernel(d: Defines, arch: Any, smem: int) -> Any:
    """The build of ``d`` with its shared-memory attribute set, cached (no build lookup per eager call)."""
    kernel = _KERNELS.get((d, arch, smem))
    if kernel is None:
        from ..runtime.compiler import build_with_smem

        kernel = _KERNELS[(d, arch, smem)] = build_with_smem(GEMM_MX_GROUPED_SM90_WS, d, arch, smem)
    return kernel


def _scalars(p: GroupedGemmProblem, flags: int) -> tuple:
    """The launch's arguments after the six pointers."""
    u32 = np.uint32
    kb = int(p.b.shape[-1])
    # scale row strides in bytes: E8M0 one byte per 32 K (or per 128 K); float32 one word per 128 K (b's rows:
    # 128-row blocks where the scales are per 128 K)
    if p.scale_f32:
        strides = (4 * _cdiv(p.k, 128), 4 * _cdiv(kb, 128))
    else:
        strides = (_cdiv(p.k, 128), _cdiv(kb, 128)) if p.sf_k128 else (_cdiv(p.k, 32), _cdiv(kb, 32))
    return (u32(p.m), u32(p.n), u32(p.k), u32(strides[0]), u32(strides[1]), u32(p.num_groups), u32(p.max_m),
            u32(flags))  # fmt: skip


def launch_sm90_ws(p: GroupedGemmProblem, groups: Any, out: Any, arch: Any, plan: Any = None) -> None:
    """Launch ``p`` (a device problem :func:`unsupported` accepted, ``out`` non-empty, bfloat16 as uint16) on the
    current stream; no host synchronisation. ``plan``: its :class:`mxrt.ops.grouped_gemm.GroupedPlan` (defines and
    launch configuration computed once), else computed here."""
    from ..runtime.launch import launch

    tma, tmb = grouped_gemm_sm90.tensor_maps(p, arch, BM, BN)
    d, cfg = (plan.defines, plan.cfg) if plan is not None else (kernel_defines(p), launch_config(p, arch.num_cus))
    kernel = _kernel(d, arch, cfg.shared_mem)
    args = (tma, tmb, p.a.scales, p.b.scales, out, groups, *_scalars(p, grouped_gemm_sm90.launch_flags(p, groups, out)))
    launch(p.op, kernel, cfg, args)
    into = getattr(_RECORD, "into", None)
    if into is not None:
        ptr = lambda x: np.uint64(x.data.ptr) if hasattr(x, "data") and hasattr(x.data, "ptr") else x  # noqa: E731
        a_map = p.a.data.data.ptr if p.a_fmt != "e2m1" else None
        b_map = p.b.data.data.ptr if p.b_fmt != "e2m1" else None
        into.append((kernel, cfg, tuple(ptr(x) for x in args), (a_map, b_map)))


class PreparedEngine:
    """The engine launch of one ``grouped_gemm_mx`` call signature (:func:`prepare`): kernel, configuration and
    scalars fixed, the two operand tensor maps memoised by pointer. A call takes raw device pointers and queues the
    one launch on CuPy's current stream (:class:`mxrt.runtime.launch.PreparedLaunch`). Call :meth:`usable` first."""

    __slots__ = ("_launch", "_map_a", "_map_b", "_pair_align", "_scalars")

    def __init__(self, pl: Any, map_a: Any, map_b: Any, scalars: tuple, pair_align: int) -> None:
        self._launch, self._map_a, self._map_b = pl, map_a, map_b
        self._scalars = tuple(int(v) for v in scalars)
        self._pair_align = pair_align  # 0, or the alignment paired stores need of ``out`` (FLAG_PAIRS)

    def usable(self) -> bool:
        return self._launch.usable()

    def __call__(self, a: int, sa: int, b: int, sb: int, groups: int, out: int) -> bool:
        """Queue the launch; False (nothing queued) where ``out`` is not aligned as the prepared stores need."""
        if self._pair_align and out % self._pair_align:
            return False
        self._launch(self._map_a(a), self._map_b(b), sa, sb, out, groups, *self._scalars)
        return True


def plannable(p: GroupedGemmProblem) -> bool:
    """Whether :func:`prepare` can keep ``p``'s launch: a ``"lens"`` problem whose operand codes the tensor maps
    address as they are (fp8: an e2m1 operand is expanded into a pool buffer first), with E8M0 scales."""
    return p.kind == "lens" and "e2m1" not in (p.a_fmt, p.b_fmt) and not (p.scale_f32 or p.sf_k128)


def prepare(p: GroupedGemmProblem, arch: Any, plan: Any) -> PreparedEngine | None:
    """The :class:`PreparedEngine` of a device problem on the engine (``plan``: its
    :class:`mxrt.ops.grouped_gemm.GroupedPlan`) that is :func:`plannable`, or None (also where launches go through
    CuPy's call)."""
    from ..runtime.launch import prepare as prepare_launch
    from .gemm_sm90 import TensorMapMemo, tensor_map_arg

    if not plannable(p):
        return None
    kp, kb, b_rows, dev = grouped_gemm_sm90.padded_k(p), int(p.b.shape[-1]), p.num_groups * p.n, p.a.data.data.device_id
    map_a, map_b = TensorMapMemo(p.m, kp, BM, dev), TensorMapMemo(b_rows, kp, BN, dev, stride=kb)
    pairs = p.n % 2 == 0  # launch_flags' FLAG_PAIRS for an out aligned to a pair (a fresh one always is)
    flags = (grouped_gemm_sm90.FLAG_PAIRS if pairs else 0) | (
        grouped_gemm_sm90.FLAG_I64 if dtype_name(p.groups.dtype) == "int64" else 0
    )
    kernel = _kernel(plan.defines, arch, plan.cfg.shared_mem)
    ptr = np.uint64(0)
    tma = tensor_map_arg(p.a.data.data.ptr, p.m, kp, BM, dev)
    tmb = tensor_map_arg(p.b.data.data.ptr, b_rows, kp, BN, dev, stride=kb)
    scalars = _scalars(p, flags)
    pl = prepare_launch(p.op, kernel, plan.cfg, (tma, tmb, ptr, ptr, ptr, ptr, *scalars))
    if pl is None:
        return None
    return PreparedEngine(pl, map_a, map_b, scalars, 4 if pairs else 0)  # 16-bit out: a pair is one 4-byte word
