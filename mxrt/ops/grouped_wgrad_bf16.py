"""The ``sm90_bf16`` route of the grouped GEMMs on sm_90a (the variable-K wgrad, and the forward / dgrad by
``group_lens`` with float32 out): exact dequantisation of both operands to bf16 (kernels_src/quant/dequantize_mx.hip,
as the torch route and ``sm90_cublas``), the groups' ranges on the device (kernels_src/gemm/grouped_offsets.hip: the
wgrad's columns clamped to ``[0, Mc]``, padded to ``align``, cut at ``Mc``, the generic kernel's MODE 3; the rows of
the forward clamped and cut at m, its MODE 0), and one wgmma kernel (kernels_src/gemm/gemm_wgrad_bf16_sm90.hip) in
128 x :data:`BN` output tiles, fp32 accumulation over each group's whole range in the tensor cores: MODE 0 the
wgrad's column ranges, MODE 1 each group's row tiles against its own weight rows (rows past the last group stored as
zeros). It serves what the torch route cannot: the wgrad with float32 out (its default: ``torch._grouped_mm`` writes
bf16 only) or ``accumulate``, every wgrad where torch is absent or a CUDA graph is being captured, and the forward /
dgrad with float32 out, all of which ran on the generic kernel (~0.03x ``torch._grouped_mm``); and DeepGEMM's
k-grouped wgrad (``"kgrouped"``: each group's K-major blocks one after another), whose operands one pass
(kernels_src/gemm/kgrouped_to_bf16.hip) lays out as bf16 ``[rows, sum(ks)]`` matrices: UE8M0 scales folded in
exactly (then MODE 0, as the wgrad), or with DeepGEMM's float32 scales the codes alone, the scales applied per
128 columns by MODE 2 (one partial per 128 columns in the tensor core, promoted once: fp32 accumulation throughout).
No host synchronisation, CUDA-graph capturable. Measured (H100, session 15, RESULTS.md): float32 wgrad median 0.67x
``torch._grouped_mm`` bf16, fwd / dgrad 0.68x (eager), 0.68x / 0.71x kernel-only.

Exact for every input: the dequantisation passes raise a device gate word where a block's scale lies outside the
window in which bf16 operands and fp32 accumulation are exact, or a finite block holds a NaN / Inf code; the wgmma
kernel then returns before it writes anything, and the gated generic kernel computes every output (accumulating
into the untouched ``out``) with mxrt's exact semantics.

Envelope (:func:`unsupported`): the ``"wgrad"`` layout with ``Mc % 16 == 0`` and ``align % 16 == 0`` (every group's
range a whole number of k16 steps), ``"lens"`` with ``k % 16 == 0`` (``b`` may be padded past k), ``"kgrouped"`` with
fp8 codes (ks multiples of 32, of 128 with float32 scales: the pass raises the gate where the device ks are not); at
most ``codes.GROUPED_MAX_GROUPS`` groups, sizes below 2^31; the forward / dgrad with float32 out only (the other out
dtypes have the torch route and the grouped engine; a bf16-out build of MODE 1 spilled). Memory: the bf16 copies of both
operands (``2 * rows * round_up(K, 8)`` bytes each), from CuPy's pool for the call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..errors import ShapeError
from ..problems.grouped_gemm import GroupedGemmProblem
from ..runtime.kernel_spec import defines
from .dequant import check_dequant_limits
from .grouped_gemm_kernels import GEMM_WGRAD_BF16_SM90, WGRAD_BF16_STAGES
from .grouped_gemm_torch import padded  # the workspaces' row length, as the torch route's

NAME = "sm90_bf16"
_FP8 = ("e4m3", "e5m2")
TARGET = "sm_90a"
_LIMIT = 2**31
_TILE = 128


#: output tile width (define BN; 128 or 256): measured in session 15 (benchmarks/bench_grouped_gemm.py --wgrad-bn)
BN = 256


def smem_bytes(stages: int, bn: int = BN) -> int:
    """The kernel's dynamic shared memory: ``stages`` x (a 128-row and a ``bn``-row tile of 64 bf16), the mbarriers,
    1 KB of alignment."""
    return stages * (16384 + bn * 128) + 16 * stages + 1024


def unsupported(target: str, p: GroupedGemmProblem) -> str | None:
    """Why this route cannot run ``p`` on ``target`` (None: it can)."""
    if target != TARGET:
        return f"the bf16 route runs on {TARGET}, not {target!r}"
    if p.kind not in ("wgrad", "lens", "kgrouped"):
        return f"the {p.kind!r} layout (the route serves group_lens forward / dgrad and the variable-K wgrads)"
    if p.kind == "kgrouped" and (p.a_fmt not in _FP8 or p.b_fmt not in _FP8 or p.k % (128 if p.scale_f32 else 32)):
        return (
            f"k-grouped formats ({p.a_fmt}, {p.b_fmt}) or sum(ks) = {p.k} (expected fp8 codes, a multiple of 32; "
            "of 128 with float32 scales)"
        )
    if p.kind == "wgrad" and (p.k % 16 or p.align % 16):
        return f"Mc = {p.k}, align = {p.align}: expected multiples of 16 (each group's range whole k16 steps)"
    if p.kind == "lens" and p.k % 16:
        return f"k = {p.k}: expected a multiple of 16 (whole k16 steps)"
    if p.kind == "lens" and dtype_name(p.out_dtype) != "float32":
        return f"out dtype {dtype_name(p.out_dtype)} (the forward / dgrad here write float32 only)"
    b_rows = int(np.prod(p.b.shape[:-1]))
    if p.kind == "kgrouped":  # a / b: [m | n, sum(ks)] views of the flat codes
        if max(p.m, p.n, p.k) >= _LIMIT or max(p.m, p.n) * p.k >= 2**40 or p.num_groups * p.m * p.n >= 2**40:
            return "sizes of 2^31 or more (32-bit TMA coordinates and grid)"
        return None if 1 <= p.num_groups <= codes.GROUPED_MAX_GROUPS else f"{p.num_groups} groups"
    if not 1 <= p.num_groups <= codes.GROUPED_MAX_GROUPS:
        return f"{p.num_groups} groups (the exact fallback takes 1 to {codes.GROUPED_MAX_GROUPS})"
    tiles = -(-p.m // _TILE) * -(-p.n // _TILE) + (p.num_groups + 1) * -(-p.n // _TILE)
    if max(p.m, p.n, b_rows, 2 * padded(int(p.b.shape[-1])), tiles) >= _LIMIT:
        return "sizes of 2^31 or more (32-bit TMA coordinates, offsets and grid)"
    for rows, cols in ((p.m, p.k), (b_rows, int(p.b.shape[-1]))):
        try:
            check_dequant_limits(p.op, rows, cols, None)
        except ShapeError as e:  # the reason, not an error, while choosing a route
            return str(e)
    return None


_KERNELS: dict = {}


def _kernel(p: GroupedGemmProblem, arch: Any, bn: int) -> tuple[Any, Any, int]:
    """The build for ``p`` (cached with its shared-memory attribute set: no driver query per call), its launch and
    its tile width (MODE 2: 128 whatever ``bn`` asks)."""
    from ..runtime.launch import LaunchConfig

    lens = p.kind == "lens"
    mode = 1 if lens else (2 if p.kind == "kgrouped" and p.scale_f32 else 0)
    bn = 128 if mode == 2 else bn  # MODE 2 holds a partial beside the accumulators: 128 columns
    st = WGRAD_BF16_STAGES[bn]
    smem = smem_bytes(st, bn)
    key = (codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)], bool(p.accumulate), mode, bn, arch)
    kernel = _KERNELS.get(key)
    if kernel is None:
        from ..runtime.compiler import build

        extra = {"MODE": mode} if mode else {}
        d = defines(ACCUM=int(p.accumulate), BN=bn, OUT_DTYPE=key[0], STAGES=st, **extra)
        kernel = build(GEMM_WGRAD_BF16_SM90, d, arch)
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        _KERNELS[key] = kernel
    tiles_n = -(-p.n // bn)
    if lens:  # the groups' row tiles (host bound ceil(m / 128) + G), the tail's, x the column tiles
        grid = ((-(-p.m // _TILE) + p.num_groups + 1) * tiles_n, 1, 1)
    else:
        grid = (-(-p.m // _TILE) * tiles_n, 1, p.num_groups)
    return kernel, LaunchConfig(grid, (384, 1, 1), smem), bn


def _widths(p: GroupedGemmProblem) -> tuple[int, int, int, int]:
    """``(kp, b_rows, kb, kbp)``: a's workspace row length, b's rows and K (``"lens"``: b may be padded past k, never
    multiplied) and its workspace row length."""
    b_rows, kb = int(np.prod(p.b.shape[:-1])), int(p.b.shape[-1])
    return padded(p.k), b_rows, kb, padded(kb)


def _ends(p: GroupedGemmProblem) -> tuple[int, int, int]:
    """grouped_offsets' ``(cap, pad, total)``: the forward's row ends clamped to [0, m] and cut at m (the generic
    kernel's MODE 0; its tail rows are zeros); the wgrad's column ends clamped to [0, Mc], padded to align, cut at Mc
    (MODE 3)."""
    return (p.m, 1, p.m) if p.kind == "lens" else (p.k, p.align, p.k)


def run(p: GroupedGemmProblem, groups: Any, out: Any, arch: Any, bn: int | None = None) -> Any:
    """Queue the route on CuPy's current stream, writing ``out`` (a device ``[G, m, n]`` / ``[m, n]`` array; bf16 as
    uint16; ``bn``: the output tile width, 128 or 256, default :data:`BN`), and return the device gate word for the
    caller's gated generic launch (:func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu`), which recomputes every output where
    it is raised. No host synchronisation."""
    from ..runtime import alloc
    from ..runtime.launch import launch
    from .dequant import launch_dequant
    from .gemm_sm90 import tensor_map_arg
    from .grouped_gemm_torch import launch_offsets

    bn = BN if bn is None else bn
    if p.kind == "kgrouped":
        return _run_kgrouped(p, groups, out, arch, bn)
    kp, b_rows, kb, kbp = _widths(p)
    gate = alloc.zeros(1, np.uint32)
    bf = "bfloat16"
    wa = alloc.empty((p.m, kp), np.uint16)
    wb = alloc.empty((b_rows, kbp), np.uint16)
    launch_dequant(p.op, p.a.data, p.a.scales, wa, p.m, p.k, kp, p.a_fmt, None, bf, arch, gate)
    launch_dequant(p.op, p.b.data, p.b.scales, wb, b_rows, kb, kbp, p.b_fmt, None, bf, arch, gate)
    ends = launch_offsets(p.op, groups, *_ends(p), arch, None)
    dev = wa.data.device_id
    tma = tensor_map_arg(wa.data.ptr, p.m, 2 * kp, _TILE, dev)
    tmb = tensor_map_arg(wb.data.ptr, b_rows, 2 * kbp, bn, dev)
    kernel, cfg, bn = _kernel(p, arch, bn)
    u32, null = np.uint32, np.uint64(0)
    args = (tma, tmb, out, ends, gate, u32(p.m), u32(p.n), u32(p.num_groups), u32(p.k), null, null)
    launch(p.op, kernel, cfg, args)
    return gate


def _run_kgrouped(p: GroupedGemmProblem, groups: Any, out: Any, arch: Any, bn: int) -> Any:
    """DeepGEMM's k-grouped wgrad (``p.a`` / ``p.b``: the flat codes viewed ``[m | n, sum(ks)]``, scales ``[m | n,
    sum(ks) / 32]`` UE8M0 or ``[m | n, sum(ks) / 128]`` float32): the group ends (a bad split raises the gate), one
    pass per operand into bf16 ``[rows, sum(ks)]`` (the gate where a block leaves the window or an end is not a
    multiple of 32, of 128 with float32 scales), and the GEMM: MODE 0 on the scaled operands, or MODE 2 with the
    float32 scales transposed to ``[sum(ks) / 128, rows]`` (one row of factors per 128 columns)."""
    from ..runtime import alloc
    from ..runtime.compiler import build
    from ..runtime.launch import LaunchConfig, launch
    from .gemm_sm90 import tensor_map_arg
    from .grouped_gemm_kernels import KGROUPED_TO_BF16, KGROUPED_TO_BF16_THREADS
    from .grouped_gemm_torch import launch_offsets

    u32, null = np.uint32, np.uint64(0)
    total, g = p.k, p.num_groups
    gate = alloc.zeros(1, np.uint32)
    ends = launch_offsets(p.op, groups, total, 1, total, arch, gate)  # the generic kernel's MODE 4 ends
    scaled = not p.scale_f32
    ws = []
    for x, fmt, rows in ((p.a, p.a_fmt, p.m), (p.b, p.b_fmt, p.n)):
        w = alloc.empty((rows, total), np.uint16)
        d = defines(EFMT=codes.FMT_CODES[fmt], SCALED=int(scaled), THREADS=KGROUPED_TO_BF16_THREADS)
        blocks = max(1, min(-(-rows * total // (16 * KGROUPED_TO_BF16_THREADS)), 2**20))
        cfg = LaunchConfig((blocks, 1, 1), (KGROUPED_TO_BF16_THREADS, 1, 1), 0)
        align = u32(32 if scaled else 128)  # the ends MODE 0's chunks / MODE 2's blocks need (else the gate)
        args = (x.data, x.scales if scaled else null, w, ends, gate, u32(rows), u32(total), u32(g), align)
        launch(p.op, build(KGROUPED_TO_BF16, d, arch), cfg, args)
        ws.append(w)
    kernel, cfg, bn = _kernel(p, arch, bn)
    dev = ws[0].data.device_id
    tma = tensor_map_arg(ws[0].data.ptr, p.m, 2 * total, _TILE, dev)
    tmb = tensor_map_arg(ws[1].data.ptr, p.n, 2 * total, bn, dev)
    if scaled:
        fa = fb = null
    else:  # [rows, sum(ks) / 128] -> [sum(ks) / 128, rows]: a block's factors contiguous
        fa, fb = (x.scales.T.copy() for x in (p.a, p.b))
    args = (tma, tmb, out, ends, gate, u32(p.m), u32(p.n), u32(g), u32(total), fa, fb)
    launch(p.op, kernel, cfg, args)
    return gate


#: the layouts :func:`prepare` keeps (DeepGEMM's k-grouped wgrad has its own pass and an API of its own plans)
PLANNED_KINDS = ("lens", "wgrad")


class PreparedBf16:
    """The route of one call signature (``"lens"`` / ``"wgrad"``) with every decision made (:func:`prepare`): the
    prepared launches ``(dequantise a, dequantise b, group ends, wgmma kernel, gated fallback)`` with their trailing
    scalars, the workspace layout and the two workspace tensor maps memoised by pointer.

    A call (:meth:`__call__`) takes raw device pointers and queues on CuPy's current stream what :func:`run` and the
    gated generic launch after it queue: one pool allocation holding both bf16 workspaces, the group ends and the
    gate word (cleared by one cudaMemsetAsync), the two dequantisations, the group-ends kernel, the wgmma kernel and
    the fallback, which recomputes everything where the gate is raised. Call :meth:`usable` first (the launch route
    and the current device)."""

    __slots__ = ("_bn", "_launches", "_maps", "_memset", "_offs", "_stream", "_total", "_values")

    def __init__(self, launches: tuple, values: tuple, maps: tuple, offs: tuple[int, int, int], bn: int) -> None:
        import cupy

        self._launches, self._values, self._maps, self._bn = launches, values, maps, bn
        self._offs = offs  # byte offsets of b's workspace, the group ends and the gate word after a's
        self._total = offs[2] + 4
        self._memset, self._stream = cupy.cuda.runtime.memsetAsync, cupy.cuda.get_current_stream

    def usable(self) -> bool:
        """The launch route and device, and the tile width :data:`BN` the plan was made with (a benchmark or a test
        may set another)."""
        return self._bn == BN and self._launches[0].usable()

    def __call__(self, a: int, sa: int, b: int, sb: int, lens: int, out: int) -> bool:
        from ..runtime import alloc

        ws = alloc.empty(self._total, np.uint8)  # kept alive until every launch below is queued
        wa = ws.data.ptr
        wb, offs, gate = wa + self._offs[0], wa + self._offs[1], wa + self._offs[2]
        self._memset(gate, 0, 4, self._stream().ptr)
        pa, pb, po, pk, pf = self._launches
        va, vb, vo, vk, vf = self._values
        pa(a, sa, wa, gate, *va)
        pb(b, sb, wb, gate, *vb)
        po(lens, offs, 0, *vo)
        pk(self._maps[0](wa), self._maps[1](wb), out, offs, gate, *vk, 0, 0)
        pf(a, sa, b, sb, out, lens, *vf, gate)
        return True


def prepare(p: GroupedGemmProblem, arch: Any, fallback: tuple[Any, Any, tuple]) -> PreparedBf16 | None:
    """:func:`run` and the gated fallback of ``p``'s call signature as one :class:`PreparedBf16`, or None (DeepGEMM's
    k-grouped layout; launches through CuPy's call). ``fallback``: the generic kernel's ``(kernel, cfg, scalars)``
    (:func:`mxrt.ops.grouped_gemm.plain_entry`). What the launches depend on besides sizes (the code buffers' 16-byte
    alignment, the lengths' dtype) is part of the plan key (:mod:`mxrt.api.grouped_gemm`); the workspaces start at
    1024-byte boundaries of one pool allocation."""
    from ..runtime.launch import prepare as prepare_launch
    from .dequant import dequant_entry
    from .gemm_sm90 import TensorMapMemo, tensor_map_arg
    from .grouped_gemm_torch import offsets_entry

    if p.kind not in PLANNED_KINDS:
        return None
    kp, b_rows, kb, kbp = _widths(p)
    up = lambda x: -(-x // 1024) * 1024  # noqa: E731
    off_b = up(2 * p.m * kp)
    off_offs = off_b + up(2 * b_rows * kbp)
    offs = (off_b, off_offs, off_offs + 4 * p.num_groups)
    ws, bf = 1 << 20, "bfloat16"  # any 1024-byte aligned address: the workspaces' vector stores are on
    ea = dequant_entry(p.a.data.data.ptr, ws, p.a.scales, p.m, p.k, kp, p.a_fmt, None, bf, arch, True)
    eb = dequant_entry(p.b.data.data.ptr, ws, p.b.scales, b_rows, kb, kbp, p.b_fmt, None, bf, arch, True)
    eo = offsets_entry(p.groups, *_ends(p), arch)
    kernel, cfg, bn = _kernel(p, arch, BN)
    dev = p.a.data.data.device_id
    maps = (TensorMapMemo(p.m, 2 * kp, _TILE, dev), TensorMapMemo(b_rows, 2 * kbp, bn, dev))
    u32, ptr = np.uint32, np.uint64(0)
    tma = tensor_map_arg(ws, p.m, 2 * kp, _TILE, dev)
    tmb = tensor_map_arg(ws, b_rows, 2 * kbp, bn, dev)
    ek = (kernel, cfg, (u32(p.m), u32(p.n), u32(p.num_groups), u32(p.k)))
    # (entry, leading arguments, trailing pointers): the kernel's two maps and three pointers, then two null pointers
    entries = ((ea, (ptr,) * 4, 0), (eb, (ptr,) * 4, 0), (eo, (ptr,) * 3, 0), (ek, (tma, tmb, ptr, ptr, ptr), 2),
               (fallback, (ptr,) * 6, 1))  # fmt: skip
    launches, values = [], []
    for (k, c, scalars), head, tail in entries:
        pl = prepare_launch(p.op, k, c, (*head, *scalars, *(ptr,) * tail))
        if pl is None:
            return None
        launches.append(pl)
        values.append(tuple(int(v) for v in scalars))
    return PreparedBf16(tuple(launches), tuple(values), maps, offs, BN)
