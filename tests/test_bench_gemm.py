"""CPU checks of benchmarks/bench_gemm.py's pure-Python parts, so the GPU benchmark cannot rot silently."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats.codecs import decode_table, e8m0_decode

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gemm.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gemm", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)  # imports numpy only: cupy / torch / triton load inside the device functions
    yield mod
    sys.modules.pop(spec.name, None)


def test_parse_args(bench):
    a = bench.parse_args([])
    assert (a.quick, a.only, a.json, a.formats, a.budget_s) == (False, None, None, ["mxfp8", "mxfp4"], 0.0)
    assert bench.shapes_for(a) == bench.MAIN_SHAPES + bench.SMALL_M_SHAPES
    a = bench.parse_args(["--quick", "--only", "peers", "--json", "x.json", "--formats", "mxfp4", "--reps", "3"])
    assert (a.quick, a.only, a.json, a.formats, a.reps) == (True, "peers", "x.json", ["mxfp4"], 3)
    assert bench.shapes_for(a) == bench.QUICK_SHAPES
    a = bench.parse_args(["--shapes", "16x7168x4096, 8192X8192X8192"])
    assert bench.shapes_for(a) == [(16, 7168, 4096), (8192, 8192, 8192)]
    bad_args = (["--formats", "mxfp6"], ["--only", "numpy"], ["--reps", "0"], ["--formats", ","])
    for bad in (*bad_args, ["--shapes", "16x7168"], ["--shapes", "16x7168x4100"], ["--shapes", "0x1x32"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_shapes_and_sets(bench):
    assert (8192, 8192, 8192) in bench.MAIN_SHAPES
    moe = [(4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
    assert [s for s in bench.MAIN_SHAPES if s[0] == 4096] == moe
    assert all(m <= bench.SMALL_M_LIMIT for m, _, _ in bench.SMALL_M_SHAPES)
    l2 = 50 << 20
    assert bench.n_input_sets(8192 * 8192 * 2, l2) == 1
    assert bench.n_input_sets(30 << 20, l2) == 4  # capped
    assert bench.n_input_sets(60 << 20, l2) == 3
    assert bench.tflops(8192, 8192, 8192, 1e-3) == pytest.approx(1099.511627776)


def test_fit_block_k(bench):
    fitted = bench.fit_block_k(bench.TRITON_CONFIGS, 2880)
    assert fitted and all(2880 % c.block_k == 0 and c.block_k >= 32 for c in fitted)
    assert len(set(fitted)) == len(fitted) < len(bench.TRITON_CONFIGS)  # 128-wide K collapse onto 64
    assert bench.fit_block_k(bench.TRITON_CONFIGS, 8192) == bench.TRITON_CONFIGS
    assert [c.block_k for c in bench.fit_block_k([bench.TritonConfig(64, 64, 256, 4, 3)], 96)] == [32]


def _row(bench, peer, tf, fmt="mxfp8", shape="64x7168x4096"):
    return {"shape": shape, "fmt": fmt, "peer": peer, "tflops": tf, "seconds": None if tf is None else 1e-3}


def test_ratios_table_and_splitk(bench):
    rows = [
        _row(bench, bench.PEER_DEQUANT, 200.0),
        _row(bench, bench.PEER_TRITON, 50.0),
        _row(bench, "mxrt sm90_wgmma sk1", 300.0),
        _row(bench, "mxrt sm90_wgmma sk4a", 450.0),
        _row(bench, "mxrt generic sk1", 20.0),
        _row(bench, bench.PEER_BF16, 100.0, fmt="bf16"),
        _row(bench, bench.PEER_DEQUANT, 80.0, fmt="mxfp4"),
        {**_row(bench, "mxrt", None, fmt="mxfp4"), "note": "no GPU backend"},
    ]
    bench.add_ratios(rows)
    assert rows[2]["vs_dequant"] == pytest.approx(1.5) and rows[2]["vs_triton"] == pytest.approx(6.0)
    assert rows[5]["vs_dequant"] is None  # the bf16 row has its own format group
    assert rows[6]["vs_dequant"] == pytest.approx(1.0) and rows[6]["vs_triton"] is None
    table = bench.format_table(rows)
    lines = table.splitlines()
    assert len(lines) == 2 + len(rows) and lines[0].startswith("| shape MxNxK | format | peer | TFLOP/s")
    assert "| 64x7168x4096 | mxfp8 | mxrt sm90_wgmma sk1 | 300.0 | 1.0000 | 1.50 | 6.00 |" in table
    assert "skipped: no GPU backend" in lines[-1]
    summary = bench.splitk_summary(rows)
    assert summary == ["64x7168x4096 mxfp8 sm90_wgmma: sk1 300.0 TFLOP/s, best sk4a 450.0 (1.50x)"]


def test_luts_match_mxrt(bench):
    s = bench.scale_lut()
    ref = e8m0_decode(np.arange(256, dtype=np.uint8)).astype(np.float32)
    assert s.dtype == np.float32 and np.isnan(s[255]) and np.isnan(ref[255])
    np.testing.assert_array_equal(s[:255], ref[:255])
    assert s[0] == np.float32(2.0**-127) and s[254] == np.float32(2.0**127)
    for fmt in ("e4m3", "e2m1"):
        np.testing.assert_array_equal(bench.code_lut(fmt), np.asarray(decode_table(fmt), np.float32))


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
@pytest.mark.parametrize("k", [96, 80])
def test_torch_dequant_matches_mxrt(bench, fmt, k):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5 + k)
    x = (rng.standard_normal((6, k)) * np.exp2(rng.integers(-8, 8, (6, 1)))).astype(np.float32)
    q = mxrt.quantize_mx(x, fmt, backend="numpy")
    want = mxrt.dequantize_mx(q, ml_dtypes.bfloat16).view(np.uint16)
    got = bench.torch_dequant(
        torch.from_numpy(q.data),
        torch.from_numpy(q.scales),
        k,
        fmt,
        torch.from_numpy(bench.code_lut(fmt)),
        torch.from_numpy(bench.scale_lut()),
    )
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (6, k)
    np.testing.assert_array_equal(got.view(torch.int16).numpy().view(np.uint16), want)


def test_triton_candidates(bench):
    full, is_full = bench.triton_candidates(None, 4096, quick=False)
    assert is_full and full == bench.TRITON_CONFIGS
    small, is_full = bench.triton_candidates([], 16, quick=False)
    assert is_full and small[: len(bench.TRITON_CONFIGS)] == bench.TRITON_CONFIGS
    assert set(bench.TRITON_SMALL_M) <= set(small) and len(set(small)) == len(small)
    kept = bench.TRITON_CONFIGS[2:4]
    assert bench.triton_candidates(kept, 64, quick=False) == (kept, False)
    assert bench.triton_candidates(kept, 64, quick=True) == (bench.TRITON_CONFIGS[:3], False)
