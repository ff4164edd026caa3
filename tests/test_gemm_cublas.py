"""The ``sm90_cublas`` GEMM path (exact dequantisation to bf16 + one cuBLAS bf16 GEMM, gated exact fallback): what it
declines and the automatic policy with it present (CPU, fake devices, cuBLAS stubbed present); its
compile-check builds; on an sm_90a device (marker ``gpu``): every format pair, fp32 / bf16 out and K tails no other
Hopper path serves against the float64 reference with bitwise reruns, the gate and its exact fallback (scales
outside the window, NaN / Inf codes in finite blocks, extreme scale pairs), scale layouts bitwise equal to row-major,
and a CUDA graph replayed through both branches.

The path as a whole is also covered by tests/test_gpu_gemm.py (parametrized over every registered path, forced with
``MXRT_GEMM_PATH``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import GATE_CASES, gate_case, sm90_device_gemm

import mxrt
from mxrt.codes import FMT_CODES, GEMM_OUT_DTYPE_CODES, SCALE_LAYOUT_CODES
from mxrt.ops import gemm_cublas, gemm_paths, quant_kernels
from mxrt.runtime import cublas

_dg = sm90_device_gemm


@pytest.fixture
def present(monkeypatch: pytest.MonkeyPatch) -> None:
    """Automatic selection on an H100 where mxrt finds libcublas."""
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    monkeypatch.setattr(cublas, "available", lambda: True)


def test_registered_between_bf16_route_and_decode() -> None:
    paths = {p.name: p for p in gemm_paths.gemm_paths("sm_90a")}
    cb = paths["sm90_cublas"]
    assert (cb.target, cb.run) == ("sm_90a", gemm_cublas.run)
    assert paths["sm90_bf16"].priority < cb.priority < paths["sm90_decode"].priority
    assert "sm90_cublas" not in [p.name for p in gemm_paths.gemm_paths("gfx950")]


def test_declines_without_the_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cublas, "available", lambda: False)
    assert "cuBLAS is not available" in gemm_cublas.supports(_dg())


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"split_k": 2}, "split_k = 2"),
        ({"a_fmt": "e3m2"}, "formats"),
        ({"out_dtype": "float64"}, "out dtype float64"),
        ({"m": 2**31}, "2^31"),
        ({"layouts": ("aiter32x8", None), "m": 2**20, "k": 32 * 2041}, "aiter32x8"),
        ({"m": gemm_cublas.AUTO_MIN_M - 1}, f"< {gemm_cublas.AUTO_MIN_M}: left to the decode"),
    ],
    ids=["split_k", "format", "f64_out", "huge_m", "layout_size", "auto_small_m"],
)
def test_declines(present: None, kw: dict, why: str) -> None:
    got = gemm_cublas.supports(_dg(**kw))
    assert got is not None and why in got, got


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"out_dtype": "float32"},
        {"out_dtype": "float16"},
        {"out_dtype": "float32", "m": 65},
        {"k": 4104},
        {"k": 4097, "a_ptr": (1 << 20) + 3},
        {"m": 100},
        {"m": 64, "k": 4104},
        {"m": 64, "a_ptr": (1 << 20) + 8},
        {"a_fmt": "e2m1", "b_fmt": "e2m1"},
        {"a_fmt": "e4m3", "b_fmt": "e2m1", "out_dtype": "float32"},
        {"layouts": ("cublas128x4", "deepgemm_ue8m0")},
    ],
    ids=[
        "bf16",
        "f32",
        "f16",
        "f32_m65",
        "k_tail16",
        "k_odd_unaligned",
        "m100",
        "m64_k_tail",
        "m64_unaligned",
        "fp4",
        "mixed_fp4_f32",
        "layouts",
    ],
)
def test_serves_and_is_selected(present: None, kw: dict) -> None:
    dg = _dg(**kw)
    assert gemm_cublas.supports(dg) is None
    assert gemm_paths.select_gemm_path(dg).name == "sm90_cublas"


@pytest.mark.parametrize(
    ("kw", "path"),
    [
        ({"m": 64, "k": 4104 + 8}, "sm90_wgmma"),
        ({"m": 64, "k": 4104 + 8, "out_dtype": "float16"}, "sm90_wgmma"),
        ({"split_k": 2}, "sm90_wgmma"),
        ({"m": 64, "k": 4096}, "sm90_decode_wg"),
        ({"m": 64, "k": 4096, "out_dtype": "float32"}, "sm90_cublas"),
    ],
    ids=["below_min_m", "below_min_m_f16", "split_k", "decode", "decode_m64_f32"],
)
def test_policy_around_it(present: None, kw: dict, path: str) -> None:
    assert gemm_paths.select_gemm_path(_dg(**kw)).name == path


def test_forced_path_serves_small_m(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cublas, "available", lambda: True)
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_cublas")
    assert gemm_cublas.supports(_dg(m=1, n=3, k=7)) is None


def test_compile_check_lists_the_gated_dequant_builds() -> None:
    built = [dict(d) for d in quant_kernels.DEQUANTIZE_MX.variants]
    for fmt in ("e4m3", "e5m2", "e2m1"):
        for sl in (*SCALE_LAYOUT_CODES.values(), 5):
            d = dict(CH=16, EFMT=FMT_CODES[fmt], GATE=1, OUT_DTYPE=GEMM_OUT_DTYPE_CODES["bfloat16"], SL=sl,
                     THREADS=256)  # fmt: skip
            assert d in built, (fmt, sl)
    for fmt in FMT_CODES.values():
        for out in GEMM_OUT_DTYPE_CODES.values():
            assert dict(CH=16, EFMT=fmt, GATE=0, OUT_DTYPE=out, SL=0, THREADS=256) in built


def test_padded_k_gives_16_byte_rows() -> None:
    assert [gemm_cublas.padded_k(k) for k in (1, 8, 9, 4096, 4097)] == [8, 8, 16, 4096, 4104]


# ---- on an sm_90a GPU ---------------------------------------------------------------------------------------


@pytest.fixture
def cupy_sm90(monkeypatch: pytest.MonkeyPatch):
    cupy = pytest.importorskip("cupy")
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        pytest.skip("sm90_cublas runs on sm_90a only")
    if not cublas.available():
        pytest.skip("no libcublas")
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_cublas")
    return cupy


def _launch(cupy, *args, **kw):
    """gemm_cublas.run on device copies (tests/support/gemm_cases.py run_path); host float64 result."""
    from support.gemm_cases import run_path

    return run_path(gemm_cublas, *args, **kw)


def _check(got, want, out_dtype):
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    with np.errstate(over="ignore"):
        dt = {"float32": np.float32, "float16": np.float16}.get(out_dtype, ml_dtypes.bfloat16)
        ok = ~nan & np.isfinite(want.astype(dt))
    with np.errstate(over="ignore"):  # +-Inf where the out dtype overflows
        np.testing.assert_array_equal(got[~nan & ~ok], want[~nan & ~ok].astype(dt).astype(np.float64))
    if out_dtype == "float32":
        assert mxrt.reference.relative_error(want[ok], got[ok]) <= 1e-5
    else:
        assert mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "k", "fa", "fb", "out"),
    [(300, 520, 1056, "e4m3", "e4m3", "float32"), (129, 700, 272, "e5m2", "e4m3", "bfloat16"),
     (520, 260, 2880, "e4m3", "e2m1", "float32"), (260, 390, 999, "e2m1", "e2m1", "bfloat16"),
     (77, 65, 4097, "e4m3", "e5m2", "float32"), (1, 1, 1, "e2m1", "e4m3", "bfloat16"),
     (200, 300, 1000, "e4m3", "e4m3", "float16")],
    ids=["kb33_f32", "e5m2_bf16", "mixed_fp4_f32", "fp4_odd_k", "k4097_f32", "one", "f16"],
)  # fmt: skip
def test_window_data_and_reruns(cupy_sm90, m, n, k, fa, fb, out) -> None:
    """Scales over the whole window, K tails (odd k: rows at any byte offset): the reference within the bar and
    bitwise reruns."""
    from support.gemm_cases import operands, window_scales

    cupy = cupy_sm90
    _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + k)
    sa, sb = window_scales(m, n, k, fa, fb, seed=m + n)
    want = mxrt.reference.gemm_mx((qa.data, sa, fa, k), (qb.data, sb, fb, k), out_dtype="float64")
    got = _launch(cupy, qa.data, sa, qb.data, sb, fa, fb, k, out)
    _check(got, want, out)
    np.testing.assert_array_equal(got, _launch(cupy, qa.data, sa, qb.data, sb, fa, fb, k, out))


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(GATE_CASES))
@pytest.mark.parametrize("out", ["float32", "bfloat16", "float16"])
def test_gate_routes_to_the_exact_fallback(cupy_sm90, case, out) -> None:
    """Anything a bf16 GEMM would get wrong raises the gate and the gated generic kernel recomputes the output: one
    scale byte below / above the window, a NaN e4m3 / Inf e5m2 code in a finite block, scale pairs over the whole
    E8M0 range (true factors near 1), an e2m1 block above the window. A NaN-scale block (255) stays on cuBLAS (NaN
    in, NaN out). Against the float64 reference (NaN where it is NaN)."""
    cupy = cupy_sm90
    ac, sa, bc, sb, fa, fb, k = gate_case(case)
    want = mxrt.reference.gemm_mx((ac, sa, fa, k), (bc, sb, fb, k), out_dtype="float64")
    got = _launch(cupy, ac, sa, bc, sb, fa, fb, k, out)
    _check(got, want, out)
    if case.startswith(("nan", "inf")):
        assert not np.isfinite(got).all()


@pytest.mark.gpu
@pytest.mark.parametrize("layouts", [("aiter32x8", "turbo16x4"), ("cublas128x4", "deepgemm_ue8m0")])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1")], ids="x".join)
def test_scale_layouts_bitwise_row_major(cupy_sm90, layouts, pair) -> None:
    from support.gemm_cases import operands

    cupy = cupy_sm90
    m, n, k = 300, 260, 1024
    _, _, qa, qb = operands(m, n, k, *pair, seed=3)
    row_major = _launch(cupy, qa.data, qa.scales, qb.data, qb.scales, *pair, k, "float32")
    got = _launch(cupy, qa.data, qa.scales, qb.data, qb.scales, *pair, k, "float32", layouts=layouts)
    np.testing.assert_array_equal(got, row_major)


@pytest.mark.gpu
def test_auto_selected_and_graph_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The automatic selection picks sm90_cublas from AUTO_MIN_M rows; a CUDA graph captured on buffers the path has
    never seen (workspaces and the gate word come from the pool during the capture) replays with new data written
    in place, each replay against the reference, one of them through the exact fallback."""
    cupy = pytest.importorskip("cupy")
    from support.gemm_cases import check_result, operands, to_device

    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a" or not cublas.available():
        pytest.skip("sm_90a with libcublas only")
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    m, n, k = gemm_cublas.AUTO_MIN_M, 160, 640
    _, _, qa0, qb0 = operands(m, n, k, "e4m3", "e4m3", seed=40)
    a0, b0 = to_device(qa0), to_device(qb0)
    dg = gemm_paths.DeviceGemm(
        mxrt.problems.gemm_problem((a0.data, a0.scales, "e4m3", k), (b0.data, b0.scales, "e4m3", k)),
        a0.data, b0.data, a0.scales, b0.scales, cupy.empty((m, n), cupy.uint16), get_arch(),
    )  # fmt: skip
    assert gemm_paths.select_gemm_path(dg).name == "sm90_cublas"
    mxrt.gemm_mx(a0, b0)  # builds the kernels, creates the cuBLAS handle and its workspace
    cupy.cuda.Device().synchronize()
    _, _, qa1, qb1 = operands(m, n, k, "e4m3", "e4m3", seed=41)
    _, _, qa2, qb2 = operands(m, n, k, "e4m3", "e4m3", seed=42)
    qa2.scales[3, 4] = 140  # outside the window: this replay takes the exact fallback
    a, b = to_device(qa1), to_device(qb1)
    out = cupy.empty((m, n), cupy.uint16)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            mxrt.gemm_mx(a, b, out=out)
        finally:
            graph = stream.end_capture()
    for qa, qb in ((qa1, qb1), (qa2, qb2), (qa1, qb1)):
        for dst, src in ((a.data, qa.data), (a.scales, qa.scales), (b.data, qb.data), (b.scales, qb.scales)):
            dst.set(np.ascontiguousarray(src))
        out.fill(0xFFFF)
        cupy.cuda.Device().synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
        assert not check_result(out, qa, qb, "bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("gated", [False, True], ids=["window", "gated"])
def test_prepared_plan_is_bitwise_the_unplanned_route(monkeypatch: pytest.MonkeyPatch, out_dtype, gated) -> None:
    """The small-call plan (three prepared launches + cuBLAS) gives the bits of the first, unplanned call on fresh
    buffers of the same key, through the fallback too (a scale outside the window), with poisoned workspaces."""
    cupy = pytest.importorskip("cupy")
    from support.gemm_cases import check_result, operands, to_device

    from mxrt.api import gemm as api_gemm
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a" or not cublas.available():
        pytest.skip("sm_90a with CuPy's cuBLAS only")
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    api_gemm.clear_plans()
    m, n, k = 200, 300, 1000
    for seed in (1, 2):
        _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=seed)
        if gated:
            qa.scales[7, 3] = 140
        da, db = to_device(qa), to_device(qb)
        first = mxrt.gemm_mx(da, db, out_dtype=out_dtype)
        with mxrt.runtime.debug(poison=0xFF):
            planned = [mxrt.gemm_mx(da, db, out_dtype=out_dtype) for _ in range(2)]
        plan = api_gemm._PLANS[api_gemm._plan_key(da, db, out_dtype, 1, True, None, "auto", None, None)]
        assert plan.runner is not None
        assert not check_result(first, qa, qb, out_dtype)
        for d in planned:
            assert bool((d == first).all())
        cupy.cuda.Device().synchronize()
