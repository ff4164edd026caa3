"""The ``sm90_ws`` GEMM path (the issue-10 engine): what it declines and which sm_90a path the automatic selection
picks (CPU, fake devices), its compile-check variants; on an sm_90a device (marker ``gpu``) the engine's own cases:
the persistent walk with more tiles than CTAs, K tails, preshuffled scale layouts (bitwise the row-major result)
and bitwise reruns.

The path as a whole is also covered by tests/test_gpu_gemm.py (parametrized over every registered path, forced
with ``MXRT_GEMM_PATH``) and tests/test_gemm_sm90.py's reference and graph-capture tests (parametrized over both
sm90 paths).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import sm90_device_gemm

import mxrt
from mxrt.codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from mxrt.ops import gemm_paths, gemm_sm90, gemm_sm90_kernels, gemm_sm90_ws

_dg = sm90_device_gemm


@pytest.fixture
def auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    # the engine's policy: without sm90_cublas (its own tests, tests/test_gemm_cublas.py, cover the policy with it)
    monkeypatch.setattr("mxrt.runtime.cublas.available", lambda: False)


def test_registered_between_wgmma_and_decode() -> None:
    paths = {p.name: p for p in gemm_paths.gemm_paths("sm_90a")}
    ws = paths["sm90_ws"]
    assert (ws.target, ws.prepare) == ("sm_90a", gemm_sm90_ws.prepare_run)
    assert paths["sm90_wgmma"].priority < ws.priority < paths["sm90_decode"].priority
    assert "sm90_ws" not in [p.name for p in gemm_paths.gemm_paths("gfx950")]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"split_k": 2}, "split_k = 2"),
        ({"a_fmt": "e3m2"}, "formats"),
        ({"out_dtype": "float64"}, "out dtype"),
        ({"out_dtype": "float32"}, "float32 output with an fp8 operand"),
        ({"out_dtype": "float32", "a_fmt": "e2m1"}, "float32 output with an fp8 operand"),
        ({"k": 4104}, "k % 16"),
        ({"a_fmt": "e2m1", "k": 4104}, "k % 16"),
        ({"a_ptr": (1 << 20) + 8}, "a codes"),
        ({"b_ptr": (1 << 21) + 4}, "b codes"),
        ({"sa_ptr": (1 << 22) + 2}, "a scales"),
        ({"sb_ptr": (1 << 23) + 1}, "b scales"),
        ({"m": 2**31}, "2^31"),
        ({"n": 2**24, "k": 4096}, "2^31"),
        ({"layouts": ("aiter32x8", None), "m": 2**20, "k": 32 * 2041}, "aiter32x8 scale storage"),
        ({"a_fmt": "e2m1", "b_fmt": "e2m1", "m": 2**22, "k": 2**13 + 32}, "2^35"),
        ({"m": 64}, "m = 64 < 65"),
    ],
    ids=[
        "split_k", "format", "out_f64", "fp32_fp8", "fp32_mixed", "k_tail_fp8", "k_tail_mixed", "a_misaligned",
        "b_misaligned", "sa_misaligned", "sb_misaligned", "huge_m", "huge_scales", "layout_size", "fp4_expansion",
        "auto_small_m",
    ],
)  # fmt: skip
def test_declines(auto: None, kw: dict, why: str) -> None:
    got = gemm_sm90_ws.supports(_dg(**kw))
    assert got is not None and why in got, got


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"k": 16},
        {"k": 2880},
        {"a_fmt": "e5m2", "out_dtype": "float16"},
        {"a_fmt": "e2m1", "b_fmt": "e2m1", "k": 40},
        {"a_fmt": "e2m1", "b_fmt": "e2m1", "out_dtype": "float32"},
        {"a_fmt": "e2m1", "b_fmt": "e2m1", "a_ptr": 3},
        {"a_fmt": "e4m3", "b_fmt": "e2m1"},
        {"layouts": ("aiter32x8", "cublas128x4")},
        {"layouts": ("turbo16x4", "deepgemm_ue8m0")},
        {"m": 1152, "n": 2048},
        {"m": 1024, "n": 2048},
    ],
    ids=[
        "base", "k16", "k_blocks_90", "e5m2_f16", "fp4_k_tail", "fp4_fp32", "fp4_unaligned_codes", "fp8xfp4",
        "layouts", "layouts2", "one_wave", "below_one_wave",
    ],
)  # fmt: skip
def test_accepts(auto: None, kw: dict) -> None:
    assert gemm_sm90_ws.supports(_dg(**kw)) is None


@pytest.mark.parametrize("kw", [{"m": 1, "n": 3, "k": 64}, {"m": 64}, {"m": 300, "n": 200, "k": 272}])
def test_forced_path_skips_the_auto_rule(monkeypatch: pytest.MonkeyPatch, kw: dict) -> None:
    """``MXRT_GEMM_PATH=sm90_ws`` runs any problem the kernel computes exactly (the GPU test matrix uses small
    shapes); the other declines stay."""
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_ws")
    assert gemm_sm90_ws.supports(_dg(**kw)) is None
    assert "split_k" in gemm_sm90_ws.supports(_dg(split_k=2, **kw))
    assert "float32" in gemm_sm90_ws.supports(_dg(out_dtype="float32", **kw))


@pytest.mark.parametrize(
    ("kw", "path"),
    [
        ({"m": 8192, "n": 8192, "k": 8192}, "sm90_ws"),
        ({"m": 4096, "n": 4096, "k": 7168}, "sm90_ws"),
        ({"m": 4096, "n": 7168, "k": 2048}, "sm90_ws"),
        ({"m": 4096, "n": 5760, "k": 2880}, "sm90_ws"),
        ({"m": 4096, "a_fmt": "e2m1", "b_fmt": "e2m1"}, "sm90_ws"),
        ({"m": 4096, "a_fmt": "e2m1", "b_fmt": "e2m1", "out_dtype": "float32"}, "sm90_ws"),
        ({"m": 4096, "layouts": ("aiter32x8", "turbo16x4")}, "sm90_ws"),
        ({"m": 1, "n": 7168, "k": 4096}, "sm90_decode"),
        ({"m": 64, "n": 7168, "k": 4096}, "sm90_decode_wg"),
        ({"m": 64, "n": 32768, "k": 4096, "layouts": ("cublas128x4", None)}, "sm90_decode"),
        ({"m": 64, "n": 32768, "k": 4160, "layouts": ("cublas128x4", None)}, "sm90_wgmma"),
        ({"m": 256, "n": 256, "k": 512}, "sm90_ws"),
        ({"m": 1024, "n": 2048, "k": 7168}, "sm90_ws"),
        ({"m": 4096, "split_k": 2}, "sm90_wgmma"),
        ({"m": 4096, "k": 4104}, "generic"),
        ({"m": 4096, "out_dtype": "float32"}, "sm90_bf16"),
        ({"m": 4096, "split_k": 2, "out_dtype": "float32"}, "generic"),
    ],
    ids=[
        "8192^3", "moe_4096x7168", "moe_7168x2048", "moe_5760x2880", "fp4", "fp4_fp32", "layouts", "decode_m1",
        "decode_m64", "m64_layouts", "m64_layouts_k_tail", "small_grid", "below_one_wave", "split_k", "k_tail",
        "fp32_fp8", "fp32_fp8_sk2",
    ],
)  # fmt: skip
def test_auto_policy(auto: None, kw: dict, path: str) -> None:
    """Which sm_90a path ``gemm_mx`` runs (an H100 with 132 SMs): the engine for grids of a wave or more, the
    decode kernels inside their envelope (the wgmma one for m > 8 fp8 with row-major scales; the mma.sync one with
    preshuffled scales), sm90_wgmma for small grids, 64-row problems the decode kernels decline (k % 128 != 0), and
    split-K; fp32 out with fp8 operands on the bf16 route (generic with split-K)."""
    assert gemm_paths.select_gemm_path(_dg(**kw)).name == path


def test_auto_decline_is_one_tunable_rule() -> None:
    assert gemm_sm90_ws.auto_decline(8192, 8192, 8192, 132) is None
    assert gemm_sm90_ws.auto_decline(129, 132 * 64, 4096, 132) is None  # 2 x 66 tiles
    assert gemm_sm90_ws.auto_decline(128, 132 * 128, 4096, 132) is None
    assert gemm_sm90_ws.auto_decline(512, 1024, 2048, 132) is None  # 32 tiles: measured 2.1x sm90_wgmma
    assert gemm_sm90_ws.auto_decline(64, 10**6, 4096, 132) is not None
    assert gemm_sm90_ws.auto_decline(1152, 2048, 4096, 114) is None  # H100 PCIe: 114 SMs


def _launch_defines(a_fmt: str, b_fmt: str, out: str, sl: tuple[int, int]) -> dict:
    """The define set :func:`gemm_sm90_ws._launch_plan` builds for the path's default tuning."""
    return dict(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[a_fmt], ATOMIC=0, B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[b_fmt],
        BM=128, BN=128, DBUF=0, DIAG=0, OUT_DTYPE=GEMM_OUT_DTYPE_CODES[out], SLA=sl[0], SLB=sl[1], SPLIT=0,
        STAGES=gemm_sm90_kernels.WS_STAGES, WS_MODE=0,
    )  # fmt: skip


def test_compile_check_lists_the_path_builds() -> None:
    """Every row-major build the path launches (format pairs after the e2m1 expansion x the out dtypes it serves)
    and every scale layout code on each operand are in the offline compile check."""
    built = [dict(d) for d in gemm_sm90_kernels.GEMM_MX_SM90_WS.variants]
    for (fa, fb), out in [(pair, o) for pair in mxrt.problems.GEMM_FORMAT_PAIRS for o in ("bfloat16", "float16")]:
        assert _launch_defines(fa, fb, out, (0, 0)) in built, (fa, fb, out)
    assert _launch_defines("e2m1", "e2m1", "float32", (0, 0)) in built
    for code in range(6):
        assert any(d["SLA"] == code and d["SPLIT"] == 0 and d["DIAG"] == 0 for d in built), code
        assert any(d["SLB"] == code and d["SPLIT"] == 0 and d["DIAG"] == 0 for d in built), code
    assert {(d["SLA"], d["SLB"]) for d in built} >= set(gemm_sm90_kernels.WS_LAYOUT_PAIRS)
    assert FMT_CODES["e4m3"] == gemm_sm90_kernels.SM90_FMT_CODES["e2m1"]


@pytest.mark.parametrize(("stages", "words"), [(4, 2), (4, 4), (5, 2), (5, 4), (6, 2)])
def test_shared_memory_fits(stages: int, words: int) -> None:
    assert gemm_sm90.smem_bytes(128, 128, stages) + gemm_sm90_ws.staging_bytes(stages, words) <= 232448


def test_scattered_layouts_need_five_stages_or_fewer() -> None:
    with pytest.raises(mxrt.UnsupportedArchError, match="stages <= 5"):
        gemm_sm90_ws.staging_bytes(6, 4)


# ---- on an sm_90a GPU ---------------------------------------------------------------------------------------


@pytest.fixture
def cupy_sm90(monkeypatch: pytest.MonkeyPatch):
    cupy = pytest.importorskip("cupy")
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        pytest.skip("sm90_ws runs on sm_90a only")
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_ws")
    return cupy


def _device_scales(cupy, s: np.ndarray, layout: str | None):
    d = cupy.asarray(s)
    if layout is None:
        return d
    if layout == "turbo16x4:u32":
        return mxrt.preshuffle_scales(d, "turbo16x4", dtype=np.uint32)
    return mxrt.preshuffle_scales(d, layout)


def _launch(cupy, codes_a, sa, la, codes_b, sb, lb, fa, fb, k, out_dtype, **tune):
    """gemm_sm90_ws.run on device copies (``tune``: e.g. ``ctas``), output poisoned first; host float64 result."""
    from mxrt.problems import gemm_problem

    name = {"turbo16x4:u32": "turbo16x4"}
    a = (cupy.asarray(codes_a), _device_scales(cupy, sa, la), fa, k)
    b = (cupy.asarray(codes_b), _device_scales(cupy, sb, lb), fb, k)
    p = gemm_problem(a, b, out_dtype=out_dtype, a_scale_layout=name.get(la, la), b_scale_layout=name.get(lb, lb))
    m, n = p.m, p.n
    out = cupy.empty((m, n), {"bfloat16": cupy.uint16, "float16": cupy.float16, "float32": cupy.float32}[out_dtype])
    out.view(cupy.uint8).fill(0xFF)
    dg = gemm_paths.DeviceGemm(p, a[0], b[0], a[1], b[1], out, mxrt.runtime.get_arch())
    assert gemm_sm90_ws.supports(dg) is None
    gemm_sm90_ws.run(dg, **tune)
    cupy.cuda.runtime.deviceSynchronize()
    h = cupy.asnumpy(out)
    return h.view(ml_dtypes.bfloat16).astype(np.float64) if out_dtype == "bfloat16" else h.astype(np.float64)


#: the compile check's layout pairs (gemm_sm90_kernels.WS_LAYOUT_PAIRS, prebuilt on the device): codes 2 / 5 are
#: turbo16x4 bytes / uint32 words
_CODE_NAMES = {0: None, 1: "aiter32x8", 2: "turbo16x4", 3: "cublas128x4", 4: "deepgemm_ue8m0", 5: "turbo16x4:u32"}
_LAYOUT_PAIRS = [(None, None)] + [(_CODE_NAMES[a], _CODE_NAMES[b]) for a, b in gemm_sm90_kernels.WS_LAYOUT_PAIRS]


@pytest.mark.gpu
@pytest.mark.parametrize("layouts", _LAYOUT_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize(
    ("m", "n", "k", "fa", "fb"),
    [(300, 520, 1056, "e4m3", "e4m3"), (129, 700, 272, "e4m3", "e4m3"), (260, 390, 2880, "e2m1", "e2m1"),
     (200, 300, 4096, "e4m3", "e2m1")],
    ids=["kb33", "kb9", "kb90_fp4", "kb128_mixed"],
)  # fmt: skip
def test_persistent_walk_layouts_and_k_tails(cupy_sm90, layouts, m, n, k, fa, fb) -> None:
    """More tiles than CTAs (3 CTAs walk 6-24 tiles: the ring's parity wraps across tiles), K block counts off the
    4-block stage (the funnel-shifted word path), extreme scale pairs (wide stages): the reference within the bar,
    and every scale layout bitwise equal to the row-major result (the same kernel reads the same factors)."""
    from support.gemm_cases import operands

    cupy = cupy_sm90
    la, lb = layouts
    rng = np.random.default_rng(m + n + k)
    _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + k)
    kb = -(-k // 32)
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    want = mxrt.reference.gemm_mx((qa.data, sa, fa, k), (qb.data, sb, fb, k), out_dtype="float64")
    assert np.isfinite(want.astype(ml_dtypes.bfloat16)).all()
    got = _launch(cupy, qa.data, sa, la, qb.data, sb, lb, fa, fb, k, "bfloat16", ctas=3)
    assert np.isfinite(got).all(), f"{int((~np.isfinite(got)).sum())} non-finite outputs"
    assert mxrt.reference.calc_diff(got, want) <= 1e-5
    if layouts != (None, None):
        row_major = _launch(cupy, qa.data, sa, None, qb.data, sb, None, fa, fb, k, "bfloat16", ctas=3)
        np.testing.assert_array_equal(got, row_major)
    whole = _launch(cupy, qa.data, sa, la, qb.data, sb, lb, fa, fb, k, "bfloat16")  # the SM-count grid
    np.testing.assert_array_equal(got, whole)


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_fp4_every_out_dtype_and_bitwise_reruns(cupy_sm90, out_dtype) -> None:
    """e2m1 x e2m1 (expanded, K padded to 16) in every out dtype, fp32 included (exact k32 partials), on a grid of
    more tiles than SMs; ten reruns bitwise identical."""
    from support.gemm_cases import check_result, operands, to_device

    cupy = cupy_sm90
    m, n, k = 1300, 1700, 400
    x, w, qa, qb = operands(m, n, k, "e2m1", "e2m1", seed=5)
    a, b = to_device(qa), to_device(qb)
    first = mxrt.gemm_mx(a, b, out_dtype=out_dtype)
    assert not check_result(first, qa, qb, out_dtype, x=x, w=w)
    for _ in range(10):
        again = mxrt.gemm_mx(a, b, out_dtype=out_dtype)
        assert bool((again.view(cupy.uint8) == first.view(cupy.uint8)).all())
