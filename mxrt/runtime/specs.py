"""Kernel specs: the Python mirror of each kernel file's header, as frozen data, and dispatch tables.

A test checks that every ``extern "C"`` kernel in kernels_src has exactly one spec here, and the offline
compile check (``mxrt compile-check``) builds every spec with every define set in :attr:`KernelSpec.variants`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UnsupportedArchError

#: define FMT (kernels_src/common/mx_codecs.h MXRT_FMT_*)
FMT_CODES = {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4}
#: run-time argument scale_mode (MXRT_SCALE_*)
SCALE_MODE_CODES = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3}
#: define IN_DTYPE (MXRT_IN_*), keyed by numpy dtype name
IN_DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}
#: run-time argument flags (MXRT_FLAG_*; FLAT is quantize_mx_rowwise's own)
FLAG_VEC_IN, FLAG_VEC_OUT, FLAG_VEC_OUT_COL, FLAG_FLAT = 1, 2, 4, 8
#: define SCALE_LAYOUT (kernels_src/common/scale_layouts.h MXRT_SCALE_LAYOUT_*), keyed by mxrt.layouts name
SCALE_LAYOUT_CODES = {None: 0, "aiter32x8": 1, "turbo16x4": 2, "cublas128x4": 3, "deepgemm_ue8m0": 4}

#: Every target the offline compile check knows; "generic" kernels build for all of them.
KNOWN_TARGETS = ("gfx942", "gfx950", "sm_90a")

Defines = tuple[tuple[str, int], ...]


def defines(**kw: int) -> Defines:
    """A hashable, ordered define set: ``defines(FMT=0, THREADS=256)``."""
    return tuple(sorted((k, int(v)) for k, v in kw.items()))


@dataclass(frozen=True)
class KernelSpec:
    """One ``extern "C"`` kernel: its file under kernels_src, its symbol, the defines it needs and the
    define sets the ops use (``variants``), and the targets it supports (``("generic",)``: any GPU)."""

    symbol: str
    file: str
    required: tuple[str, ...]
    variants: tuple[Defines, ...]
    targets: tuple[str, ...] = ("generic",)
    #: target -> matrix-instruction prefixes each build for that target must contain (the compile check fails
    #: the build otherwise); e.g. ``{"gfx950": ("v_mfma_scale_f32_16x16x128_f8f6f4",)}``.
    expect_mma: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def expected_mma(self, target: str) -> tuple[str, ...]:
        return dict(self.expect_mma).get(target, ())

    def check_defines(self, d: Defines) -> None:
        names = {k for k, _ in d}
        missing = [r for r in self.required if r not in names]
        extra = sorted(names - set(self.required))
        if missing or extra:
            raise UnsupportedArchError(
                f"{self.symbol}: defines {dict(d)} do not match the kernel header: missing {missing}, unknown {extra}"
            )

    def supports(self, target: str) -> bool:
        return "generic" in self.targets or target in self.targets


def _grid(**axes: tuple[int, ...]) -> tuple[Defines, ...]:
    names = list(axes)
    return tuple(defines(**dict(zip(names, vals, strict=True))) for vals in itertools.product(*axes.values()))


QUANT_ROWWISE_THREADS = 256
QUANT_DUAL_THREADS = 256

# The fused scale layouts (SCALE_LAYOUT 1..4) only change where a scale byte is stored, the same code for every
# element format: the compile check builds them with e4m3 and e2m1 (the MXFP8 / MXFP4 formats GEMMs read) on
# every input dtype, and every format with plain scales, instead of the full 5 x 5 x 3 grid (a third of the time).
_LAYOUTS = tuple(v for v in SCALE_LAYOUT_CODES.values() if v)
_FUSED_FMTS = (FMT_CODES["e4m3"], FMT_CODES["e2m1"])

QUANTIZE_MX_ROWWISE = KernelSpec(
    symbol="quantize_mx_rowwise",
    file="quant/quantize_mx_rowwise.hip",
    required=("FMT", "IN_DTYPE", "SCALE_LAYOUT", "THREADS"),
    variants=_grid(
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=(0,),
        THREADS=(QUANT_ROWWISE_THREADS,),
    )
    + _grid(
        FMT=_FUSED_FMTS,
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=_LAYOUTS,
        THREADS=(QUANT_ROWWISE_THREADS,),
    ),
)

QUANTIZE_MX_DUAL = KernelSpec(
    symbol="quantize_mx_dual",
    file="quant/quantize_mx_dual.hip",
    required=("BLOCK_2D", "FMT", "IN_DTYPE", "SCALE_LAYOUT", "THREADS"),
    variants=_grid(
        BLOCK_2D=(0, 1),
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=(0,),
        THREADS=(QUANT_DUAL_THREADS,),
    )
    + _grid(
        BLOCK_2D=(0, 1),
        FMT=_FUSED_FMTS,
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=_LAYOUTS,
        THREADS=(QUANT_DUAL_THREADS,),
    ),
)

# ---- scale layouts (kernels_src/layout): LAYOUT = MXRT_SCALE_* of scale_maps.h, WIDE = the uint32 turbo16x4 form
#: define LAYOUT, keyed by mxrt.layouts.SCALE_LAYOUTS name
PRESHUFFLE_LAYOUT_CODES = {"aiter32x8": 0, "turbo16x4": 1, "cublas128x4": 2, "deepgemm_ue8m0": 3}
LAYOUT_THREADS = 256
_LAYOUT_VARIANTS = tuple(
    defines(LAYOUT=code, WIDE=wide, THREADS=LAYOUT_THREADS)
    for name, code in PRESHUFFLE_LAYOUT_CODES.items()
    for wide in ((0, 1) if name == "turbo16x4" else (0,))
)

PRESHUFFLE_SCALES = KernelSpec(
    symbol="preshuffle_scales",
    file="layout/preshuffle_scales.hip",
    required=("LAYOUT", "THREADS", "WIDE"),
    variants=_LAYOUT_VARIANTS,
)

UNSHUFFLE_SCALES = KernelSpec(
    symbol="unshuffle_scales",
    file="layout/unshuffle_scales.hip",
    required=("LAYOUT", "THREADS", "WIDE"),
    variants=_LAYOUT_VARIANTS,
)

# ---- moe_align_block_size (kernels_src/moe): ID_BYTES = itemsize of the topk ids (4 or 8)
MOE_THREADS = 256
_MOE_VARIANTS = _grid(ID_BYTES=(4, 8), THREADS=(MOE_THREADS,))


def _moe_spec(symbol: str) -> KernelSpec:
    return KernelSpec(symbol=symbol, file=f"moe/{symbol}.hip", required=("ID_BYTES", "THREADS"), variants=_MOE_VARIANTS)


MOE_ALIGN_BLOCK_SIZE = _moe_spec("moe_align_block_size")  # one CTA, small numel
MOE_ALIGN_BLOCK_SIZE_COUNT = _moe_spec("moe_align_block_size_count")  # multi-CTA step 1
MOE_ALIGN_BLOCK_SIZE_SCAN = _moe_spec("moe_align_block_size_scan")  # multi-CTA step 2
MOE_ALIGN_BLOCK_SIZE_SCATTER = _moe_spec("moe_align_block_size_scatter")  # multi-CTA step 3
# ---- grouped quantization (kernels_src/quant/quantize_mx_grouped*.hip, quantize_mx_dual_grouped.hip) ----
QUANT_GROUPED_THREADS = 256
#: Most groups the grouped kernels take (MXG_MAX_GROUPS in kernels_src/common/mx_group.h).
GROUPED_MAX_GROUPS = 1024

QUANTIZE_MX_GROUPED_OFFSETS = KernelSpec(
    symbol="quantize_mx_grouped_offsets",
    file="quant/quantize_mx_grouped_offsets.hip",
    required=("THREADS",),
    variants=_grid(THREADS=(QUANT_GROUPED_THREADS,)),
)

#: quarter blocks in flight per thread in quantize_mx_grouped (define UNROLL); the op uses the default
QUANT_GROUPED_UNROLLS = (1, 2)

QUANTIZE_MX_GROUPED = KernelSpec(
    symbol="quantize_mx_grouped",
    file="quant/quantize_mx_grouped.hip",
    required=("FMT", "IN_DTYPE", "THREADS", "UNROLL"),
    variants=_grid(
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        THREADS=(QUANT_GROUPED_THREADS,),
        UNROLL=QUANT_GROUPED_UNROLLS,
    ),
)

QUANTIZE_MX_GROUPED_ROWCOL = KernelSpec(
    symbol="quantize_mx_grouped_rowcol",
    file="quant/quantize_mx_grouped_rowcol.hip",
    required=("FMT", "IN_DTYPE", "THREADS"),
    variants=_grid(
        FMT=tuple(FMT_CODES.values()), IN_DTYPE=tuple(IN_DTYPE_CODES.values()), THREADS=(QUANT_GROUPED_THREADS,)
    ),
)

QUANTIZE_MX_DUAL_GROUPED = KernelSpec(
    symbol="quantize_mx_dual_grouped",
    file="quant/quantize_mx_dual_grouped.hip",
    required=("BLOCK_2D", "FMT", "IN_DTYPE", "THREADS"),
    variants=_grid(
        BLOCK_2D=(0, 1),
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        THREADS=(QUANT_GROUPED_THREADS,),
    ),
)

# ---- dense MX GEMM (kernels_src/gemm/) ----------------------------------------------------------------------
#: define OUT_DTYPE of the GEMM kernels (kernels_src/common/mx_gemm.h MXRT_OUT_*), keyed by numpy dtype name
GEMM_OUT_DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}
GEMM_GENERIC_THREADS = 256
#: (block_m, block_n) of gemm_mx_generic's tile (BM, BN in the kernel)
GEMM_GENERIC_TILE = (128, 64)
GEMM_REDUCE_THREADS = 256
#: define FMT_A / FMT_B pairs of the GEMM (mxrt.reference.gemm.GEMM_FORMAT_PAIRS, as FMT_CODES)
_GEMM_PAIRS = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2"), ("e2m1", "e2m1"))
_GEMM_PAIRS += (("e4m3", "e2m1"), ("e2m1", "e4m3"))

GEMM_MX_GENERIC = KernelSpec(
    symbol="gemm_mx_generic",
    file="gemm/gemm_mx_generic.hip",
    required=("ATOMIC", "FMT_A", "FMT_B", "OUT_DTYPE", "THREADS"),
    # every format pair with every output dtype and both accumulation modes (ATOMIC=0 with a 16-bit dtype is the
    # split_k == 1 direct store; fp32 covers the workspace slices)
    variants=tuple(
        defines(ATOMIC=at, FMT_A=FMT_CODES[fa], FMT_B=FMT_CODES[fb], OUT_DTYPE=od, THREADS=GEMM_GENERIC_THREADS)
        for fa, fb in _GEMM_PAIRS
        for od in GEMM_OUT_DTYPE_CODES.values()
        for at in (0, 1)
    ),
)

GEMM_MX_SPLITK_REDUCE = KernelSpec(
    symbol="gemm_mx_splitk_reduce",
    file="gemm/gemm_mx_splitk_reduce.hip",
    required=("OUT_DTYPE", "THREADS"),
    variants=_grid(OUT_DTYPE=tuple(GEMM_OUT_DTYPE_CODES.values()), THREADS=(GEMM_REDUCE_THREADS,)),
)

# ---- dense MX GEMM, Hopper fast path (kernels_src/gemm/gemm_mx_sm90.hip; mxrt/ops/gemm_sm90.py)
#: define A_FMT / B_FMT of gemm_mx_sm90 (e2m1 operands are expanded to e4m3 bytes first: code 0)
SM90_FMT_CODES = {"e4m3": 0, "e5m2": 1, "e2m1": 0}
SM90_STAGES = 4
SM90_DBUF = 0
#: CTA rows of gemm_mx_sm90's large-M tile (define BM: 256 = two warpgroups of two m64 row halves)
SM90_BM = 256
#: CTA columns (define BN): 128, or 256 = two m64n128k32 column halves per warpgroup and k32 step
SM90_BN = 128

GEMM_MX_SM90 = KernelSpec(
    symbol="gemm_mx_sm90",
    file="gemm/gemm_mx_sm90.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "BM", "BN", "DBUF", "DIAG", "OUT_DTYPE", "STAGES"),
    # mxrt/ops/gemm_sm90.py plan(): bf16 / f16 out at m > 128: the 256 x 128 tile (two warpgroups of two m64 row
    # halves); fp32 stores (fp32 out, only e2m1 x e2m1 reaches it, as expanded e4m3 codes; split-K workspaces) and
    # 64 < m <= 128: 128 x 128 with two partials in flight; m <= 64: 64 x 128 (one warpgroup). ATOMIC=1: atomic
    # split-K (fp32 / packed 16-bit atomics)
    variants=_grid(
        A_FMT=(0, 1),
        ATOMIC=(0,),
        B_FMT=(0, 1),
        BM=(SM90_BM,),
        BN=(SM90_BN,),
        DBUF=(SM90_DBUF,),
        DIAG=(0,),
        OUT_DTYPE=(GEMM_OUT_DTYPE_CODES["bfloat16"], GEMM_OUT_DTYPE_CODES["float16"]),
        STAGES=(SM90_STAGES,),
    )
    + _grid(
        A_FMT=(0,),
        ATOMIC=(1,),
        B_FMT=(0,),
        BM=(SM90_BM,),
        BN=(SM90_BN,),
        DBUF=(SM90_DBUF,),
        DIAG=(0,),
        OUT_DTYPE=(1, 2),
        STAGES=(SM90_STAGES,),
    )
    + _grid(
        A_FMT=(0,),
        ATOMIC=(0, 1),
        B_FMT=(0,),
        BM=(128,),
        BN=(128,),
        DBUF=(1,),
        DIAG=(0,),
        OUT_DTYPE=(0, 1, 2),
        STAGES=(6,),
    )
    + _grid(
        A_FMT=(0, 1),
        ATOMIC=(0, 1),
        B_FMT=(0,),
        BM=(64,),
        BN=(128,),
        DBUF=(1,),
        DIAG=(0,),
        OUT_DTYPE=(0, 1, 2),
        STAGES=(4,),
    )
    # the other tiles and the timing diagnostic DIAG=1 of benchmarks/gemm_sm90_dev.py (DIAG=2 has no wgmma at
    # all, so it cannot meet expect_mma; the benchmark builds it directly)
    + _grid(
        A_FMT=(0,), ATOMIC=(0,), B_FMT=(0,), BM=(192, 128), BN=(128,), DBUF=(0,), DIAG=(0,), OUT_DTYPE=(1,), STAGES=(4,)
    )
    + _grid(
        A_FMT=(0,), ATOMIC=(0,), B_FMT=(0,), BM=(128,), BN=(256,), DBUF=(0,), DIAG=(0,), OUT_DTYPE=(1,), STAGES=(4,)
    )
    + _grid(
        A_FMT=(0,), ATOMIC=(0,), B_FMT=(0,), BM=(128,), BN=(128,), DBUF=(1,), DIAG=(1,), OUT_DTYPE=(1,), STAGES=(6,)
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

#: e2m1 (packed, two per byte) -> e4m3 byte expansion feeding gemm_mx_sm90's fp8 tensor cores (exact)
E2M1_TO_E4M3_THREADS = 256
E2M1_TO_E4M3 = KernelSpec(
    symbol="e2m1_to_e4m3",
    file="gemm/e2m1_to_e4m3.hip",
    required=("THREADS",),
    variants=_grid(THREADS=(E2M1_TO_E4M3_THREADS,)),
)

ALL_SPECS: tuple[KernelSpec, ...] = (
    QUANTIZE_MX_ROWWISE,
    QUANTIZE_MX_DUAL,
    PRESHUFFLE_SCALES,
    UNSHUFFLE_SCALES,
    MOE_ALIGN_BLOCK_SIZE,
    MOE_ALIGN_BLOCK_SIZE_COUNT,
    MOE_ALIGN_BLOCK_SIZE_SCAN,
    MOE_ALIGN_BLOCK_SIZE_SCATTER,
    QUANTIZE_MX_GROUPED_OFFSETS,
    QUANTIZE_MX_GROUPED,
    QUANTIZE_MX_GROUPED_ROWCOL,
    QUANTIZE_MX_DUAL_GROUPED,
    GEMM_MX_GENERIC,
    GEMM_MX_SPLITK_REDUCE,
    GEMM_MX_SM90,
    E2M1_TO_E4M3,
)

# ---- AMD MFMA GEMMs (kernels_src/gemm/gemm_mx_gfx9{50,42}.hip; launch and arguments in mxrt/ops/gemm_amd.py) ----
GEMM_AMD_THREADS = 256
#: (A_FMT, B_FMT) of every pair of mxrt.reference.gemm.GEMM_FORMAT_PAIRS (a test keeps the two lists equal).
GEMM_AMD_FMT_PAIRS = ((0, 0), (0, 1), (1, 0), (1, 1), (4, 4), (0, 4), (4, 0))
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

ALL_SPECS = (*ALL_SPECS, GEMM_MX_GFX950, GEMM_MX_GFX942)

#: Dispatch tables: op -> {target or "generic": spec}. Tests derive their GPU skips from these.
DISPATCH: Mapping[str, Mapping[str, KernelSpec]] = {
    "quantize_mx": {"generic": QUANTIZE_MX_ROWWISE},
    "quantize_mx_dual": {"generic": QUANTIZE_MX_DUAL},
    "preshuffle_scales": {"generic": PRESHUFFLE_SCALES},
    "unshuffle_scales": {"generic": UNSHUFFLE_SCALES},
    # the one-CTA kernel; mxrt/ops/moe.py picks the multi-CTA trio (MOE_ALIGN_BLOCK_SIZE_*) for large numel
    "moe_align_block_size": {"generic": MOE_ALIGN_BLOCK_SIZE},
    "quantize_mx_grouped_offsets": {"generic": QUANTIZE_MX_GROUPED_OFFSETS},
    "quantize_mx_grouped": {"generic": QUANTIZE_MX_GROUPED},
    "quantize_mx_grouped_rowcol": {"generic": QUANTIZE_MX_GROUPED_ROWCOL},
    "quantize_mx_dual_grouped": {"generic": QUANTIZE_MX_DUAL_GROUPED},
    # the GEMM families register GemmPaths (mxrt/ops/gemm_paths.py); this row is the generic fallback's kernel
    "gemm_mx": {"generic": GEMM_MX_GENERIC},
    "gemm_mx_splitk_reduce": {"generic": GEMM_MX_SPLITK_REDUCE},
}


def select(op: str, target: str) -> KernelSpec:
    """The spec that runs ``op`` on ``target``: the target's own entry, else ``"generic"``."""
    table = DISPATCH[op]
    spec = table.get(target) or table.get("generic")
    if spec is None:
        raise UnsupportedArchError(f"{op}: no kernel for target {target!r}; supported targets: {sorted(table)}")
    return spec


def op_supports(op: str, target: str) -> bool:
    table = DISPATCH.get(op, {})
    return target in table or "generic" in table
