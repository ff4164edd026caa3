"""The portable GEMM path ``"generic"`` (priority 0, any CUDA or ROCm GPU): kernels_src/gemm/gemm_mx_generic.hip
and, for deterministic split-K, kernels_src/gemm/gemm_mx_splitk_reduce.hip.

Accumulation modes (``p.split_k``, ``p.deterministic``):

- ``split_k == 1``: one launch stores ``out`` directly (any dtype).
- deterministic split-K: split z writes the fp32 slice ``ws[z]`` of a ``[split_k, m, n]`` workspace (CuPy pool),
  then the reduce kernel sums the slices in split order and converts: bitwise identical across runs.
- atomic split-K (``deterministic=False``): ``out`` is zeroed on the stream, then every split adds into it: fp32
  ``atomicAdd``, or packed bf16x2 / f16x2 atomics for 16-bit outputs. A 16-bit ``out`` that is not 4-byte aligned
  or has an odd element count (a packed word would reach past ``out``) accumulates in an fp32 ``[m, n]`` workspace
  with fp32 atomics instead, converted by the reduce kernel.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..layouts import scale_layout_shape
from ..reference.gemm import GEMM_FORMAT_PAIRS
from ..runtime import specs
from ..runtime.compiler import build
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path

_U32 = 2**32
_FLAG_VEC_A, _FLAG_VEC_B = 1, 2
_REDUCE_MAX_BLOCKS = 65535 * 8


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
    bm, _ = specs.GEMM_GENERIC_TILE
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
    shift = 2 if layout == "turbo16x4" and str(scales.dtype) == "uint32" else 0
    return np.uint32(specs.SCALE_LAYOUT_CODES[layout]), np.uint32(shift)


def _row_bytes(fmt: str, k: int) -> int:
    return _cdiv(k, 2) if fmt == "e2m1" else k


def _launch_gemm(dg: DeviceGemm, dst, out_code: int, atomic: bool) -> None:
    p = dg.p
    bm, bn = specs.GEMM_GENERIC_TILE
    d = specs.defines(
        ATOMIC=int(atomic),
        FMT_A=specs.FMT_CODES[p.a_fmt],
        FMT_B=specs.FMT_CODES[p.b_fmt],
        OUT_DTYPE=out_code,
        THREADS=specs.GEMM_GENERIC_THREADS,
    )
    kernel = build(specs.GEMM_MX_GENERIC, d, dg.arch)
    flags = 0
    if dg.a_codes.data.ptr % 16 == 0 and _row_bytes(p.a_fmt, p.k) % 16 == 0:
        flags |= _FLAG_VEC_A
    if dg.b_codes.data.ptr % 16 == 0 and _row_bytes(p.b_fmt, p.k) % 16 == 0:
        flags |= _FLAG_VEC_B
    la, sa_shift = _scale_args(p.a_scale_layout, dg.a_scales)
    lb, sb_shift = _scale_args(p.b_scale_layout, dg.b_scales)
    cfg = LaunchConfig(grid=(_cdiv(p.n, bn), _cdiv(p.m, bm), p.split_k), block=(specs.GEMM_GENERIC_THREADS, 1, 1))
    u32 = np.uint32
    args = (dg.a_codes, dg.a_scales, dg.b_codes, dg.b_scales, dst, u32(p.m), u32(p.n), u32(p.k), u32(p.split_k))
    launch(p.op, kernel, cfg, (*args, la, lb, sa_shift, sb_shift, u32(flags)))


def _launch_reduce(dg: DeviceGemm, ws, splits: int, out_code: int) -> None:
    mn = dg.p.m * dg.p.n
    threads = specs.GEMM_REDUCE_THREADS
    kernel = build(specs.GEMM_MX_SPLITK_REDUCE, specs.defines(OUT_DTYPE=out_code, THREADS=threads), dg.arch)
    cfg = LaunchConfig(grid=(min(_cdiv(mn, threads), _REDUCE_MAX_BLOCKS), 1, 1), block=(threads, 1, 1))
    launch(dg.p.op, kernel, cfg, (ws, dg.out, np.uint64(mn), np.uint32(splits)))


def _workspace(shape: tuple[int, ...], zero: bool):
    import cupy

    return cupy.zeros(shape, cupy.float32) if zero else cupy.empty(shape, cupy.float32)


def run(dg: DeviceGemm) -> None:
    """Launch the generic GEMM (and the reduce) on CuPy's current stream; never synchronises with the host."""
    p = dg.p
    check_limits(dg)
    out_code = specs.GEMM_OUT_DTYPE_CODES[p.out_dtype.name]
    if p.split_k == 1:
        _launch_gemm(dg, dg.out, out_code, atomic=False)
    elif p.deterministic:
        ws = _workspace((p.split_k, p.m, p.n), zero=False)
        _launch_gemm(dg, ws, specs.GEMM_OUT_DTYPE_CODES["float32"], atomic=False)
        _launch_reduce(dg, ws, p.split_k, out_code)
    elif out_code == specs.GEMM_OUT_DTYPE_CODES["float32"] or (dg.out.data.ptr % 4 == 0 and p.m * p.n % 2 == 0):
        dg.out.fill(0)
        _launch_gemm(dg, dg.out, out_code, atomic=True)
    else:  # a packed 16-bit word would reach outside out: fp32 atomics into a workspace, then convert
        ws = _workspace((1, p.m, p.n), zero=True)
        _launch_gemm(dg, ws, specs.GEMM_OUT_DTYPE_CODES["float32"], atomic=True)
        _launch_reduce(dg, ws, 1, out_code)


GENERIC = GemmPath(name="generic", target="generic", priority=0, supports=_supports, run=run)
register_gemm_path(GENERIC)
