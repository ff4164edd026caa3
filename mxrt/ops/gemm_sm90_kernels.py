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

#: the issue-10 engine skeleton (persistent grid, TMA producer warpgroup, two consumer warpgroups with setmaxnreg):
#: a development kernel launched by mxrt/ops/gemm_sm90_ws.py from benchmarks/gemm_sm90_ws_dev.py, not a GemmPath.
#: DIAG=1 is the inexact k128-promotion timing diagnostic of the skeleton gate (HOPPER_MX_GEMM.md 4.7)
GEMM_MX_SM90_WS = KernelSpec(
    symbol="gemm_mx_sm90_ws",
    file="gemm/gemm_mx_sm90_ws.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "BM", "BN", "DBUF", "DIAG", "OUT_DTYPE", "SPLIT", "STAGES", "WS_MODE"),
    # SPLIT 0: consumer warpgroups split the tile's rows (m64n128 each); 1: its columns (two m64n64 blocks each,
    # exact only)
    variants=define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(128,),
        DBUF=(0,),
        DIAG=(0, 1),
        OUT_DTYPE=(_BF16,),
        SPLIT=(0,),
        STAGES=(4,),
        WS_MODE=(0,),
    )
    + define_grid(
        A_FMT=(_E4M3,),
        ATOMIC=(0,),
        B_FMT=(_E4M3,),
        BM=(128,),
        BN=(128,),
        DBUF=(0,),
        DIAG=(1,),
        OUT_DTYPE=(_BF16,),
        SPLIT=(0,),
        STAGES=(4,),
        WS_MODE=(2,),  # 3, 4 (no wgmma at all, so no expect_mma): built by benchmarks/gemm_sm90_ws_dev.py
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
        SPLIT=(1,),
        STAGES=(4,),
        WS_MODE=(0,),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

SPECS = (GEMM_MX_SM90, E2M1_TO_E4M3, GEMM_MX_SM90_WS)
DISPATCH: dict = {}  # a GemmPath (mxrt/ops/gemm_paths.py) chooses it, not a dispatch row
