"""Kernel specs, variants and tuning constants of the small-M (decode) MX GEMM path on sm_90a
(kernels_src/gemm/gemm_mx_decode_sm90.hip, launched by mxrt/ops/gemm_decode.py, a GemmPath: no dispatch row)."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import Defines, KernelSpec, defines

#: token tiles of 8 (define MT): a build serves m <= 8 * MT
DECODE_MT = (1, 2, 4, 8)
#: the largest m the path takes (its envelope)
DECODE_MAX_M = 8 * max(DECODE_MT)
#: 16-row weight groups per CTA (define RW) and warps splitting K inside a CTA (define KW)
DECODE_RW = 1
DECODE_KW = (4, 8, 16)
#: MX blocks loaded per batch by each warp (define U), per MT: the token fragments and scales of U blocks live in
#: registers (MT 8: 2 blocks, ~180 registers)
DECODE_U = {1: 4, 2: 4, 4: 2, 8: 2}
#: the largest KW per MT: the K-warp partials [KW][16][8 * MT] fp32 stay within 48 KB of static shared memory and
#: 32 * KW threads leave the registers of the MT 8 build unspilled (255 at 256 threads)
DECODE_KW_MAX = {1: 16, 2: 16, 4: 8, 8: 8}


def decode_variant(a_fmt: int, b_fmt: int, atomic: int, kw: int, mt: int, out: int) -> Defines:
    return defines(A_FMT=a_fmt, ATOMIC=atomic, B_FMT=b_fmt, KW=kw, MT=mt, OUT_DTYPE=out, RW=DECODE_RW,
                   U=DECODE_U[mt])  # fmt: skip


_F32, _BF16, _F16 = (GEMM_OUT_DTYPE_CODES[n] for n in ("float32", "bfloat16", "float16"))

GEMM_MX_DECODE_SM90 = KernelSpec(
    symbol="gemm_mx_decode_sm90",
    file="gemm/gemm_mx_decode_sm90.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "KW", "MT", "OUT_DTYPE", "RW", "U"),
    # every format pair at the default tile with bf16 out; every MT / KW / out dtype / accumulation mode on e4m3
    variants=tuple(decode_variant(FMT_CODES[fa], FMT_CODES[fb], 0, 4, 1, _BF16) for fa, fb in GEMM_FORMAT_PAIRS)
    + tuple(
        decode_variant(FMT_CODES["e4m3"], FMT_CODES["e4m3"], at, kw, mt, od)
        for mt in DECODE_MT
        for kw in DECODE_KW
        if kw <= DECODE_KW_MAX[mt]
        for od in (_F32, _BF16, _F16)
        for at in (0, 1)
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("mma.sync.aligned.m16n8k32",)),),
)

SPECS = (GEMM_MX_DECODE_SM90,)
DISPATCH: dict = {}  # a GemmPath (mxrt/ops/gemm_paths.py) chooses it, not a dispatch row
