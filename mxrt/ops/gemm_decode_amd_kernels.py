"""Kernel specs and variants of the AMD small-M (decode) GEMM paths (kernels_src/gemm/gemm_mx_decode_gfx9{50,42}.hip,
body gemm_decode_amd.h; launch and arguments in mxrt/ops/gemm_decode_amd.py, GemmPaths: no dispatch row) and of
their MoE twins (gemm_mx_decode_gfx9{50,42}_moe.hip; launch in mxrt/ops/moe_gemm_amd.py)."""

from __future__ import annotations

from ..codes import FMT_CODES, WEIGHT_LAYOUT_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import Defines, KernelSpec, defines

DECODE_AMD_THREADS = 256
#: token tiles of 16 (define MT): a build serves m <= 16 * MT
DECODE_AMD_MT = (1, 2, 4)
#: the largest m the paths take (their envelope)
DECODE_AMD_MAX_M = 16 * max(DECODE_AMD_MT)
#: weight rows per CTA (4 tiles of 16; grid x = ceil(n / 64))
DECODE_AMD_ROWS = 64


def decode_amd_variant(a_fmt: int, b_fmt: int, mt: int, wlb: int = 0) -> Defines:
    """The defines of one build: formats, token tiles and, for the dense kernels' weights in the aiter 16x16 layout,
    WLB = 1 (absent for row-major codes: those builds keep their define sets, hence their cache keys and ISA)."""
    extra = {"WLB": wlb} if wlb else {}
    return defines(A_FMT=a_fmt, B_FMT=b_fmt, MT=mt, THREADS=DECODE_AMD_THREADS, **extra)


#: every format pair of mxrt.problems.GEMM_FORMAT_PAIRS at every token tile (out dtype and mode are run-time)
_VARIANTS = tuple(
    decode_amd_variant(FMT_CODES[fa], FMT_CODES[fb], mt) for mt in DECODE_AMD_MT for fa, fb in GEMM_FORMAT_PAIRS
)
#: the dense kernels' builds: _VARIANTS, then each of them again with the weights in the aiter 16x16 layout
_DENSE_VARIANTS = _VARIANTS + tuple(
    decode_amd_variant(FMT_CODES[fa], FMT_CODES[fb], mt, wlb)
    for wlb in (code for code in WEIGHT_LAYOUT_CODES.values() if code)
    for mt in DECODE_AMD_MT
    for fa, fb in GEMM_FORMAT_PAIRS
)

GEMM_MX_DECODE_GFX950 = KernelSpec(
    symbol="gemm_mx_decode_gfx950",
    file="gemm/gemm_mx_decode_gfx950.hip",
    required=("A_FMT", "B_FMT", "MT", "THREADS"),
    optional=("WLB",),  # absent: row-major weight codes (those builds keep their define sets)
    variants=_DENSE_VARIANTS,
    targets=("gfx950",),
    expect_mma=(("gfx950", ("v_mfma_scale_f32_16x16x128_f8f6f4",)),),
)

# The exact fp8/bf8 variant per format pair is checked per build by tests/test_gemm_decode_amd_compile.py.
GEMM_MX_DECODE_GFX942 = KernelSpec(
    symbol="gemm_mx_decode_gfx942",
    file="gemm/gemm_mx_decode_gfx942.hip",
    required=("A_FMT", "B_FMT", "MT", "THREADS"),
    optional=("WLB",),  # absent: row-major weight codes (those builds keep their define sets)
    variants=_DENSE_VARIANTS,
    targets=("gfx942",),
    expect_mma=(("gfx942", ("v_mfma_f32_16x16x32_",)),),
)

# The MoE decode kernels: the same mainloops and row-major define sets (the MoE GEMM takes every format pair too;
# its expert weights are row-major: no WLB).
GEMM_MX_DECODE_GFX950_MOE = KernelSpec(
    symbol="gemm_mx_decode_gfx950_moe",
    file="gemm/gemm_mx_decode_gfx950_moe.hip",
    required=("A_FMT", "B_FMT", "MT", "THREADS"),
    variants=_VARIANTS,
    targets=("gfx950",),
    expect_mma=(("gfx950", ("v_mfma_scale_f32_16x16x128_f8f6f4",)),),
)

GEMM_MX_DECODE_GFX942_MOE = KernelSpec(
    symbol="gemm_mx_decode_gfx942_moe",
    file="gemm/gemm_mx_decode_gfx942_moe.hip",
    required=("A_FMT", "B_FMT", "MT", "THREADS"),
    variants=_VARIANTS,
    targets=("gfx942",),
    expect_mma=(("gfx942", ("v_mfma_f32_16x16x32_",)),),
)

SPECS = (GEMM_MX_DECODE_GFX950, GEMM_MX_DECODE_GFX942, GEMM_MX_DECODE_GFX950_MOE, GEMM_MX_DECODE_GFX942_MOE)
DISPATCH: dict = {}  # GemmPaths (mxrt/ops/gemm_paths.py) choose them, not a dispatch row
