"""Kernel specs and variants of the grouped MX GEMMs on the generic path (kernels_src/gemm/gemm_mx_grouped_generic.hip,
launched by mxrt/ops/grouped_gemm.py): forward / dgrad by group lengths (MODE 0), DeepGEMM's contiguous layout of
per-row group ids (MODE 1) and masked layout (MODE 2), and the variable-K wgrad (MODE 3). The main loop is the dense
generic kernel's (kernels_src/gemm/gemm_generic_tile.h).

On gfx950 / gfx942 the lens (MODE 0) and wgrad (MODE 3) problems run on the AMD grouped kernels
(kernels_src/gemm/gemm_mx_grouped_gfx950.hip / _gfx942.hip: the dense AMD kernels' main loops under the same
device-side group schedule); :data:`DISPATCH` names them, mxrt/ops/grouped_gemm_amd.py says which problems they take
(the others fall back to the generic kernel). On sm_90a the lens (MODE 0) and DeepGEMM ids / masked (MODE 1, 2)
problems with 16-bit out run on the Hopper grouped engine (kernels_src/gemm/gemm_mx_grouped_sm90_ws.hip: the issue-10
engine gemm_mx_sm90_ws walking a grouped work list built on the device; mxrt/ops/grouped_gemm_sm90_ws.py), the
variable-K wgrad (MODE 3) and what the engine declines on the older Hopper grouped kernel
(kernels_src/gemm/gemm_mx_grouped_sm90.hip: the dense gemm_mx_sm90 CTA tile under the same schedule;
mxrt/ops/grouped_gemm_sm90.py)."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import Defines, KernelSpec, defines
from .gemm_kernels import GEMM_GENERIC_THREADS

#: MODE define per problem kind (mxrt.problems.grouped_gemm.GROUPED_KINDS)
GROUPED_GEMM_MODES = {"lens": 0, "indices": 1, "masked": 2, "wgrad": 3, "kgrouped": 4}
#: DeepGEMM's m-grouped layouts (modes 1, 2) take fp8 operands and write bfloat16 (as DeepGEMM's kernels do)
DEEPGEMM_PAIRS = tuple(p for p in GEMM_FORMAT_PAIRS if "e2m1" not in p)
WGRAD_OUT = ("float32", "bfloat16")

F32, BF16 = GEMM_OUT_DTYPE_CODES["float32"], GEMM_OUT_DTYPE_CODES["bfloat16"]


def _v(fa: str, fb: str, mode: int, out: int, accum: int = 0, scale_f32: int = 0, sf_gmn_b: int = 1) -> Defines:
    return defines(
        ACCUM=accum,
        FMT_A=FMT_CODES[fa],
        FMT_B=FMT_CODES[fb],
        MODE=mode,
        OUT_DTYPE=out,
        SCALE_F32=scale_f32,
        SF_GMN_B=sf_gmn_b,
        THREADS=GEMM_GENERIC_THREADS,
    )


GEMM_MX_GROUPED_GENERIC = KernelSpec(
    symbol="gemm_mx_grouped_generic",
    file="gemm/gemm_mx_grouped_generic.hip",
    required=("ACCUM", "FMT_A", "FMT_B", "MODE", "OUT_DTYPE", "SCALE_F32", "SF_GMN_B", "THREADS"),
    variants=(
        # group_lens forward / dgrad: every pair, every out dtype
        *(_v(fa, fb, 0, od) for fa, fb in GEMM_FORMAT_PAIRS for od in GEMM_OUT_DTYPE_CODES.values()),
        # DeepGEMM m-grouped contiguous / masked: fp8 pairs, bf16 out; E8M0 1x32, or float32 1x128 x 128x128
        *(_v(fa, fb, mode, BF16) for fa, fb in DEEPGEMM_PAIRS for mode in (1, 2)),
        *(_v(fa, fb, mode, BF16, scale_f32=1, sf_gmn_b=128) for fa, fb in DEEPGEMM_PAIRS for mode in (1, 2)),
        # wgrad over the colwise layout: every pair, fp32 / bf16, plain or accumulating
        *(
            _v(fa, fb, 3, GEMM_OUT_DTYPE_CODES[od], acc)
            for fa, fb in GEMM_FORMAT_PAIRS
            for od in WGRAD_OUT
            for acc in (0, 1)
        ),
        # DeepGEMM k-grouped wgrad: fp8 pairs, fp32, E8M0 1x32 or float32 1x128 per channel, with or without c
        *(_v(fa, fb, 4, F32, acc, f32) for fa, fb in DEEPGEMM_PAIRS for acc in (0, 1) for f32 in (0, 1)),
    ),
)

#: the AMD grouped kernels' 256 threads (4 waves of 64; kernels_src/gemm/amd_gemm.h's CTA)
GROUPED_AMD_THREADS = 256
#: MODE defines of the AMD grouped kernels (forward / dgrad by lens, variable-K wgrad)
GROUPED_AMD_KINDS = ("lens", "wgrad")


def _amd_v(fa: str, fb: str, mode: int, out: int, accum: int = 0) -> Defines:
    return defines(
        A_FMT=FMT_CODES[fa], ACCUM=accum, B_FMT=FMT_CODES[fb], MODE=mode, OUT_DTYPE=out, THREADS=GROUPED_AMD_THREADS
    )


_GROUPED_AMD_VARIANTS = (
    # group_lens forward / dgrad: every pair, every out dtype
    *(_amd_v(fa, fb, 0, od) for fa, fb in GEMM_FORMAT_PAIRS for od in GEMM_OUT_DTYPE_CODES.values()),
    # variable-K wgrad: every pair, fp32 / bf16, plain or accumulating
    *(
        _amd_v(fa, fb, 3, GEMM_OUT_DTYPE_CODES[od], acc)
        for fa, fb in GEMM_FORMAT_PAIRS
        for od in WGRAD_OUT
        for acc in (0, 1)
    ),
)
_AMD_REQUIRED = ("A_FMT", "ACCUM", "B_FMT", "MODE", "OUT_DTYPE", "THREADS")

GEMM_MX_GROUPED_GFX950 = KernelSpec(
    symbol="gemm_mx_grouped_gfx950",
    file="gemm/gemm_mx_grouped_gfx950.hip",
    required=_AMD_REQUIRED,
    variants=_GROUPED_AMD_VARIANTS,
    targets=("gfx950",),
    expect_mma=(("gfx950", ("v_mfma_scale_f32_16x16x128_f8f6f4",)),),
)
GEMM_MX_GROUPED_GFX942 = KernelSpec(
    symbol="gemm_mx_grouped_gfx942",
    file="gemm/gemm_mx_grouped_gfx942.hip",
    required=_AMD_REQUIRED,
    variants=_GROUPED_AMD_VARIANTS,
    targets=("gfx942",),
    expect_mma=(("gfx942", ("v_mfma_f32_16x16x32_",)),),
)

#: the Hopper grouped kernel's CTA tiles (BM, BN, STAGES, DBUF; the dense gemm_mx_sm90 tiles of the same name in
#: mxrt/ops/gemm_sm90.py): 256 x 128 for 16-bit out with >= 512 rows per group on average, else 128 x 128
SM90_GROUPED_LARGE = (256, 128, 4, 0)
SM90_GROUPED_MEDIUM = (128, 128, 6, 1)
#: the DeepGEMM ids mode's tile: 128 x 128 with one partial in flight (its per-group loop around the main loop
#: spilled 48-164 bytes with two partials)
SM90_GROUPED_IDS = (128, 128, 6, 0)
#: MODE defines of the Hopper grouped kernel (lens, DeepGEMM indices, masked, the variable-K wgrad); DeepGEMM's
#: k-grouped wgrad stays generic (float32 out only, which the fp8 wgmma partials cannot meet at 1e-5)
GROUPED_SM90_KINDS = ("lens", "indices", "masked", "wgrad")
_SM90_FP8 = ("e4m3", "e5m2")


def _sm90_v(fa: str, fb: str, mode: int, out: int, tile: tuple[int, int, int, int], accum: int = 0) -> Defines:
    bm, bn, stages, dbuf = tile
    return defines(
        A_FMT=FMT_CODES[fa],
        ACCUM=accum,
        B_FMT=FMT_CODES[fb],
        BM=bm,
        BN=bn,
        DBUF=dbuf,
        MODE=mode,
        OUT_DTYPE=out,
        STAGES=stages,
    )


GEMM_MX_GROUPED_SM90 = KernelSpec(
    symbol="gemm_mx_grouped_sm90",
    file="gemm/gemm_mx_grouped_sm90.hip",
    required=("A_FMT", "ACCUM", "B_FMT", "BM", "BN", "DBUF", "MODE", "OUT_DTYPE", "STAGES"),
    variants=(
        # lens: fp8 pairs (e2m1 expanded to e4m3 first) x bf16 / f16, both tiles; fp32 out only for e2m1 x e2m1
        # (fp8 partials miss the 1e-5 fp32 bar, as the dense sm90 path) on the 128-row tile
        *(
            _sm90_v(fa, fb, 0, GEMM_OUT_DTYPE_CODES[od], tile)
            for fa in _SM90_FP8
            for fb in _SM90_FP8
            for od in ("bfloat16", "float16")
            for tile in (SM90_GROUPED_LARGE, SM90_GROUPED_MEDIUM)
        ),
        _sm90_v("e4m3", "e4m3", 0, F32, SM90_GROUPED_MEDIUM),
        # DeepGEMM contiguous (ids) / masked: fp8 pairs, bf16 out, the 128-row tile (DeepGEMM's 128-row alignment)
        *(_sm90_v(fa, fb, 1, BF16, SM90_GROUPED_IDS) for fa in _SM90_FP8 for fb in _SM90_FP8),
        *(_sm90_v(fa, fb, 2, BF16, SM90_GROUPED_MEDIUM) for fa in _SM90_FP8 for fb in _SM90_FP8),
        # variable-K wgrad: fp8 pairs x bf16, plain or accumulating, both tiles (256 rows when m > 128, as the dense
        # path); fp32 out only for e2m1 x e2m1 on the 128-row tile (as lens)
        *(
            _sm90_v(fa, fb, 3, BF16, tile, acc)
            for fa in _SM90_FP8
            for fb in _SM90_FP8
            for acc in (0, 1)
            for tile in (SM90_GROUPED_LARGE, SM90_GROUPED_MEDIUM)
        ),
        *(_sm90_v("e4m3", "e4m3", 3, F32, SM90_GROUPED_MEDIUM, acc) for acc in (0, 1)),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

#: the Hopper grouped engine's MODE defines (lens, DeepGEMM indices, masked: 16-bit out); the wgrad and fp32 out stay
#: on gemm_mx_grouped_sm90
GROUPED_SM90_WS_KINDS = ("lens", "indices", "masked")
#: its ring depth (the dense engine's, mxrt/ops/gemm_sm90_kernels.py WS_STAGES)
SM90_WS_STAGES = 4


def _sm90_ws_v(fa: str, fb: str, mode: int, out: int, scale_f32: int = 0) -> Defines:
    """A grouped engine build; ``scale_f32``: 0 MX (E8M0 per 32), 1 float32 per 128, 2 E8M0 per 128."""
    extra = {"SCALE_F32": scale_f32} if scale_f32 else {}
    return defines(A_FMT=FMT_CODES[fa], B_FMT=FMT_CODES[fb], MODE=mode, OUT_DTYPE=out, STAGES=SM90_WS_STAGES, **extra)


GEMM_MX_GROUPED_SM90_WS = KernelSpec(
    symbol="gemm_mx_grouped_sm90_ws",
    file="gemm/gemm_mx_grouped_sm90_ws.hip",
    required=("A_FMT", "B_FMT", "MODE", "OUT_DTYPE", "STAGES"),
    optional=("SCALE_F32",),
    variants=(
        # lens: fp8 pairs (e2m1 expanded to e4m3 first) x bf16 / f16
        *(
            _sm90_ws_v(fa, fb, 0, GEMM_OUT_DTYPE_CODES[od])
            for fa in _SM90_FP8
            for fb in _SM90_FP8
            for od in ("bfloat16", "float16")
        ),
        # DeepGEMM contiguous (ids) / masked: fp8 pairs, bf16 out
        *(_sm90_ws_v(fa, fb, mode, BF16) for mode in (1, 2) for fa in _SM90_FP8 for fb in _SM90_FP8),
        # the same with DeepGEMM's Hopper recipe (float32 1x128 / 128x128 scales) and its granularity in UE8M0 bytes
        *(_sm90_ws_v(fa, fb, mode, BF16, sc) for sc in (1, 2) for mode in (1, 2) for fa, fb in DEEPGEMM_PAIRS),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async",)),),
)

#: the torch route's group ends (kernels_src/gemm/grouped_offsets.hip; mxrt/ops/grouped_gemm_torch.py): one CTA
GROUPED_OFFSETS_THREADS = 1024
GROUPED_OFFSETS = KernelSpec(
    symbol="grouped_offsets",
    file="gemm/grouped_offsets.hip",
    required=("THREADS",),
    variants=(defines(THREADS=GROUPED_OFFSETS_THREADS),),
    targets=("sm_90a",),
)

#: the variable-K wgrad on exact bf16 operands (kernels_src/gemm/gemm_wgrad_bf16_sm90.hip,
#: mxrt/ops/grouped_wgrad_bf16.py): output tiles 128 x BN, the ring depth per BN (128: 5 stages of 32 KB, 256: 4
#: of 48 KB); float32 and bfloat16 out (the wgrad's out dtypes), plain and accumulating, at both widths (clusters of
#: two sharing B by TMA multicast were 1.5x slower: session 15 call 8, code in commit 7accc1b)
WGRAD_BF16_STAGES = {128: 5, 256: 4}
GEMM_WGRAD_BF16_SM90 = KernelSpec(
    symbol="gemm_wgrad_bf16_sm90",
    file="gemm/gemm_wgrad_bf16_sm90.hip",
    required=("ACCUM", "BN", "OUT_DTYPE", "STAGES"),
    optional=("MODE",),
    variants=(
        *(
            defines(ACCUM=acc, BN=bn, OUT_DTYPE=od, STAGES=st)
            for bn, st in WGRAD_BF16_STAGES.items()
            for od in (F32, BF16)
            for acc in (0, 1)
        ),
        # MODE 1: the forward / dgrad by group_lens with float32 out (a bf16-out build spilled 656 bytes offline)
        defines(ACCUM=0, BN=256, MODE=1, OUT_DTYPE=F32, STAGES=WGRAD_BF16_STAGES[256]),
        # MODE 2: DeepGEMM's k-grouped wgrad with float32 scales (a partial per 128 columns, promoted once), f32 out
        *(defines(ACCUM=acc, BN=128, MODE=2, OUT_DTYPE=F32, STAGES=WGRAD_BF16_STAGES[128]) for acc in (0, 1)),
    ),
    targets=("sm_90a",),
    expect_mma=(("sm_90a", ("wgmma.mma_async.sync.aligned.m64n",)),),
)

#: DeepGEMM's k-grouped operands (group blocks K-major one after another) as one bf16 [rows, sum(ks)] matrix
#: (kernels_src/gemm/kgrouped_to_bf16.hip, mxrt/ops/grouped_wgrad_bf16.py): E8M0 scales folded in (SCALED 1) or
#: the codes alone (SCALED 0: float32 scales, applied per 128 columns by the MODE 2 GEMM)
KGROUPED_TO_BF16_THREADS = 256
KGROUPED_TO_BF16 = KernelSpec(
    symbol="kgrouped_to_bf16",
    file="gemm/kgrouped_to_bf16.hip",
    required=("EFMT", "SCALED", "THREADS"),
    variants=tuple(
        defines(EFMT=FMT_CODES[f], SCALED=sc, THREADS=KGROUPED_TO_BF16_THREADS) for f in _SM90_FP8 for sc in (0, 1)
    ),
    targets=("sm_90a",),
)

SPECS = (
    GEMM_MX_GROUPED_GENERIC,
    GROUPED_OFFSETS,
    GEMM_WGRAD_BF16_SM90,
    KGROUPED_TO_BF16,
    GEMM_MX_GROUPED_GFX950,
    GEMM_MX_GROUPED_GFX942,
    GEMM_MX_GROUPED_SM90,
    GEMM_MX_GROUPED_SM90_WS,
)
#: op -> {target: spec}; an AMD entry serves only the problems mxrt/ops/grouped_gemm_amd.py accepts (lens / wgrad);
#: the sm_90a entry of grouped_gemm_mx (the engine) those of mxrt/ops/grouped_gemm_sm90_ws.py (lens, DeepGEMM ids /
#: masked with E8M0 or DeepGEMM's float32 scales and 16-bit out), what it declines falls to :data:`FALLBACK`
#: (gemm_mx_grouped_sm90: fp32 out for e2m1 x e2m1, masked with more groups than the engine's schedule holds), as
#: does the wgrad (16-bit out); the others (k-grouped everywhere, float32 scales past the engine's envelope, fp32 out
#: with an fp8 operand on sm_90a) run on "generic"
_ROW = {"generic": GEMM_MX_GROUPED_GENERIC, "gfx950": GEMM_MX_GROUPED_GFX950, "gfx942": GEMM_MX_GROUPED_GFX942}
DISPATCH = {
    "grouped_gemm_mx": {**_ROW, "sm_90a": GEMM_MX_GROUPED_SM90_WS},
    "grouped_gemm_mx_wgrad": {**_ROW, "sm_90a": GEMM_MX_GROUPED_SM90},
}
#: a dispatch entry -> the kernel that runs what it declines (before "generic")
FALLBACK = {GEMM_MX_GROUPED_SM90_WS: GEMM_MX_GROUPED_SM90}
