"""Kernel specs, variants and tuning constants of the small-M (decode) MX GEMM path on sm_90a
(kernels_src/gemm/gemm_mx_decode_sm90.hip, launched by mxrt/ops/gemm_decode.py, a GemmPath: no dispatch row)."""

from __future__ import annotations

from ..codes import (
    FMT_CODES,
    GEMM_OUT_DTYPE_CODES,
    SCALE_LAYOUT_CODES,
    SCALE_LAYOUT_TURBO16X4_U32,
    WEIGHT_LAYOUT_CODES,
)
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import Defines, KernelSpec, defines

#: token tiles of 8 (define MT): a build serves m <= 8 * MT
DECODE_MT = (1, 2, 4, 8)
#: the largest m the path takes (its envelope)
DECODE_MAX_M = 8 * max(DECODE_MT)
#: warps per CTA, each streaming its share of the CTA's K range (define KW)
DECODE_KW = (2, 4, 8)
#: ring depth per warp (define STAGES), each stage 4 MX blocks of 16 * RT weight rows and 8 * MT tokens
DECODE_STAGES = (2, 3, 4, 6)
#: weight row tiles of 16 per warp / CTA (define RT): each token fragment feeds RT mmas, so the token tile a CTA
#: loads from L2 serves 16 * RT weight rows (RT * MT <= 16: the accumulators stay in registers)
DECODE_RT = (1, 2, 4)
#: shared memory a CTA may use (H100: 227 KB per block)
DECODE_SMEM_MAX = 227 * 1024
#: scale layouts the dense kernel reads in place (defines SLA / SLB): row-major 0 and the MXRT_SCALE_LAYOUT_* codes
#: 1..4, 5 = turbo16x4 as uint32 words (kernels_src/gemm/gemm_decode_sm90_scales.h); the MoE kernel reads row-major
DECODE_LAYOUTS = (*SCALE_LAYOUT_CODES.values(), SCALE_LAYOUT_TURBO16X4_U32)
#: the layouts that scatter a row's 4 blocks of a group over 4 words (aiter32x8, turbo16x4 bytes and uint32 words)
SCATTERED_LAYOUTS = (SCALE_LAYOUT_CODES["aiter32x8"], SCALE_LAYOUT_CODES["turbo16x4"], SCALE_LAYOUT_TURBO16X4_U32)

_F32, _BF16, _F16 = (GEMM_OUT_DTYPE_CODES[n] for n in ("float32", "bfloat16", "float16"))
_E2M1 = FMT_CODES["e2m1"]


def row_bytes(fmt: int) -> int:
    """Bytes of one row's 4 MX blocks in a stage (the TMA box width): 128 (fp8) or 64 (e2m1)."""
    return 64 if fmt == _E2M1 else 128


def scale_words(layout: int) -> int:
    """Scale words a stage stages per row in scale layout code ``layout`` (the kernel's DEC_SWORDS): 4 for the
    scattered layouts (one per MX block), else 1 (the group's 4 bytes are one aligned word)."""
    return 4 if layout in SCATTERED_LAYOUTS else 1


def stage_bytes(a_fmt: int, b_fmt: int, mt: int, rt: int = 1, sla: int = 0, slb: int = 0) -> int:
    """One ring stage: the code tiles (16 * rt weight rows, 8 * mt token rows) padded to 1024 bytes, the scale
    words (:func:`scale_words` per row in layouts ``sla`` / ``slb``), the slot's mbarrier."""
    codes = -(-(16 * rt * row_bytes(b_fmt) + 8 * mt * row_bytes(a_fmt)) // 1024) * 1024
    return codes + 16 * rt * 4 * scale_words(slb) + 8 * mt * 4 * scale_words(sla) + 8


def smem_bytes(a_fmt: int, b_fmt: int, mt: int, kw: int, stages: int, rt: int = 1, sla: int = 0, slb: int = 0) -> int:
    """Dynamic shared memory of a build: the warps' rings (the code stages also hold the [kw][16 * rt][8 * mt] fp32
    partials at the end) and 1024 bytes of alignment slack."""
    return kw * stages * stage_bytes(a_fmt, b_fmt, mt, rt, sla, slb) + 1024


def valid_rt(mt: int, rt: int) -> bool:
    """RT values a build with MT token tiles takes (the kernel's static assertion)."""
    return rt in DECODE_RT and rt * mt <= 16


def decode_variant(
    a_fmt: int, b_fmt: int, atomic: int, kw: int, mt: int, out: int, stages: int, rt: int = 1, cl: int = 0
) -> Defines:
    """The defines of one build of the MoE kernel (row-major scales); ``cl`` 1: each CTA runs its block's chunks in
    turn (define CL, set only then: the grid has one chunk)."""
    extra = {"CL": 1} if cl else {}
    return defines(A_FMT=a_fmt, ATOMIC=atomic, B_FMT=b_fmt, KW=kw, MT=mt, OUT_DTYPE=out, RT=rt, STAGES=stages, **extra)


def dense_variant(
    a_fmt: int,
    b_fmt: int,
    atomic: int,
    kw: int,
    mt: int,
    out: int,
    stages: int,
    rt: int = 1,
    sla: int = 0,
    slb: int = 0,
    wlb: int = 0,
) -> Defines:
    """The defines of one build of the dense kernel: :func:`decode_variant`'s, the scale layouts SLA / SLB and,
    for weights in the aiter 16x16 layout, WLB = 1 (absent for row-major codes: those builds keep their define
    sets, hence their cache keys)."""
    extra = {"WLB": wlb} if wlb else {}
    return defines(**dict(decode_variant(a_fmt, b_fmt, atomic, kw, mt, out, stages, rt)), SLA=sla, SLB=slb, **extra)


#: weight code layouts the decode kernels read in place besides row-major (define WLB: mxrt.codes.WEIGHT_LAYOUT_CODES)
WEIGHT_LAYOUTS = tuple(name for name in WEIGHT_LAYOUT_CODES if name is not None)


def weight_layout_define(layout: str | None) -> int:
    """Define WLB of a call whose weight codes are in ``layout`` (``GemmProblem.b_weight_layout``): 0 row-major."""
    return WEIGHT_LAYOUT_CODES[layout]


E4M3 = _E4M3 = FMT_CODES["e4m3"]  # the largest stages (fp8 on both sides)
_LAYOUTS = DECODE_LAYOUTS[1:]  # the preshuffled ones
_SL = {name: SCALE_LAYOUT_CODES[name] for name in ("aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0")}
GEMM_MX_DECODE_SM90 = KernelSpec(
    symbol="gemm_mx_decode_sm90",
    file="gemm/gemm_mx_decode_sm90.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "KW", "MT", "OUT_DTYPE", "RT", "SLA", "SLB", "STAGES"),
    optional=("WLB",),  # absent: row-major weight codes (those builds keep their define sets)
    # row-major scales: every format pair at one tile with bf16 out (RT 1 and 2); every MT / KW / ring depth / out
    # dtype / mode on e4m3 at RT 1; every RT per MT at two ring depths. Then each preshuffled layout (23 builds):
    # on the weights alone (e4m3 MT 1; mixed e4m3 x e2m1 MT 4 RT 4), on both operands (e2m1 x e2m1 fp32 out MT 2
    # RT 2; e4m3 fp16 atomic MT 8 RT 2), and three mixed pairs (the last: two layouts of different word counts)
    variants=tuple(
        dense_variant(FMT_CODES[fa], FMT_CODES[fb], 0, 4, 1, _BF16, 4, rt)
        for fa, fb in GEMM_FORMAT_PAIRS
        for rt in (1, 2)
    )
    + tuple(
        dense_variant(_E4M3, _E4M3, at, kw, mt, od, st)
        for mt in DECODE_MT
        for kw in DECODE_KW
        for st in DECODE_STAGES
        if smem_bytes(_E4M3, _E4M3, mt, kw, st) <= DECODE_SMEM_MAX
        for od, at in ((_BF16, 0), (_F16, 1), (_F32, 0))
    )
    + tuple(
        dense_variant(_E4M3, _E4M3, 0, kw, mt, _BF16, st, rt)
        for mt in DECODE_MT
        for rt in DECODE_RT[1:]
        if valid_rt(mt, rt)
        for kw in (2, 4)
        for st in (2, 3)
        if smem_bytes(_E4M3, _E4M3, mt, kw, st, rt) <= DECODE_SMEM_MAX
    )
    + tuple(
        v
        for sl in _LAYOUTS
        for v in (
            dense_variant(_E4M3, _E4M3, 0, 2, 1, _BF16, 3, 1, 0, sl),
            dense_variant(_E4M3, _E2M1, 0, 2, 4, _BF16, 2, 4, 0, sl),
            dense_variant(_E2M1, _E2M1, 0, 4, 2, _F32, 3, 2, sl, sl),
            dense_variant(_E4M3, _E4M3, 1, 2, 8, _F16, 2, 2, sl, sl),
        )
    )
    + tuple(
        dense_variant(_E4M3, _E4M3, 0, 4, 8, _BF16, 2, 2, sla, slb)
        for sla, slb in (
            (_SL["deepgemm_ue8m0"], _SL["turbo16x4"]),
            (_SL["aiter32x8"], _SL["cublas128x4"]),
            (SCALE_LAYOUT_TURBO16X4_U32, _SL["deepgemm_ue8m0"]),
        )
    )
    # weights in the aiter 16x16 layout (WLB 1): every format pair at MT 1 RT 1; e4m3 and e2m1 weights at each RT
    # with a preshuffled weight scale layout, an fp16 atomic build and an fp32 e2m1 x e2m1 build
    + tuple(dense_variant(FMT_CODES[fa], FMT_CODES[fb], 0, 4, 1, _BF16, 4, 1, 0, 0, 1) for fa, fb in GEMM_FORMAT_PAIRS)
    + tuple(
        dense_variant(_E4M3, fb, 0, 2, mt, _BF16, 3, rt, 0, _SL["aiter32x8"], 1)
        for fb in (_E4M3, _E2M1)
        for mt, rt in ((2, 2), (4, 4))
    )
    + (
        dense_variant(_E4M3, _E4M3, 1, 2, 8, _F16, 2, 2, 0, 0, 1),
        dense_variant(_E2M1, _E2M1, 0, 4, 2, _F32, 3, 2, 0, _SL["turbo16x4"], 1),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("mma.sync.aligned.m16n8k",)),),  # k32 fp8 (fp8 weights), k16 f16 (e2m1 weights)
)

#: (kw, stages, rt) of the MoE build with fp8 weights per MT, for K >= MOE_LONG_K and below: KW warps split K,
#: STAGES deep rings, 16 * RT weight rows per CTA. Measured on an H100 over DeepSeek-V3's gate_up (K 7168) and
#: down (K 2048) at T 1-64 and blocks of 8-64 slots (RESULTS.md session 20, calls 6-7): 32 rows per CTA spread
#: each CTA's ramp over twice the bytes (1.1-1.9x the RT 1 builds); 4 warps pay only where K gives them work.
MOE_DEFAULT = {
    1: ((4, 2, 2), (4, 2, 2)),
    2: ((4, 2, 2), (4, 2, 2)),
    4: ((4, 2, 2), (2, 2, 2)),
    8: ((2, 2, 2), (2, 2, 2)),
}
#: the same for e2m1 weights (half the bytes per row: 64 rows per CTA where RT * MT <= 16 allows). With K >= MOE_LONG_K
#: blocks of 8 / 16 (MT 1 / 2) take 4 warps since the f16-operand kernel (session 23, calls 4-5, gate_up K 7168: MT 2
#: (4, 2, 4) 7-11% faster than (2, 3, 4) at T 1-64, MT 1 (4, 3, 4) 0-11%); down (K 2048) keeps (2, 3, 4); MT 4 long
#: K takes (2, 2, 4) since session 24 (blocks of 32, gate_up T 4 / 16 / 64: 237.3 / 455.8 / 604.2 us against 251.8 /
#: 477.5 / 624.3 for (2, 3, 4); RESULTS.md session 24, call 14); MT 2 short K takes (2, 2, 4) since session 25's
#: shorter stage head (down T 4 / 16 / 64: 88.2 / 169.3 / 222.3 us against 88.1 / 175.3 / 225.7; call 7)
MOE_DEFAULT_E2M1 = {
    1: ((4, 3, 4), (2, 3, 4)),
    2: ((4, 2, 4), (2, 2, 4)),
    4: ((2, 2, 4), (2, 3, 4)),
    8: ((2, 2, 2), (2, 2, 2)),
}
MOE_LONG_K = 4096
#: e2m1 builds for grids of at most MOE_FEW_BLOCKS live blocks (one token routed top-8: T = 1), per MT (long K,
#: short K). Measured on an H100 over DeepSeek-V3's gate_up / down at T = 1 (RESULTS.md session 24, calls 2, 7, 12),
#: us against the MOE_DEFAULT_E2M1 build: blocks of 16 gate_up (3, 2, 4) 60.7 / 64.1, down (1, 3, 4) 38.8 / 40.8;
#: blocks of 8 down (1, 3, 4) 35.5 / 42.2 (gate_up: the default is as fast); blocks of 32 gate_up (2, 2, 4) 74.4 /
#: 78.6, down (1, 3, 4) 44.4 / 47.1. From T = 2 the defaults stay ahead on down and on gate_up at blocks of 8 / 16.
MOE_FEW_BLOCKS = 8
MOE_FEW_E2M1 = {1: ((4, 3, 4), (1, 3, 4)), 2: ((3, 2, 4), (1, 3, 4)), 4: ((2, 2, 4), (1, 3, 4))}
#: fp8-weight short-K builds where a block spans several chunks (the chunk-loop builds, CL 1), per MT. H100,
#: DeepSeek-V3 down at MT 2, blocks of 64 (RESULTS.md session 24, call 21): T 1 / 16 / 64 52.5 / 284.7 / 342.4 us
#: against (4, 2, 2)'s 52.0 / 285.4 / 361.5
MOE_CHUNKED_FP8_SHORT_K = {2: (2, 2, 2)}
_CHUNKED_FP8 = {mt: (b, b) for mt, b in MOE_CHUNKED_FP8_SHORT_K.items()}  # as (long K, short K) for the variants

#: the MoE decode kernel of the same file (mxrt/ops/moe_gemm.py): sorted_token_ids gather, one expert per CTA
GEMM_MX_DECODE_SM90_MOE = KernelSpec(
    symbol="gemm_mx_decode_sm90_moe",
    file="gemm/gemm_mx_decode_sm90_moe.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "KW", "MT", "OUT_DTYPE", "RT", "STAGES"),
    optional=("CL",),  # absent: one grid chunk per CTA
    variants=tuple(
        dict.fromkeys(
            tuple(decode_variant(FMT_CODES[fa], FMT_CODES[fb], 0, 2, 1, _BF16, 3) for fa, fb in GEMM_FORMAT_PAIRS)
            + tuple(
                decode_variant(_E4M3, _E4M3, 0, kw, mt, od, 3 if mt <= 2 else 2)
                for mt in DECODE_MT
                for kw in (2, 4)
                for od in (_BF16, _F16, _F32)
            )
            + tuple(  # the tuned builds (MOE_DEFAULT / _E2M1 / MOE_FEW_E2M1) the op launches, per weight kind and out
                decode_variant(fa, fb, 0, kw, mt, od, st, rt)
                for fa, fb, ods, table in (
                    (_E4M3, _E4M3, (_BF16, _F16), MOE_DEFAULT),
                    (_E4M3, _E2M1, (_BF16, _F16), MOE_DEFAULT_E2M1),
                    (_E4M3, _E2M1, (_BF16, _F16), MOE_FEW_E2M1),
                    (_E2M1, _E2M1, (_F32,), MOE_DEFAULT_E2M1),
                    (_E2M1, _E2M1, (_F32,), MOE_FEW_E2M1),
                    (_E4M3, _E4M3, (_BF16, _F16), _CHUNKED_FP8),
                )
                for mt in table
                for kw, st, rt in table[mt]
                for od in ods
            )
            + tuple(  # the chunk-loop builds (blocks of more slots than a CTA's MT: MT 2 and 4 at decode sizes)
                decode_variant(fa, fb, 0, kw, mt, od, st, rt, 1)
                for fa, fb, od, table in (
                    (_E4M3, _E4M3, _BF16, MOE_DEFAULT),
                    (_E4M3, _E4M3, _BF16, _CHUNKED_FP8),
                    (_E4M3, _E2M1, _BF16, MOE_DEFAULT_E2M1),
                )
                for mt in (2, 4)
                if mt in table
                for kw, st, rt in table[mt]
            )
        )
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("mma.sync.aligned.m16n8k",)),),  # k32 fp8 (fp8 weights), k16 f16 (e2m1 weights)
)

SPECS = (GEMM_MX_DECODE_SM90, GEMM_MX_DECODE_SM90_MOE)
DISPATCH: dict = {}  # a GemmPath (mxrt/ops/gemm_paths.py) chooses it, not a dispatch row


# ---- the wgmma decode kernel (kernels_src/gemm/gemm_mx_decode_sm90_wg.hip, the GemmPath sm90_decode_wg) ----------

#: token tiles (define NT, the wgmma N): a build serves m <= NT
WG_NT = (16, 32, 64)
#: consumer warpgroups per CTA (define NC)
WG_NC = (1, 2, 4)
#: token parts (define NS): warpgroup c multiplies tokens [c % NS * NT / NS, ...) (a wgmma N of NT / NS); the NC / NS
#: warpgroups of one part take the stages in turn (in-CTA split-K)
WG_NS = (1, 2)
#: producer warps (define PW): warp w fills stages w, w + PW, ... (one warp's ~170 instructions per stage bound
#: the kernel at ~2 TB/s, session 12 call 10); 8 with at most two consumer warpgroups of a wgmma N <= 32 (or one)
WG_PW = (1, 2, 4, 8)
#: ring depths (define STAGES; a multiple of NC / NS and of PW)
WG_STAGES = (2, 4, 6, 8, 10, 12, 16)
#: e2m1 staging slots per producer warp (define PF): a warp fetches its stages PF - 1 of its iterations ahead
WG_PF = (2, 3, 4)
#: weight rows per CTA (the wgmma M)
WG_ROWS = 64


def wg_smem_bytes(nt: int, nc: int, stages: int, ns: int = 1, w4: bool = False, pw: int = 1, pf: int = 2) -> int:
    """Dynamic shared memory of a wgmma decode build: per stage the code tiles (64 weight rows + nt tokens of 128
    bytes), the scale words, the token factors and the flag; with e2m1 weights (``w4``) ``pf`` staging slots per
    producer warp (a packed tile of 64 rows x 64 bytes and the stage's scale words); the epilogue's partials, the
    mbarriers, and 1024 bytes of alignment slack (the stream-K grid needs nothing more)."""
    ntw = nt // ns
    codes = stages * (WG_ROWS * 128 + nt * 128) + (pw * pf * (WG_ROWS * 64 + (WG_ROWS + nt) * 4) if w4 else 0)
    scales = stages * (WG_ROWS + nt) * 4
    factors = stages * ns * 16 * (ntw // 4 + 4) * 4 + (stages + 1) // 2 * 2 * 4
    return codes + scales + factors + nc * ntw * 64 * 4 + 16 * stages + 1024


def wg_valid(nt: int, nc: int, stages: int, ns: int = 1, pw: int = 1, w4: bool = False, pf: int = 2) -> bool:
    """The kernel's static assertions, the shared-memory limit, and registers: four consumer warpgroups (up to 640
    threads, at most 96 registers each) only with a wgmma N of 16 (N 32 spilled 12 bytes offline); eight producer
    warps (512 threads with two consumer warpgroups: at most 128 registers) only up to a wgmma N of 32 or with one
    consumer warpgroup."""
    return (
        nt in WG_NT
        and nc in WG_NC
        and ns in WG_NS
        and nc % ns == 0
        and nt // ns >= 16
        and (nc < 4 or nt // ns == 16)
        and stages in WG_STAGES
        and stages % (nc // ns) == 0
        and pw in WG_PW
        and stages % pw == 0
        and (pw < 8 or nc == 1 or (nc == 2 and nt // ns <= 32))
        and (not w4 or pf in WG_PF)
        and wg_smem_bytes(nt, nc, stages, ns, w4, pw, pf) <= DECODE_SMEM_MAX
    )


def wg_pf(nt: int, nc: int, stages: int, ns: int = 1, pw: int = 1) -> int:
    """The e2m1 staging depth of a build: 3 slots per producer warp (two stages fetched ahead) where they fit, else 2
    (``wg_valid`` decides whether the build exists at all)."""
    return 3 if wg_valid(nt, nc, stages, ns, pw, True, 3) else 2


def wg_variant(
    a_fmt: int,
    b_fmt: int,
    atomic: int,
    nt: int,
    nc: int,
    out: int,
    stages: int,
    ns: int = 1,
    pw: int = 1,
    pf: int = 0,
    sk: int = 0,
    wlb: int = 0,
) -> Defines:
    """The defines of one build of the wgmma decode kernel (``sk``: the stream-K grid); e2m1 weights also take ``PF``
    (``pf``, or by default :func:`wg_pf`); weights in the aiter 16x16 layout WLB = 1 (absent for row-major codes)."""
    d = dict(A_FMT=a_fmt, ATOMIC=atomic, B_FMT=b_fmt, NC=nc, NS=ns, NT=nt, OUT_DTYPE=out, PW=pw, SK=sk, STAGES=stages)
    if b_fmt == FMT_CODES["e2m1"]:
        d["PF"] = pf or wg_pf(nt, nc, stages, ns, pw)
    if wlb:
        d["WLB"] = wlb
    return defines(**d)


_E5M2 = FMT_CODES["e5m2"]
_E2M1 = FMT_CODES["e2m1"]


#: the envelope default's producer warps: 4; e2m1 weights with a token tile of at most 32: 8 (one slot each; the
#: widening binds the producers: 7-13% faster than 4 on an H200 at M 16 / 32, session 13 call 10; MXFP8 gained nothing)
WG_DEFAULT_PW, WG_E2M1_PW = 4, 8


def wg_default_pw(nt: int, w4: bool) -> int:
    """The envelope default's producer warps (:data:`WG_DEFAULT_PW`, :data:`WG_E2M1_PW`)."""
    return WG_E2M1_PW if w4 and nt <= 32 else WG_DEFAULT_PW


def _wg_deep(nt: int, nc: int, ns: int) -> int:
    """The ring depth of the spec's per-format / per-dtype builds: 8, or 4 where 8 stages do not fit."""
    return 8 if wg_valid(nt, nc, 8, ns) else 4


#: (nc, ns) pairs of the spec: two warpgroups splitting K, four splitting K and the tokens
_WG_SHAPES = ((2, 1), (4, 2))
GEMM_MX_DECODE_SM90_WG = KernelSpec(
    symbol="gemm_mx_decode_sm90_wg",
    file="gemm/gemm_mx_decode_sm90_wg.hip",
    required=("A_FMT", "ATOMIC", "B_FMT", "NC", "NS", "NT", "OUT_DTYPE", "PW", "SK", "STAGES"),
    optional=("PF", "WLB"),  # e2m1 weights only; weights in the aiter 16x16 layout
    # every fp8 format pair at NT 64 (two warpgroups) and NT 32 (four, token halves), bf16; every NT x NC x NS x PW
    # that builds at two ring depths (bf16); the fp32 slices of split-K and the fp16 atomic mode per NT and shape
    variants=tuple(
        wg_variant(fa, fb, 0, nt, nc, _BF16, _wg_deep(nt, nc, ns), ns, 2)
        for fa in (_E4M3, _E5M2)
        for fb in (_E4M3, _E5M2)
        for nt, nc, ns in ((64, 2, 1), (32, 4, 2))
    )
    + tuple(
        wg_variant(_E4M3, _E4M3, 0, nt, nc, _BF16, st, ns, pw)
        for nt in WG_NT
        for nc in WG_NC
        for ns in WG_NS
        for pw in WG_PW
        for st in (4, 8)
        if wg_valid(nt, nc, st, ns, pw)
        and not ((nt, nc, ns) in ((64, 2, 1), (32, 4, 2)) and st == _wg_deep(nt, nc, ns) and pw == 2)
    )
    + tuple(
        wg_variant(_E4M3, _E4M3, at, nt, nc, od, _wg_deep(nt, nc, ns), ns, 2)
        for nt in WG_NT
        for nc, ns in _WG_SHAPES
        if wg_valid(nt, nc, _wg_deep(nt, nc, ns), ns, 2)
        for od, at in ((_F32, 0), (_F16, 1), (_F16, 0))
    )
    # e2m1 weights (e4m3 tokens, widened by the producer warps): every token tile and shape of the envelope default
    # at its ring depth with its producer-warp count (8 up to NT 32, else 4), bf16 / the fp32 slices / the fp16
    # atomic mode, and the other producer-warp counts in bf16
    + tuple(
        wg_variant(_E4M3, _E2M1, at, nt, nc, od, st, ns, pw)
        for nt in WG_NT
        for nc, ns in ((2, 1), (4, 2), (1, 1))
        for st in (8, 4)
        for pw in (8, 4, 2, 1)
        for od, at in ((_BF16, 0), (_F32, 0), (_F16, 1))
        if wg_valid(nt, nc, st, ns, pw, True)
        and (st == 8 or not wg_valid(nt, nc, 8, ns, pw, True))
        and (pw == wg_default_pw(nt, True) or (od, at) == (_BF16, 0))
        and ((nc, ns) == (2, 1) or (od, at) == (_BF16, 0))
    )
    # and the other staging depths of the default shape (bf16)
    + tuple(
        wg_variant(_E4M3, _E2M1, 0, nt, 2, _BF16, 8, 1, pw, pf)
        for nt in WG_NT
        for pw in ((8, 4) if nt <= 32 else (4,))
        for pf in WG_PF
        if wg_valid(nt, 2, 8, 1, pw, True, pf) and pf != wg_pf(nt, 2, 8, 1, pw)
    )
    # the stream-K grid (a split_k = 1 call): the envelope default of every format pair and token tile, bf16 / fp16
    + tuple(
        wg_variant(fa, fb, 0, nt, 2, od, 8, 1, wg_default_pw(nt, fb == _E2M1), 0, 1)
        for fa, fb in ((_E4M3, _E4M3), (_E4M3, _E5M2), (_E5M2, _E4M3), (_E5M2, _E5M2), (_E4M3, _E2M1))
        for nt in WG_NT
        for od in (_BF16, _F16)
    )
    # weights in the aiter 16x16 layout (WLB 1): the envelope default of each weight format and token tile, both
    # grids, bf16; the fp32 slices and the fp16 atomic mode at NT 64
    + tuple(
        wg_variant(_E4M3, fb, 0, nt, 2, _BF16, 8, 1, wg_default_pw(nt, fb == _E2M1), 0, sk, 1)
        for fb in (_E4M3, _E5M2, _E2M1)
        for nt in WG_NT
        for sk in (0, 1)
    )
    + tuple(
        wg_variant(_E4M3, fb, at, 64, 2, od, 8, 1, WG_DEFAULT_PW, 0, 0, 1)
        for fb in (_E4M3, _E2M1)
        for od, at in ((_F32, 0), (_F16, 1))
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async.sync.aligned.m64n",)),),
)

SPECS = (*SPECS, GEMM_MX_DECODE_SM90_WG)
