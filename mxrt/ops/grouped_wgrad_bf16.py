"""The ``sm90_bf16`` route of the grouped GEMMs on sm_90a (the variable-K wgrad, and the forward / dgrad by
``group_lens`` with float32 out): exact dequantisation of both operands to bf16 (kernels_src/quant/dequantize_mx.hip,
as the torch route and ``sm90_cublas``), the groups' ranges on the device (kernels_src/gemm/grouped_offsets.hip: the
wgrad's columns clamped to ``[0, Mc]``, padded to ``align``, cut at ``Mc``, the generic kernel's MODE 3; the rows of
the forward clamped and cut at m, its MODE 0), and one wgmma kernel (kernels_src/gemm/gemm_wgrad_bf16_sm90.hip) in
128 x :data:`BN` output tiles, fp32 accumulation over each group's whole range in the tensor cores: MODE 0 the
wgrad's column ranges, MODE 1 each group's row tiles against its own weight rows (rows past the last group stored as
zeros). It serves what the torch route cannot: the wgrad with float32 out (its default: ``torch._grouped_mm`` writes
bf16 only) or ``accumulate``, every wgrad where torch is absent or a CUDA graph is being captured, and the forward /
dgrad with float32 out, all of which ran on the generic kernel (~0.03x ``torch._grouped_mm``); no host
synchronisation, CUDA-graph capturable. Measured (H100, session 15, RESULTS.md): float32 wgrad median 0.67x
``torch._grouped_mm`` bf16, fwd / dgrad 0.68x (eager), 0.68x / 0.71x kernel-only.

Exact for every input: the dequantisation passes raise a device gate word where a block's scale lies outside the
window in which bf16 operands and fp32 accumulation are exact, or a finite block holds a NaN / Inf code; the wgmma
kernel then returns before it writes anything, and the gated generic kernel computes every output (accumulating
into the untouched ``out``) with mxrt's exact semantics.

Envelope (:func:`unsupported`): the ``"wgrad"`` layout with ``Mc % 16 == 0`` and ``align % 16 == 0`` (every group's
range a whole number of k16 steps), or ``"lens"`` with ``k % 16 == 0`` (``b`` may be padded past k); at most
``codes.GROUPED_MAX_GROUPS`` groups, sizes below 2^31; the forward / dgrad with float32 out only (the other out
dtypes have the torch route and the grouped engine; a bf16-out build of MODE 1 spilled). Memory: the bf16
copies of both operands (``2 * rows * round_up(K, 8)`` bytes each), from CuPy's pool for the call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..errors import ShapeError
from ..problems.grouped_gemm import GroupedGemmProblem
from .dequant import check_dequant_limits
from .grouped_gemm_kernels import GEMM_WGRAD_BF16_SM90, WGRAD_BF16_STAGES
from .grouped_gemm_torch import padded  # the workspaces' row length, as the torch route's

NAME = "sm90_bf16"
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
    if p.kind not in ("wgrad", "lens"):
        return f"the {p.kind!r} layout (the route serves group_lens forward / dgrad and the variable-K wgrad)"
    if p.kind == "wgrad" and (p.k % 16 or p.align % 16):
        return f"Mc = {p.k}, align = {p.align}: expected multiples of 16 (each group's range whole k16 steps)"
    if p.kind == "lens" and p.k % 16:
        return f"k = {p.k}: expected a multiple of 16 (whole k16 steps)"
    if p.kind == "lens" and dtype_name(p.out_dtype) != "float32":
        return f"out dtype {dtype_name(p.out_dtype)} (the forward / dgrad here write float32 only)"
    b_rows = int(np.prod(p.b.shape[:-1]))
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


def _kernel(p: GroupedGemmProblem, arch: Any, bn: int) -> tuple[Any, Any]:
    """The build for ``p`` (cached with its shared-memory attribute set: no driver query per call) and its launch."""
    from ..runtime.launch import LaunchConfig

    lens = p.kind == "lens"
    st = WGRAD_BF16_STAGES[bn]
    smem = smem_bytes(st, bn)
    key = (codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)], bool(p.accumulate), lens, bn, arch)
    kernel = _KERNELS.get(key)
    if kernel is None:
        from ..runtime.compiler import build
        from ..runtime.kernel_spec import defines

        extra = {"MODE": 1} if lens else {}
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
    return kernel, LaunchConfig(grid, (384, 1, 1), smem)


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
    lens = p.kind == "lens"
    kp = padded(p.k)
    b_rows, kb = int(np.prod(p.b.shape[:-1])), int(p.b.shape[-1])  # lens: b may be padded past k (never multiplied)
    kbp = padded(kb)
    gate = alloc.zeros(1, np.uint32)
    bf = "bfloat16"
    wa = alloc.empty((p.m, kp), np.uint16)
    wb = alloc.empty((b_rows, kbp), np.uint16)
    launch_dequant(p.op, p.a.data, p.a.scales, wa, p.m, p.k, kp, p.a_fmt, None, bf, arch, gate)
    launch_dequant(p.op, p.b.data, p.b.scales, wb, b_rows, kb, kbp, p.b_fmt, None, bf, arch, gate)
    if lens:  # row ends: lengths clamped to [0, m], cut at m (the generic kernel's MODE 0; its tail rows are zeros)
        ends = launch_offsets(p.op, groups, p.m, 1, p.m, arch, None)
    else:  # column ends: clamped to [0, Mc], padded to align, cut at Mc (MODE 3)
        ends = launch_offsets(p.op, groups, p.k, p.align, p.k, arch, None)
    dev = wa.data.device_id
    tma = tensor_map_arg(wa.data.ptr, p.m, 2 * kp, _TILE, dev)
    tmb = tensor_map_arg(wb.data.ptr, b_rows, 2 * kbp, bn, dev)
    kernel, cfg = _kernel(p, arch, bn)
    u32 = np.uint32
    launch(p.op, kernel, cfg, (tma, tmb, out, ends, gate, u32(p.m), u32(p.n), u32(p.num_groups), u32(p.k)))
    return gate
