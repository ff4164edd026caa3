"""The offline proof of the AMD decode kernels' builds (kernels_src/gemm/gemm_mx_decode_gfx9{50,42}.hip and their MoE
twins gemm_mx_decode_gfx9{50,42}_moe.hip): a sample of the define sets per kernel and target (21 row-major ones;
the dense kernels 21 more with WLB = 1, weights in the aiter 16x16 layout) builds with the expected matrix
instruction (the exact fp8/bf8 variant on gfx942), zero spills, zero scratch, and the LDS of the wave reduction only
(12,288 * MT bytes; the MoE kernels 256 more for the chunk's slot ids).
`mxrt compile-check --targets gfx942,gfx950` builds all 126."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from mxrt.codes import FMT_CODES
from mxrt.ops import gemm_decode_amd_kernels as K
from mxrt.runtime import compile_check

# offline AMD builds: ~15 s; CI still runs it
pytestmark = pytest.mark.slow
KERNELS = {
    ("gfx950", "dense"): K.GEMM_MX_DECODE_GFX950,
    ("gfx942", "dense"): K.GEMM_MX_DECODE_GFX942,
    ("gfx950", "moe"): K.GEMM_MX_DECODE_GFX950_MOE,
    ("gfx942", "moe"): K.GEMM_MX_DECODE_GFX942_MOE,
}
LDS_MORE = {"dense": 0, "moe": 256}  # the MoE kernels' slot ids (64 x i32)
_942_NAMES = {0: "fp8", 4: "fp8", 1: "bf8"}  # e2m1 is widened to e4m3, read as fp8
E4, E5, E2 = FMT_CODES["e4m3"], FMT_CODES["e5m2"], FMT_CODES["e2m1"]
# MXFP8 and MXFP4-weight decode at every token tile, e5m2 x e4m3 (bf8 operand), e2m1 x e2m1, e2m1 tokens at MT = 4
SAMPLE = [(E4, E4, 1), (E4, E2, 1), (E4, E4, 2), (E4, E2, 4), (E5, E4, 2), (E2, E2, 4), (E2, E4, 4)]
# the dense kernels with the weights in the aiter 16x16 layout (WLB = 1): the widest builds of each weight kind
SAMPLE_WLB = [(E4, E4, 4), (E4, E2, 4), (E2, E2, 4), (E5, E4, 1)]


@pytest.fixture(scope="module", params=list(KERNELS), ids="-".join)
def reports(request):
    target, kind = request.param
    why = compile_check.tools_missing(target)
    if why:
        pytest.skip(why)
    spec = KERNELS[request.param]
    chosen = [K.decode_amd_variant(a, b, mt) for a, b, mt in SAMPLE]
    if kind == "dense":
        chosen += [K.decode_amd_variant(a, b, mt, wlb=1) for a, b, mt in SAMPLE_WLB]
    assert all(d in spec.variants for d in chosen)
    with ThreadPoolExecutor() as pool:
        rs = list(pool.map(lambda d: compile_check.build_one(spec, d, target), chosen))
    return target, kind, rs


def test_sampled_variants_build_clean(reports):
    target, kind, rs = reports
    for r in rs:
        assert r.ok, r.error
        assert r.spills == 0 and r.scratch == 0, (r.defines, r.spills, r.scratch)
        assert r.lds == 12288 * r.defines["MT"] + LDS_MORE[kind], (r.defines, r.lds)
        assert r.registers["vgpr"] <= 512 and r.registers["sgpr"] <= 104
        a, b = r.defines["A_FMT"], r.defines["B_FMT"]
        if target == "gfx942":
            assert r.mma == [f"v_mfma_f32_16x16x32_{_942_NAMES[a]}_{_942_NAMES[b]}"], (r.defines, r.mma)
        else:
            assert r.mma == ["v_mfma_scale_f32_16x16x128_f8f6f4"], (r.defines, r.mma)


def test_variant_list():
    """21 row-major builds per kernel (every format pair at every MT); the dense kernels each again with WLB = 1,
    the MoE kernels never (their expert weights are row-major)."""
    for (_, kind), spec in KERNELS.items():
        plain = [d for d in spec.variants if "WLB" not in dict(d)]
        wlb = [d for d in spec.variants if "WLB" in dict(d)]
        assert len(plain) == 21 and len(wlb) == (21 if kind == "dense" else 0)
        assert {tuple((k, v) for k, v in d if k != "WLB") for d in wlb} <= {tuple(d) for d in plain}
        assert all(dict(d)["WLB"] == 1 for d in wlb)
        assert spec.optional == (("WLB",) if kind == "dense" else ())
    assert K.DECODE_AMD_MAX_M == 64
