"""The portable GEMM path ``"generic"`` (priority 0, any CUDA or ROCm GPU): kernels_src/gemm/gemm_mx_generic.hip
and, for deterministic split-K, kernels_src/gemm/gemm_mx_splitk_reduce.hip.

Accumulation modes (``p.split_k``, ``p.deterministic``): split_k == 1 stores ``out``; deterministic split-K
writes an fp32 workspace reduced in split order; atomic split-K adds into ``out`` (fp32 or packed bf16x2 / f16x2
atomics). The mode logic and the reduce launch are shared with the other paths: :mod:`mxrt.ops.gemm_splitk`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..errors import ShapeError
from ..layouts import scale_layout_shape
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_kernels
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path
from .gemm_splitk import run_split_k

_U32 = 2**32
_FLAG_VEC_A, _FLAG_VEC_B = codes.GEMM_FLAG_VEC_A, codes.GEMM_FLAG_VEC_B


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _supports(dg: DeviceGemm) -> str | None:
    if (dg.p.a_fmt, dg.p.b_fmt) not in GEMM_FORMAT_PAIRS:
        return f"formats ({dg.p.a_fmt}, {dg.p.b_fmt}) are not a GEMM pair"
    return None


def check_limits(dg: DeviceGemm) -> None:
    """Typed errors for what the kernels cannot index: u32 sizes and scale offsets, grid y/z limits. Element and
    output offsets are 64-bit in the kernels, so m * k, n * k and split_k * m * n may exceed 2^32."""
    p = dg.p
    op = p.op
    if p.k >= _U32 - 64:
        raise ShapeError(f"{op}: k = {p.k}, expected k < 2^32 - 64 (32-bit K indices in gemm_mx_generic)")
    bm, _ = gemm_kernels.GEMM_GENERIC_TILE
    if _cdiv(p.m, bm) > MAX_GRID_YZ:
        raise ShapeError(f"{op}: m = {p.m} needs {_cdiv(p.m, bm)} row tiles of {bm}, at most {MAX_GRID_YZ} (grid y)")
    if p.split_k > MAX_GRID_YZ:
        raise ShapeError(f"{op}: split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)")
    for name, rows, layout in (("a", p.m, p.a_scale_layout), ("b", p.n, p.b_scale_layout)):
        cols = p.k_blocks
        sm, sn = scale_layout_shape(layout, rows, cols) if layout else (rows, cols)
        if sm * sn >= _U32:
            raise ShapeError(
                f"{op}: {name}.scales store {sm} x {sn} bytes (layout {layout!r}), expected fewer than 2^32: the "
                "kernels index scales with 32-bit offsets"
            )


def _scale_args(layout: str | None, scales) -> tuple[np.uint32, np.uint32]:
    shift = 2 if layout == "turbo16x4" and dtype_name(scales.dtype) == "uint32" else 0
    return np.uint32(codes.SCALE_LAYOUT_CODES[layout]), np.uint32(shift)


def _row_bytes(fmt: str, k: int) -> int:
    return _cdiv(k, 2) if fmt == "e2m1" else k


def _gemm_entry(dg: DeviceGemm, out_code: int, atomic: bool) -> tuple[Any, LaunchConfig, tuple]:
    """The kernel, launch configuration and trailing scalars ``(m, n, k, split_k, la, lb, sa_shift, sb_shift,
    flags)`` of one generic GEMM launch (the vector flags from the code addresses' 16-byte alignment)."""
    p = dg.p
    bm, bn = gemm_kernels.GEMM_GENERIC_TILE
    d = defines(
        ATOMIC=int(atomic),
        FMT_A=codes.FMT_CODES[p.a_fmt],
        FMT_B=codes.FMT_CODES[p.b_fmt],
        OUT_DTYPE=out_code,
        THREADS=gemm_kernels.GEMM_GENERIC_THREADS,
    )
    kernel = build(gemm_kernels.GEMM_MX_GENERIC, d, dg.arch)
    flags = 0
    if dg.a_codes.data.ptr % 16 == 0 and _row_bytes(p.a_fmt, p.k) % 16 == 0:
        flags |= _FLAG_VEC_A
    if dg.b_codes.data.ptr % 16 == 0 and _row_bytes(p.b_fmt, p.k) % 16 == 0:
        flags |= _FLAG_VEC_B
    la, sa_shift = _scale_args(p.a_scale_layout, dg.a_scales)
    lb, sb_shift = _scale_args(p.b_scale_layout, dg.b_scales)
    cfg = LaunchConfig(
        grid=(_cdiv(p.n, bn), _cdiv(p.m, bm), p.split_k), block=(gemm_kernels.GEMM_GENERIC_THREADS, 1, 1)
    )
    u32 = np.uint32
    return kernel, cfg, (u32(p.m), u32(p.n), u32(p.k), u32(p.split_k), la, lb, sa_shift, sb_shift, u32(flags))


def _launch_gemm(dg: DeviceGemm, dst, out_code: int, atomic: bool, gate=None) -> None:
    kernel, cfg, scalars = _gemm_entry(dg, out_code, atomic)
    args = (dg.a_codes, dg.a_scales, dg.b_codes, dg.b_scales, dst)
    launch(dg.p.op, kernel, cfg, (*args, *scalars, np.uint64(0) if gate is None else gate))


def run(dg: DeviceGemm) -> None:
    """Launch the generic GEMM (and the reduce) on CuPy's current stream; never synchronises with the host."""
    check_limits(dg)
    run_split_k(dg, lambda dst, out_code, atomic: _launch_gemm(dg, dst, out_code, atomic))


def gated_entry(dg: DeviceGemm) -> tuple[Any, LaunchConfig, tuple]:
    """:func:`run_gated`'s kernel, configuration and scalars (a small-call plan prepares them once)."""
    check_limits(dg)
    return _gemm_entry(dg, codes.GEMM_OUT_DTYPE_CODES[dtype_name(dg.p.out_dtype)], False)


def run_gated(dg: DeviceGemm, gate) -> None:
    """``dg`` (split_k == 1) computed by the generic kernel only where the device word ``gate`` is nonzero: every
    CTA reads it first and returns when it is 0 (the exact fallback of :mod:`mxrt.ops.gemm_cublas`; no host sync)."""
    check_limits(dg)
    _launch_gemm(dg, dg.out, codes.GEMM_OUT_DTYPE_CODES[dtype_name(dg.p.out_dtype)], False, gate)


GENERIC = GemmPath(name="generic", target="generic", priority=0, supports=_supports, run=run)
register_gemm_path(GENERIC)
