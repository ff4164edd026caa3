"""CPU checks of the gemm suite's pure-Python parts (mxrt/bench/gemm.py, gemm_peers.py), so the GPU benchmark
cannot rot silently: arguments, shapes, ratios, the table, the plot series, the peers' lookup tables."""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt import cli
from mxrt.bench import core, gemm, gemm_peers
from mxrt.errors import ShapeError
from mxrt.formats.codecs import decode_table, e8m0_decode


def parse(*argv: str) -> argparse.Namespace:
    a = cli.build_parser().parse_args(["bench", "gemm", *argv])
    gemm.finish_args(a)
    return a


def test_parse_args():
    a = parse()
    assert (a.quick, a.only, a.json, a.plot, a.formats, a.budget_s) == (False, None, None, None, ["mxfp8", "mxfp4"], 0)
    assert gemm.shapes_for(a) == gemm.MAIN_SHAPES + gemm.SMALL_M_SHAPES
    assert gemm.shapes_for(a, gpu=False) == gemm.CPU_SHAPES
    a = parse("--quick", "--only", "peers", "--json", "x.json", "--formats", "mxfp4", "--reps", "3", "--plot", "p.png")
    assert (a.quick, a.only, a.json, a.formats, a.reps, a.plot) == (True, "peers", "x.json", ["mxfp4"], 3, "p.png")
    assert gemm.shapes_for(a) == gemm.QUICK_SHAPES
    a = parse("--shapes", "16x7168x4096, 8192X8192X8192", "--no-overhead")
    assert gemm.shapes_for(a) == gemm.shapes_for(a, gpu=False) == [(16, 7168, 4096), (8192, 8192, 8192)]
    assert a.no_overhead
    with pytest.raises(SystemExit):
        parse("--only", "numpy")
    for bad in (["--formats", "mxfp6"], ["--reps", "0"], ["--formats", ","]):
        with pytest.raises(ValueError):
            parse(*bad)
    for bad in ("16x7168", "16x7168x4100", "0x1x32", ",", "axbxc"):
        with pytest.raises(ShapeError):
            parse("--shapes", bad)


def test_shapes_and_sets():
    assert (8192, 8192, 8192) in gemm.MAIN_SHAPES
    moe = [(4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
    assert [s for s in gemm.MAIN_SHAPES if s[0] == 4096] == moe
    assert all(m <= gemm_peers.SMALL_M_LIMIT for m, _, _ in gemm.SMALL_M_SHAPES)
    l2 = 50 << 20
    assert core.n_input_sets(8192 * 8192 * 2, l2) == 1
    assert core.n_input_sets(30 << 20, l2) == 4  # capped
    assert core.n_input_sets(60 << 20, l2) == 3
    assert core.tflops(8192, 8192, 8192, 1e-3) == pytest.approx(1099.511627776)
    assert core.calls_per_graph(1e-3, 4) == 20 and core.calls_per_graph(1e-9, 3) == 201


def test_fit_block_k():
    fitted = gemm_peers.fit_block_k(gemm_peers.TRITON_CONFIGS, 2880)
    assert fitted and all(2880 % c.block_k == 0 and c.block_k >= 32 for c in fitted)
    assert len(set(fitted)) == len(fitted) < len(gemm_peers.TRITON_CONFIGS)  # 128-wide K collapse onto 64
    assert gemm_peers.fit_block_k(gemm_peers.TRITON_CONFIGS, 8192) == gemm_peers.TRITON_CONFIGS
    assert [c.block_k for c in gemm_peers.fit_block_k([gemm_peers.TritonConfig(64, 64, 256, 4, 3)], 96)] == [32]


def _row(peer, tf, fmt="mxfp8", shape="64x7168x4096"):
    return {"shape": shape, "fmt": fmt, "peer": peer, "tflops": tf, "seconds": None if tf is None else 1e-3}


def gpu_like_rows() -> list[dict]:
    return [
        _row(gemm.PEER_DEQUANT, 200.0),
        _row(gemm.PEER_TRITON, 50.0),
        _row("mxrt sm90_wgmma sk1", 300.0),
        _row("mxrt sm90_wgmma sk4a", 450.0),
        _row("mxrt generic sk1", 20.0),
        _row(gemm.PEER_BF16, 100.0, fmt="bf16"),
        _row(gemm.PEER_DEQUANT, 80.0, fmt="mxfp4"),
        {**_row("mxrt", None, fmt="mxfp4"), "note": "no GPU backend"},
    ]


def test_ratios_table_and_splitk():
    rows = gemm.add_ratios(gpu_like_rows())
    assert rows[2]["vs_dequant"] == pytest.approx(1.5) and rows[2]["vs_triton"] == pytest.approx(6.0)
    assert rows[5]["vs_dequant"] is None  # the bf16 row has its own format group
    assert rows[6]["vs_dequant"] == pytest.approx(1.0) and rows[6]["vs_triton"] is None
    table = gemm.format_table(rows)
    lines = table.splitlines()
    assert len(lines) == 2 + len(rows) and lines[0].startswith("| shape MxNxK | format | peer | TFLOP/s")
    assert "| 64x7168x4096 | mxfp8 | mxrt sm90_wgmma sk1 | 300.0 | 1.0000 | 1.50 | 6.00 |" in table
    assert "skipped: no GPU backend" in lines[-1]
    summary = gemm.splitk_summary(rows)
    assert summary == ["64x7168x4096 mxfp8 sm90_wgmma: sk1 300.0 TFLOP/s, best sk4a 450.0 (1.50x)"]
    full = gemm.table({"rows": rows, "skipped": ["8192x8192x8192: budget"], "overhead": []})
    assert full.splitlines()[0] == "skipped 8192x8192x8192: budget" and summary[0] in full


def test_plot_series_puts_dense_peers_in_every_mx_group():
    groups, series = gemm.plot_series(gpu_like_rows())
    assert groups == ["64x7168x4096\nmxfp8", "64x7168x4096\nmxfp4"]
    assert series["mxrt (best)"] == [450.0, None]
    assert series[gemm.PEER_BF16] == [100.0, 100.0]
    assert series[gemm.PEER_DEQUANT] == [200.0, 80.0]


def test_plot_of_gpu_rows_and_overhead(tmp_path):
    pytest.importorskip("matplotlib")
    from mxrt.bench import overhead

    ov = [
        {"shape": "1x128x128", "op": overhead.OP_TORCH, "wall_s": 10e-6, "latency_s": 20e-6, "graph_s": 3e-6},
        {"shape": "1x128x128", "op": overhead.OP_GEMM, "wall_s": 30e-6, "latency_s": 40e-6, "graph_s": 5e-6},
        {"shape": "1x128x128", "op": overhead.OP_GEMM_SK4, "wall_s": None, "latency_s": None, "graph_s": None},
    ]
    path = tmp_path / "gemm.png"
    gemm.plot({"rows": gpu_like_rows(), "overhead": ov, "device": "H100"}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_luts_match_mxrt():
    s = gemm_peers.scale_lut()
    ref = e8m0_decode(np.arange(256, dtype=np.uint8)).astype(np.float32)
    assert s.dtype == np.float32 and np.isnan(s[255]) and np.isnan(ref[255])
    np.testing.assert_array_equal(s[:255], ref[:255])
    assert s[0] == np.float32(2.0**-127) and s[254] == np.float32(2.0**127)
    for fmt in ("e4m3", "e2m1"):
        np.testing.assert_array_equal(gemm_peers.code_lut(fmt), np.asarray(decode_table(fmt), np.float32))


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
@pytest.mark.parametrize("k", [96, 80])
def test_torch_dequant_matches_mxrt(fmt, k):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5 + k)
    x = (rng.standard_normal((6, k)) * np.exp2(rng.integers(-8, 8, (6, 1)))).astype(np.float32)
    q = mxrt.quantize_mx(x, fmt, backend="numpy")
    want = mxrt.dequantize_mx(q, ml_dtypes.bfloat16).view(np.uint16)
    got = gemm_peers.torch_dequant(
        torch.from_numpy(q.data),
        torch.from_numpy(q.scales),
        k,
        fmt,
        torch.from_numpy(gemm_peers.code_lut(fmt)),
        torch.from_numpy(gemm_peers.scale_lut()),
    )
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (6, k)
    np.testing.assert_array_equal(got.view(torch.int16).numpy().view(np.uint16), want)


def test_check_block_reads_bf16_bits():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((4, 8))
    bits = ref.astype(ml_dtypes.bfloat16).view(np.uint16)  # what a CuPy bf16 result holds
    text, ok = gemm_peers.check_block(bits, ref, ref, "bf16")
    assert text.startswith("ok exact") and ok
    text, ok = gemm_peers.check_block(bits * 0, ref, ref, "bf16")
    assert text.startswith("FAIL") and not ok


def test_triton_candidates():
    tc = gemm_peers.TRITON_CONFIGS
    full, is_full = gemm_peers.triton_candidates(None, 4096, quick=False)
    assert is_full and full == tc
    small, is_full = gemm_peers.triton_candidates([], 16, quick=False)
    assert is_full and small[: len(tc)] == tc
    assert set(gemm_peers.TRITON_SMALL_M) <= set(small) and len(set(small)) == len(small)
    kept = tc[2:4]
    assert gemm_peers.triton_candidates(kept, 64, quick=False) == (kept, False)
    assert gemm_peers.triton_candidates(kept, 64, quick=True) == (tc[:3], False)
