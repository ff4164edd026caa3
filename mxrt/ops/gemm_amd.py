"""AMD MFMA GEMM paths: ``gfx950_mfma_scale`` (kernels_src/gemm/gemm_mx_gfx950.hip,
``v_mfma_scale_f32_16x16x128_f8f6f4``) and ``gfx942_mfma_fp8`` (gemm_mx_gfx942.hip, ``v_mfma_f32_16x16x32_fp8``
with per-32 scales applied to the partial sums). Imports without cupy.

Both kernels share one launch contract (kernels_src/gemm/amd_gemm.h): CTA tile 128 x 128, 256 threads, grid
``(ceil(n/128), ceil(m/128), split_k)``; run-time arguments ``m, n, k, split_k, a_layout, b_layout, out_dtype,
mode, flags``. :func:`plan` computes everything from the problem and the buffers' addresses and dtypes (no device
work), so the CPU tests check it with fake buffers and run the kernels' lane logic on the host with the same plan
(tests/test_gemm_amd_host.py). Split-K: ``deterministic=True`` writes fp32 slices ``ws [split_k, m, n]`` and the
CTA that finishes a tile last sums them in split order (a counter per tile, left zero); ``deterministic=False``
adds into ``out`` with fp32 atomics, or packed bf16x2 / f16x2 atomics for 16-bit outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from ..problems.gemm import GemmProblem
from ..runtime import alloc
from ..runtime.kernel_spec import Defines, KernelSpec, defines
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_amd_kernels
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path

BLOCK_M = BLOCK_N = 128
# run-time codes of the kernels: mxrt/codes.py (MXRT_GEMM_MODE_*, MXRT_GEMM_FLAG_*, MXRT_OUT_* of mx_codes.h)
MODE_STORE, MODE_WORKSPACE, MODE_ATOMIC = codes.GEMM_MODE_STORE, codes.GEMM_MODE_WORKSPACE, codes.GEMM_MODE_ATOMIC
FLAG_VEC_A, FLAG_VEC_B = codes.GEMM_FLAG_VEC_A, codes.GEMM_FLAG_VEC_B
OUT_CODES = codes.GEMM_OUT_DTYPE_CODES
#: the scale layouts the kernels read (codes: mxrt.codes.SCALE_LAYOUT_CODES); turbo16x4 stored as uint32 is
#: mxrt.codes.SCALE_LAYOUT_TURBO16X4_U32
_SCALE_LAYOUTS = (None, "aiter32x8", "turbo16x4")
SL_TURBO16X4_U32 = codes.SCALE_LAYOUT_TURBO16X4_U32
_FMTS = ("e4m3", "e5m2", "e2m1")
_LIMIT = 2**31  # code buffers are read through 32-bit buffer offsets (past 2^31: the out-of-bounds sentinel)

_KERNELS = {"gfx950": gemm_amd_kernels.GEMM_MX_GFX950, "gfx942": gemm_amd_kernels.GEMM_MX_GFX942}
#: K elements per pipeline stage (gfx942's 64 KB of LDS holds two stages of 64)
KSTEP = {"gfx950": 128, "gfx942": 64}


@dataclass(frozen=True)
class AmdGemmPlan:
    """What one launch needs besides the buffers: the build, the grid and the kernel's run-time arguments."""

    spec: KernelSpec
    defines: Defines
    config: LaunchConfig
    scalars: tuple[int, ...]  # m, n, k, split_k, a_layout, b_layout, out_dtype, mode, flags
    mode: int
    workspace: int  # fp32 elements of ws (MODE_WORKSPACE), else 0
    counters: int  # uint32 tile counters (MODE_WORKSPACE), else 0


def _ptr(x: Any) -> int:
    """Device address of a CuPy array (``x.data.ptr``), or the host address of a numpy array."""
    if isinstance(x, np.ndarray):
        return int(x.ctypes.data)
    return int(x.data.ptr)


def _row_bytes(fmt: str, k: int) -> int:
    return -(-k // 2) if fmt == "e2m1" else k


def _scale_code(layout: str | None, scales: Any) -> int | None:
    if layout not in _SCALE_LAYOUTS:
        return None
    if layout == "turbo16x4" and np.dtype(scales.dtype) == np.uint32:
        return SL_TURBO16X4_U32
    return codes.SCALE_LAYOUT_CODES[layout]


def unsupported(target: str, p: GemmProblem, a_codes: Any, b_codes: Any, a_scales: Any, b_scales: Any, out: Any):
    """Why the ``target`` kernel cannot run this problem (a short reason), or None."""
    if target not in _KERNELS:
        return f"no AMD MFMA GEMM kernel for target {target!r}"
    if p.a_fmt not in _FMTS or p.b_fmt not in _FMTS:
        return f"formats ({p.a_fmt}, {p.b_fmt}) are not e4m3 / e5m2 / e2m1"
    for name, layout, s in (("a", p.a_scale_layout, a_scales), ("b", p.b_scale_layout, b_scales)):
        if _scale_code(layout, s) is None:
            return (
                f"{name}_scale_layout={layout!r} is not read by this kernel (row-major, 'aiter32x8' or 'turbo16x4'; "
                "preshuffle to one of those)"
            )
        if layout == "aiter32x8" and _ptr(s) % 4:
            return f"{name} scales in aiter32x8 must be 4-byte aligned (one dword per lane)"
    for name, rows, fmt in (("a", p.m, p.a_fmt), ("b", p.n, p.b_fmt)):
        if rows * _row_bytes(fmt, p.k) >= _LIMIT:
            return f"{name} codes hold {rows * _row_bytes(fmt, p.k)} bytes, the kernel's 32-bit offsets reach < 2^31"
    if max(p.m, p.n, p.k) >= _LIMIT or p.m * p.n >= 2**63:
        return f"m={p.m} n={p.n} k={p.k} beyond 32-bit sizes"
    if -(-p.m // BLOCK_M) > MAX_GRID_YZ or p.split_k > MAX_GRID_YZ:
        return f"grid ({-(-p.n // BLOCK_N)}, {-(-p.m // BLOCK_M)}, {p.split_k}) beyond the y/z limit {MAX_GRID_YZ}"
    out_name = np.dtype(p.out_dtype).name
    if out_name not in OUT_CODES:
        return f"out_dtype {out_name} is not float32 / bfloat16 / float16"
    if p.split_k > 1 and not p.deterministic and out_name != "float32" and (p.n % 2 or _ptr(out) % 4):
        return "atomic split-K into a 16-bit output needs n even and a 4-byte aligned out (packed bf16x2/f16x2 atomics)"
    return None


def plan(target: str, p: GemmProblem, a_codes: Any, b_codes: Any, a_scales: Any, b_scales: Any, out: Any):
    """The :class:`AmdGemmPlan` of a supported, non-empty problem (see :func:`unsupported`)."""
    spec = _KERNELS[target]
    out_name = np.dtype(p.out_dtype).name
    a_vec = _ptr(a_codes) % 16 == 0 and _row_bytes(p.a_fmt, p.k) % 16 == 0
    b_vec = _ptr(b_codes) % 16 == 0 and _row_bytes(p.b_fmt, p.k) % 16 == 0
    flags = (FLAG_VEC_A if a_vec else 0) | (FLAG_VEC_B if b_vec else 0)
    mode = MODE_STORE if p.split_k == 1 else (MODE_WORKSPACE if p.deterministic else MODE_ATOMIC)
    # EDGE=0: every stage of every CTA is interior, so the build carries no load masking
    interior = (
        a_vec
        and b_vec
        and p.m % BLOCK_M == 0
        and p.n % BLOCK_N == 0
        and all((k1 - k0) % KSTEP[target] == 0 for k0, k1 in p.k_ranges)
    )
    tiles_m, tiles_n = -(-p.m // BLOCK_M), -(-p.n // BLOCK_N)
    scalars = (
        p.m,
        p.n,
        p.k,
        p.split_k,
        _scale_code(p.a_scale_layout, a_scales),
        _scale_code(p.b_scale_layout, b_scales),
        OUT_CODES[out_name],
        mode,
        flags,
    )
    return AmdGemmPlan(
        spec=spec,
        defines=defines(
            A_FMT=codes.FMT_CODES[p.a_fmt],
            B_FMT=codes.FMT_CODES[p.b_fmt],
            EDGE=0 if interior else 1,
            THREADS=gemm_amd_kernels.GEMM_AMD_THREADS,
        ),
        config=LaunchConfig(grid=(tiles_n, tiles_m, p.split_k), block=(gemm_amd_kernels.GEMM_AMD_THREADS, 1, 1)),
        scalars=scalars,
        mode=mode,
        workspace=p.split_k * p.m * p.n if mode == MODE_WORKSPACE else 0,
        counters=tiles_m * tiles_n if mode == MODE_WORKSPACE else 0,
    )


def _supports(target: str):
    def supports(dg: DeviceGemm) -> str | None:
        return unsupported(target, dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)

    return supports


def _run(target: str):
    def run(dg: DeviceGemm) -> None:
        from ..runtime.compiler import build

        p = dg.p
        if p.is_empty:
            dg.out.fill(0)
            return
        pl = plan(target, p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)
        kernel = build(pl.spec, pl.defines, dg.arch)
        # workspace and counters live until the kernel has run: CuPy frees them back to its stream-ordered pool
        ws = alloc.empty(pl.workspace, np.float32) if pl.workspace else None
        counters = alloc.zeros(pl.counters, np.uint32) if pl.counters else None
        if pl.mode == MODE_ATOMIC:
            dg.out.fill(0)
        scalars = tuple(np.int32(v) for v in pl.scalars)
        null = np.uint64(0)  # a pointer argument the mode does not read
        ws_arg = ws if ws is not None else null
        counters_arg = counters if counters is not None else null
        args = (dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out, ws_arg, counters_arg, *scalars)
        launch(p.op, kernel, pl.config, args)

    return run


GFX950_PATH = GemmPath("gfx950_mfma_scale", "gfx950", 20, _supports("gfx950"), _run("gfx950"))
GFX942_PATH = GemmPath("gfx942_mfma_fp8", "gfx942", 20, _supports("gfx942"), _run("gfx942"))
register_gemm_path(GFX950_PATH)
register_gemm_path(GFX942_PATH)
