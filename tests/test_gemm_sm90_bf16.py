"""The ``sm90_bf16`` GEMM path (the issue-10 engine's bf16 route): what it declines and when the automatic
selection picks it (CPU, fake devices), its compile-check variants; on an sm_90a device (marker ``gpu``): fp32
output with fp8 operands against the float64 reference (the bar the fp8 route misses), the device-side window check
and its exact fallback (scales outside the window, NaN / Inf codes in finite-scale blocks), the persistent walk with
K tails and every scale layout, bitwise reruns, and CUDA-graph capture.

The path as a whole is also covered by tests/test_gpu_gemm.py (parametrized over every registered path, forced with
``MXRT_GEMM_PATH``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import sm90_device_gemm

import mxrt
from mxrt.codes import GEMM_OUT_DTYPE_CODES
from mxrt.ops import gemm_paths, gemm_sm90_bf16, gemm_sm90_kernels

_dg = sm90_device_gemm


@pytest.fixture
def auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    # the engine's policy: without sm90_cublas (its own tests, tests/test_gemm_cublas.py, cover the policy with it)
    monkeypatch.setattr("mxrt.runtime.cublas.available", lambda: False)


def test_registered_between_ws_and_decode() -> None:
    paths = {p.name: p for p in gemm_paths.gemm_paths("sm_90a")}
    bf = paths["sm90_bf16"]
    assert (bf.target, bf.run) == ("sm_90a", gemm_sm90_bf16.run)
    assert paths["sm90_ws"].priority < bf.priority < paths["sm90_decode"].priority
    assert "sm90_bf16" not in [p.name for p in gemm_paths.gemm_paths("gfx950")]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"split_k": 2, "out_dtype": "float32"}, "split_k = 2"),
        ({"a_fmt": "e3m2", "out_dtype": "float32"}, "formats"),
        ({"out_dtype": "float64"}, "out dtype"),
        ({"k": 4104, "out_dtype": "float32"}, "k % 16"),
        ({"a_ptr": (1 << 20) + 8, "out_dtype": "float32"}, "a codes"),
        ({"m": 2**31, "out_dtype": "float32"}, "2^31"),
        ({"layouts": ("aiter32x8", None), "m": 2**20, "k": 32 * 2041, "out_dtype": "float32"}, "aiter32x8 scale"),
        ({}, "16-bit output"),
        ({"out_dtype": "float16"}, "16-bit output"),
        ({"out_dtype": "float32", "a_fmt": "e2m1", "b_fmt": "e2m1"}, "e2m1 x e2m1 run on sm90_ws"),
        ({"m": 64, "out_dtype": "float32"}, "m = 64 < 65"),
    ],
    ids=["split_k", "format", "out_f64", "k_tail_fp8", "a_misaligned", "huge_m", "layout_size", "bf16_out",
         "f16_out", "fp4_fp32", "auto_small_m"],
)  # fmt: skip
def test_declines(auto: None, kw: dict, why: str) -> None:
    got = gemm_sm90_bf16.supports(_dg(**kw))
    assert got is not None and why in got, got


@pytest.mark.parametrize(
    "kw",
    [
        {"out_dtype": "float32"},
        {"out_dtype": "float32", "a_fmt": "e5m2", "b_fmt": "e4m3"},
        {"out_dtype": "float32", "a_fmt": "e4m3", "b_fmt": "e2m1"},
        {"out_dtype": "float32", "m": 65, "n": 7, "k": 48},
        {"out_dtype": "float32", "layouts": ("cublas128x4", "deepgemm_ue8m0")},
    ],
    ids=["fp8", "e5m2_e4m3", "mixed_fp4", "small_tail", "layouts"],
)
def test_serves_fp32_out_with_an_fp8_operand(auto: None, kw: dict) -> None:
    dg = _dg(**kw)
    assert gemm_sm90_bf16.supports(dg) is None
    assert gemm_paths.select_gemm_path(dg).name == "sm90_bf16"


def test_forced_path_serves_16_bit_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_bf16")
    assert gemm_sm90_bf16.supports(_dg(m=1, n=3, k=64)) is None
    assert gemm_sm90_bf16.supports(_dg(out_dtype="float16")) is None


def test_compile_check_lists_the_path_builds() -> None:
    """Every build the path launches (format pairs after the e2m1 expansion x out dtypes, row-major) and every
    scale layout code on both operands are in the offline compile check, with the window check per format x
    layout."""
    built = [dict(d) for d in gemm_sm90_kernels.GEMM_MX_SM90_BF16.variants]
    fixed = dict(ATOMIC=0, BF_DIAG=0, BF_PROF=0, BM=256, BN=128, DBUF=0, DIAG=0, STAGES=3,
                 PRODUCER_REGS=gemm_sm90_kernels.BF16_PRODUCER_REGS, RING=gemm_sm90_kernels.BF16_RING)  # fmt: skip
    for fa, fb in mxrt.problems.GEMM_FORMAT_PAIRS:
        for out in ("bfloat16", "float16", "float32"):
            d = dict(fixed, A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[fa], B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[fb],
                     OUT_DTYPE=GEMM_OUT_DTYPE_CODES[out], SLA=0, SLB=0)  # fmt: skip
            assert d in built, (fa, fb, out)
    for code in range(6):
        assert any(d["SLA"] == code and d["SLB"] == code for d in built), code
    checks = {(d["WIN_FMT"], d["SL"]) for d in map(dict, gemm_sm90_kernels.MX_GEMM_WINDOW_CHECK.variants)}
    assert checks == {(f, sl) for f in (0, 1) for sl in range(6)}


def test_shared_memory_fits() -> None:
    assert gemm_sm90_bf16.smem_bytes(gemm_sm90_kernels.BF16_RING) <= 232448


# ---- on an sm_90a GPU ---------------------------------------------------------------------------------------


@pytest.fixture
def cupy_sm90(monkeypatch: pytest.MonkeyPatch):
    cupy = pytest.importorskip("cupy")
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        pytest.skip("sm90_bf16 runs on sm_90a only")
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_bf16")
    return cupy


def _launch(cupy, *args, **tune):
    """gemm_sm90_bf16.run on device copies (tests/support/gemm_cases.py run_path); host float64 result."""
    from support.gemm_cases import run_path

    return run_path(gemm_sm90_bf16, *args, **tune)


def _check(got, want, out_dtype):
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    with np.errstate(over="ignore"):
        ok = ~nan & np.isfinite(
            want.astype({"float32": np.float32, "float16": np.float16}.get(out_dtype, ml_dtypes.bfloat16))
        )
    if out_dtype == "float32":
        assert mxrt.reference.relative_error(want[ok], got[ok]) <= 1e-5
    else:
        assert mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "k", "fa", "fb", "out"),
    [(300, 520, 1056, "e4m3", "e4m3", "float32"), (129, 700, 272, "e5m2", "e4m3", "float32"),
     (520, 260, 2880, "e4m3", "e2m1", "float32"), (600, 300, 4096, "e4m3", "e5m2", "bfloat16"),
     (260, 390, 208, "e2m1", "e2m1", "float16")],
    ids=["kb33_f32", "e5m2_f32", "mixed_fp4_f32", "kb128_bf16", "fp4_tail_f16"],
)  # fmt: skip
def test_window_data_persistent_walk_and_reruns(cupy_sm90, m, n, k, fa, fb, out) -> None:
    """Scales over the whole fast window, more tiles than CTAs (3 CTAs), K tails: the reference within the bar,
    bitwise reruns, and the SM-count grid bitwise equal."""
    from support.gemm_cases import operands, window_scales

    cupy = cupy_sm90
    _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + k)
    sa, sb = window_scales(m, n, k, fa, fb, seed=m + n)
    want = mxrt.reference.gemm_mx((qa.data, sa, fa, k), (qb.data, sb, fb, k), out_dtype="float64")
    got = _launch(cupy, qa.data, sa, qb.data, sb, fa, fb, k, out, ctas=3)
    _check(got, want, out)
    np.testing.assert_array_equal(got, _launch(cupy, qa.data, sa, qb.data, sb, fa, fb, k, out, ctas=3))
    np.testing.assert_array_equal(got, _launch(cupy, qa.data, sa, qb.data, sb, fa, fb, k, out))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["scale_low", "scale_high", "nan_code_e4m3", "inf_code_e5m2", "extreme_pairs"])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_window_check_routes_to_the_exact_fallback(cupy_sm90, case, out) -> None:
    """Anything the bf16 conversion would get wrong sets the gate and the exact fallback computes the output:
    one scale byte below / above the window, a NaN e4m3 code or an Inf e5m2 code in a finite-scale block, scale
    pairs over the whole E8M0 range (true factors near 1). Against the float64 reference (NaN where it is NaN)."""
    from support.gemm_cases import gate_case

    cupy = cupy_sm90
    ac, sa, bc, sb, fa, fb, k = gate_case(case)
    want = mxrt.reference.gemm_mx((ac, sa, fa, k), (bc, sb, fb, k), out_dtype="float64")
    got = _launch(cupy, ac, sa, bc, sb, fa, fb, k, out)
    _check(got, want, out)
    if case.startswith(("nan", "inf")):
        assert not np.isfinite(got).all()


@pytest.mark.gpu
@pytest.mark.parametrize("layouts", [("aiter32x8", "turbo16x4"), ("cublas128x4", "deepgemm_ue8m0")])
def test_scale_layouts_bitwise_row_major(cupy_sm90, layouts) -> None:
    from support.gemm_cases import operands

    cupy = cupy_sm90
    m, n, k = 300, 260, 1024
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=3)
    row_major = _launch(cupy, qa.data, qa.scales, qb.data, qb.scales, "e4m3", "e4m3", k, "float32")
    got = _launch(cupy, qa.data, qa.scales, qb.data, qb.scales, "e4m3", "e4m3", k, "float32", layouts=layouts)
    np.testing.assert_array_equal(got, row_major)


@pytest.mark.gpu
def test_fp32_out_auto_selected_and_graph_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sm90_cublas, the automatic selection picks sm90_bf16 for fp32 out with fp8 operands; a CUDA graph
    captured on buffers the path has never seen (the window check's gate word comes from the pool during the capture)
    replays with new data written in place, each replay against the reference, one of them through the exact
    fallback."""
    cupy = pytest.importorskip("cupy")
    from support.gemm_cases import check_result, operands, to_device

    from mxrt.ops import gemm_sm90
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        pytest.skip("sm_90a only")
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    monkeypatch.setattr("mxrt.runtime.cublas.available", lambda: False)  # sm90_cublas takes fp32 out where present
    m, n, k = 200, 160, 640
    _, _, qa0, qb0 = operands(m, n, k, "e4m3", "e4m3", seed=40)
    a0, b0 = to_device(qa0), to_device(qb0)
    out0 = cupy.empty((m, n), cupy.float32)
    dg = gemm_paths.DeviceGemm(
        mxrt.problems.gemm_problem((a0.data, a0.scales, "e4m3", k), (b0.data, b0.scales, "e4m3", k),
                                   out_dtype="float32"),
        a0.data, b0.data, a0.scales, b0.scales, out0, get_arch(),
    )  # fmt: skip
    assert gemm_paths.select_gemm_path(dg).name == "sm90_bf16"
    mxrt.gemm_mx(a0, b0, out_dtype="float32")  # builds the kernels (compilation is not under test)
    cupy.cuda.Device().synchronize()
    _, _, qa1, qb1 = operands(m, n, k, "e4m3", "e4m3", seed=41)
    _, _, qa2, qb2 = operands(m, n, k, "e4m3", "e4m3", seed=42)
    qa2.scales[3, 4] = 140  # outside the window: this replay takes the exact fallback
    a, b = to_device(qa1), to_device(qb1)
    out = cupy.empty((m, n), cupy.float32)
    gemm_sm90._maps.clear()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            mxrt.gemm_mx(a, b, out=out, out_dtype="float32")
        finally:
            graph = stream.end_capture()
    for qa, qb in ((qa1, qb1), (qa2, qb2), (qa1, qb1)):
        for dst, src in ((a.data, qa.data), (a.scales, qa.scales), (b.data, qb.data), (b.scales, qb.scales)):
            dst.set(np.ascontiguousarray(src))
        out.fill(cupy.nan)
        cupy.cuda.Device().synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
        assert not check_result(out, qa, qb, "float32")
