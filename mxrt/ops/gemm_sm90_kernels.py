"""Kernel specs, variants and tile constants of the Hopper MX GEMM path (kernels_src/gemm/gemm_mx_sm90.hip and
its e2m1 -> e4m3 expansion e2m1_to_e4m3.hip), launched by mxrt/ops/gemm_sm90.py (a GemmPath: no dispatch row)."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from ..runtime.kernel_spec import KernelSpec, define_grid, defines

#: define A_FMT / B_FMT of gemm_mx_sm90: e2m1 operands are expanded to e4m3 bytes first
SM90_FMT_CODES = {"e4m3": FMT_CODES["e4m3"], "e5m2": FMT_CODES["e5m2"], "e2m1": FMT_CODES["e4m3"]}
SM90_STAGES = 4
SM90_DBUF = 0
#: CTA rows of gemm_mx_sm90's large-M tile (define BM: 256 = two warpgroups of two m64 row halves)
SM90_BM = 256
#: CTA columns (define BN): 128, or 256 = two m64n128k32 column halves per warpgroup and k32 step
SM90_BN = 128

_E4M3, _E5M2 = FMT_CODES["e4m3"], FMT_CODES["e5m2"]
_F32, _BF16, _F16 = (GEMM_OUT_DTYPE_CODES[n] for n in ("float32", "bfloat16", "float16"))
_E4M3_BF16 = dict(A_FMT=_E4M3, ATOMIC=0, B_FMT=_E4M3, DIAG=0, OUT_DTYPE=_BF16, SLA=0, SLB=0)
_LARGE_BF16 = dict(_E4M3_BF16, BM=SM90_BM, BN=SM90_BN, DBUF=SM90_DBUF, STAGES=SM90_STAGES)
_SMALL_BF16 = dict(_E4M3_BF16, BM=64, BN=128, DBUF=1, STAGES=4)

GEMM_MX_SM90 = KernelSpec(
    symbol="gemm_mx_sm90",
    file="gemm/gemm_mx_sm90.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "BM", "BN", "DBUF", "DIAG", "OUT_DTYPE", "SLA", "SLB", "STAGES"),
    # mxrt/ops/gemm_sm90.py plan(): bf16 / f16 out at m > 128: the 256 x 128 tile (two warpgroups of two m64 row
    # halves); fp32 stores (fp32 out, only e2m1 x e2m1 reaches it, as expanded e4m3 codes; split-K workspaces) and
    # 64 < m <= 128: 128 x 128 with two partials in flight; m <= 64: 64 x 128 (one warpgroup). ATOMIC=1: atomic
    # split-K (fp32 / packed 16-bit atomics)
    variants=define_grid(
        A_FMT=(_E4M3, _E5M2),
        ATOMIC=(0,),
        B_FMT=(_E4M3, _E5M2),
        BM=(SM90_BM,),
        BN=(SM90_BN,),
        DBUF=(SM90_DBUF,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16, _F16),
        SLA=(0,),
        SLB=(0,),
        STAGES=(SM90_STAGES,),
    )
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(1,),
        B_FMT=(_E4M3,),
        BM=(SM90_BM,),
        BN=(SM90_BN,),
        DBUF=(SM90_DBUF,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16, _F16),
        SLA=(0,),
        SLB=(0,),
        STAGES=(SM90_STAGES,),
    )
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0, 1),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(128,),
        DBUF=(1,),
        DIAG=(0,),
        OUT_DTYPE=(_F32, _BF16, _F16),
        SLA=(0,),
        SLB=(0,),
        STAGES=(6,),
    )
    + define_grid(
        A_FMT=(_E4M3, _E5M2),
        ATOMIC=(0, 1),
        B_FMT=(_E4M3,),
        BM=(64,),
        BN=(128,),
        DBUF=(1,),
        DIAG=(0,),
        OUT_DTYPE=(_F32, _BF16, _F16),
        SLA=(0,),
        SLB=(0,),
        STAGES=(4,),
    )
    # preshuffled scale layouts read in place (SLA / SLB: MXRT_SCALE_LAYOUT_* codes, 5 = turbo16x4 uint32 words;
    # 0 = row-major): each layout on both operands of the large tile, and on B of the decode-sized tile
    + tuple(defines(**dict(_LARGE_BF16, SLA=code, SLB=code)) for code in (1, 2, 3, 4, 5))
    + tuple(defines(**dict(_SMALL_BF16, SLB=code)) for code in (1, 2, 3, 4, 5))
    # the other tiles and the timing diagnostic DIAG=1 of benchmarks/gemm_sm90_dev.py (DIAG=2 has no wgmma at
    # all, so it cannot meet expect_mma; the benchmark builds it directly)
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(192, 128),
        BN=(128,),
        DBUF=(0,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16,),
        SLA=(0,),
        SLB=(0,),
        STAGES=(4,),
    )
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(256,),
        DBUF=(0,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16,),
        SLA=(0,),
        SLB=(0,),
        STAGES=(4,),
    )
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(128,),
        DBUF=(1,),
        DIAG=(1,),
        OUT_DTYPE=(_BF16,),
        SLA=(0,),
        SLB=(0,),
        STAGES=(6,),
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
    variants=define_grid(THREADS=(E2M1_TO_E4M3_THREADS,)),
)

#: the issue-10 engine (persistent grid, TMA producer warpgroup, two consumer warpgroups with setmaxnreg), launched
#: by mxrt/ops/gemm_sm90_ws.py: the GemmPath ``sm90_ws`` runs SPLIT 0 (consumer warpgroups split the tile's rows),
#: STAGES 4, DIAG 0, WS_MODE 0; e2m1 operands arrive expanded to e4m3 bytes, so fp32 out (e2m1 x e2m1 only) builds
#: with e4m3 codes. SLA / SLB: scale layouts read in place (MXRT_SCALE_LAYOUT_*, 5 = turbo16x4 uint32 words).
WS_STAGES = 4
_WS_PATH = dict(ATOMIC=0, BM=128, BN=128, DBUF=0, DIAG=0, SPLIT=0, STAGES=WS_STAGES, WS_MODE=0)
_WS_E4M3_BF16 = dict(_WS_PATH, A_FMT=_E4M3, B_FMT=_E4M3, OUT_DTYPE=_BF16, SLA=0, SLB=0)
#: (SLA, SLB) pairs of the compile check beyond row-major: every code on one operand beside row-major, on both, and
#: the mixed pairs the GPU tests and the smoke use (a scattered layout beside a word layout) -- not all 35 pairs:
#: each operand's copy code depends on its own code only (the others build at run time)
WS_LAYOUT_PAIRS = (
    tuple((c, 0) for c in range(1, 6))
    + tuple((0, c) for c in range(1, 6))
    + tuple((c, c) for c in range(1, 6))
    + ((1, 3), (4, 2), (1, 4), (5, 3))
)
GEMM_MX_SM90_WS = KernelSpec(
    symbol="gemm_mx_sm90_ws",
    file="gemm/gemm_mx_sm90_ws.hip",
    required=tuple(sorted(_WS_E4M3_BF16)),
    # the path's builds: every fp8 format pair x 16-bit out on row-major scales, fp32 out for e2m1 x e2m1 (expanded
    # e4m3 codes), the layout pairs with bf16 out
    variants=define_grid(
        A_FMT=(_E4M3, _E5M2),
        ATOMIC=(0,),
        B_FMT=(_E4M3, _E5M2),
        BM=(128,),
        BN=(128,),
        DBUF=(0,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16, _F16),
        SLA=(0,),
        SLB=(0,),
        SPLIT=(0,),
        STAGES=(WS_STAGES,),
        WS_MODE=(0,),
    )
    + tuple(defines(**dict(_WS_E4M3_BF16, OUT_DTYPE=out)) for out in (_F32,))
    + tuple(defines(**dict(_WS_E4M3_BF16, SLA=la, SLB=lb)) for la, lb in WS_LAYOUT_PAIRS)
    + tuple(defines(**dict(_WS_E4M3_BF16, OUT_DTYPE=_F16, A_FMT=_E5M2, SLA=la, SLB=lb)) for la, lb in ((2, 4),))
    # development builds of benchmarks/gemm_sm90_ws_dev.py: DIAG=1 is the inexact k128-promotion timing diagnostic
    # of the skeleton gate (HOPPER_MX_GEMM.md 4.7), WS_MODE 2 without the promotion (3, 4 have no wgmma at all, so
    # no expect_mma: the script builds them directly); SPLIT 1: the column split (exact, spills 136-224 B)
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(128,),
        DBUF=(0,),
        DIAG=(1,),
        OUT_DTYPE=(_BF16,),
        SLA=(0,),
        SLB=(0,),
        SPLIT=(0,),
        STAGES=(WS_STAGES,),
        WS_MODE=(0, 2),
    )
    + define_grid(
        A_FMT=(_E4M3, _E5M2),
        ATOMIC=(0,),
        B_FMT=(_E4M3, _E5M2),
        BM=(128,),
        BN=(128,),
        DBUF=(0,),
        DIAG=(0,),
        OUT_DTYPE=(_BF16, _F16, _F32),
        SLA=(0,),
        SLB=(0,),
        SPLIT=(1,),
        STAGES=(WS_STAGES,),
        WS_MODE=(0,),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

#: pipeline stages of gemm_mx_sm90_bf16 (42 KB each, + 9 KB of staged scale words): 4 by default (5 was 1-5% faster
#: on three of the four benchmark shapes and slower on the fourth, session 9 call 8)
BF16_RING = 4
#: setmaxnreg of gemm_mx_sm90_bf16's producer warpgroup (its consumers get the rest of 384 x 168): 88 beat 72 by
#: 4-13% on an H200 (session 9 call 6)
BF16_PRODUCER_REGS = 88
#: the header's tile constants for gemm_mx_sm90_bf16 (fixed: only its primitives are used)
_BF16_FIXED = dict(ATOMIC=0, BM=256, BN=128, DBUF=0, DIAG=0, STAGES=3)

GEMM_MX_SM90_BF16 = KernelSpec(
    symbol="gemm_mx_sm90_bf16",
    file="gemm/gemm_mx_sm90_bf16.hip",
    required=(
        "A_FMT",
        "ATOMIC",
        "B_FMT",
        "BF_DIAG",
        "BF_PROF",
        "BM",
        "BN",
        "DBUF",
        "DIAG",
        "OUT_DTYPE",
        "PRODUCER_REGS",
        "RING",
        "SLA",
        "SLB",
        "STAGES",
    ),
    # the bf16 route of the issue-10 engine: every fp8 format pair x every out dtype on row-major scales, and each
    # scale layout on both operands (e4m3, fp32 out)
    variants=tuple(
        defines(
            **_BF16_FIXED,
            A_FMT=a,
            B_FMT=b,
            OUT_DTYPE=o,
            PRODUCER_REGS=BF16_PRODUCER_REGS,
            RING=BF16_RING,
            SLA=0,
            SLB=0,
            BF_DIAG=0,
            BF_PROF=0,
        )
        for a in (_E4M3, _E5M2)
        for b in (_E4M3, _E5M2)
        for o in (_BF16, _F16, _F32)
    )
    + tuple(
        defines(
            **_BF16_FIXED,
            A_FMT=_E4M3,
            B_FMT=_E4M3,
            OUT_DTYPE=_F32,
            PRODUCER_REGS=BF16_PRODUCER_REGS,
            RING=BF16_RING,
            SLA=code,
            SLB=code,
            BF_DIAG=0,
            BF_PROF=0,
        )
        for code in (1, 2, 3, 4, 5)
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

MX_GEMM_WINDOW_CHECK = KernelSpec(
    symbol="mx_gemm_window_check",
    file="gemm/mx_gemm_window.hip",
    required=("SL", "WIN_FMT"),
    # one operand per launch: its format's window and every scale layout code read in place
    variants=tuple(defines(WIN_FMT=f, SL=sl) for f in (_E4M3, _E5M2) for sl in (0, 1, 2, 3, 4, 5)),
    targets=("sm_90a",),
)

SPECS = (GEMM_MX_SM90, E2M1_TO_E4M3, GEMM_MX_SM90_WS, GEMM_MX_SM90_BF16, MX_GEMM_WINDOW_CHECK)
DISPATCH: dict = {}  # a GemmPath (mxrt/ops/gemm_paths.py) chooses it, not a dispatch row
