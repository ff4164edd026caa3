"""Kernel specs and variants of the AMD MFMA GEMM paths (kernels_src/gemm/gemm_mx_gfx9{50,42}.hip; launch and
arguments in mxrt/ops/gemm_amd.py, a GemmPath: no dispatch row)."""

from __future__ import annotations

from ..codes import FMT_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import KernelSpec, defines

GEMM_AMD_THREADS = 256
#: (A_FMT, B_FMT) of every pair of mxrt.problems.GEMM_FORMAT_PAIRS, as mxrt.codes.FMT_CODES.
GEMM_AMD_FMT_PAIRS = tuple((FMT_CODES[a], FMT_CODES[b]) for a, b in GEMM_FORMAT_PAIRS)
#: EDGE=1 handles every shape; EDGE=0 (interior-only loads) when m, n, K ranges and row alignment allow it.
_GEMM_AMD_VARIANTS = tuple(
    defines(A_FMT=a, B_FMT=b, EDGE=e, THREADS=GEMM_AMD_THREADS) for e in (1, 0) for a, b in GEMM_AMD_FMT_PAIRS
)

GEMM_MX_GFX950 = KernelSpec(
    symbol="gemm_mx_gfx950",
    file="gemm/gemm_mx_gfx950.hip",
    required=("A_FMT", "B_FMT", "EDGE", "THREADS"),
    variants=_GEMM_AMD_VARIANTS,
    targets=("gfx950",),
    expect_mma=(("gfx950", ("v_mfma_scale_f32_16x16x128_f8f6f4",)),),
)

# The exact fp8/bf8 variant per format pair (fp8_fp8, fp8_bf8, bf8_fp8, bf8_bf8) is checked per build by
# tests/test_gemm_amd_compile.py; the spec states the family every build must contain.
GEMM_MX_GFX942 = KernelSpec(
    symbol="gemm_mx_gfx942",
    file="gemm/gemm_mx_gfx942.hip",
    required=("A_FMT", "B_FMT", "EDGE", "THREADS"),
    variants=_GEMM_AMD_VARIANTS,
    targets=("gfx942",),
    expect_mma=(("gfx942", ("v_mfma_f32_16x16x32_",)),),
)

SPECS = (GEMM_MX_GFX950, GEMM_MX_GFX942)
DISPATCH: dict = {}  # GemmPaths (mxrt/ops/gemm_paths.py) choose them, not a dispatch row
