"""The offline proof of the AMD grouped GEMM kernels' builds (gemm_mx_grouped_gfx950.hip / _gfx942.hip): define sets
the launcher uses build for their target with the expected matrix instruction (the exact fp8/bf8 variant on
gfx942), zero spills, zero scratch, LDS within the target's limit. `mxrt compile-check --targets gfx942,gfx950`
builds all 98 (49 per target; NOTES.md has the table)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from mxrt.ops import grouped_gemm_kernels
from mxrt.runtime import compile_check

LDS_LIMIT = {"gfx950": 160 * 1024, "gfx942": 64 * 1024}
# a handful of AMD builds: ~30 s; CI still runs it
pytestmark = pytest.mark.slow
KERNELS = {"gfx950": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX950, "gfx942": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX942}
_942_NAMES = {0: "fp8", 4: "fp8", 1: "bf8"}  # e2m1 is widened to e4m3, read as fp8
# (A_FMT, B_FMT, MODE, OUT_DTYPE, ACCUM): both modes, fp8 / bf8 / native and widened fp4, every out dtype, accumulate
CHOSEN = {(0, 0, 0, 1, 0), (1, 0, 0, 2, 0), (4, 4, 0, 0, 0), (0, 4, 3, 1, 1), (1, 1, 3, 0, 0)}


@pytest.fixture(scope="module", params=list(KERNELS))
def reports(request):
    target = request.param
    why = compile_check.tools_missing(target)
    if why:
        pytest.skip(why)
    spec = KERNELS[target]
    keys = ("A_FMT", "B_FMT", "MODE", "OUT_DTYPE", "ACCUM")
    chosen = [d for d in spec.variants if tuple(dict(d)[k] for k in keys) in CHOSEN]
    assert len(chosen) == len(CHOSEN)
    with ThreadPoolExecutor() as pool:
        rs = list(pool.map(lambda d: compile_check.build_one(spec, d, target), chosen))
    return target, rs


def test_variants_build_clean(reports):
    target, rs = reports
    for r in rs:
        assert r.ok, r.error
        assert r.spills == 0 and r.scratch == 0, (r.defines, r.spills, r.scratch)
        assert 0 < r.lds <= LDS_LIMIT[target], (r.defines, r.lds)
        assert r.registers["vgpr"] <= 512 and r.registers["sgpr"] <= 104
        a, b = r.defines["A_FMT"], r.defines["B_FMT"]
        if target == "gfx942":
            assert r.mma == [f"v_mfma_f32_16x16x32_{_942_NAMES[a]}_{_942_NAMES[b]}"], (r.defines, r.mma)
        else:
            assert r.mma == ["v_mfma_scale_f32_16x16x128_f8f6f4"], (r.defines, r.mma)


def test_variant_counts():
    pairs = len(grouped_gemm_kernels.GEMM_FORMAT_PAIRS)
    for spec in KERNELS.values():
        assert len(spec.variants) == pairs * 3 + pairs * 2 * 2  # lens x 3 out dtypes; wgrad x 2 out x accumulate
        assert len(set(spec.variants)) == len(spec.variants)
