"""``mxrt bench``: every suite parses and, without a GPU, says so, times the numpy reference and exits 0; JSON and
plot files; the shared core's pure parts. The GPU paths run on the device (benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mxrt import cli
from mxrt.bench import SUITES, core, grouped_quant, overhead, quant
from mxrt.errors import ShapeError

# the smallest useful work per suite, so that each CPU run takes about a second
SMALL = {
    "gemm": ["--shapes", "8x64x128"],
    "overhead": ["--shapes", "1x64x64"],
    "quant": ["--shapes", "16x256"],
    "grouped-quant": ["--shapes", "64x64x4", "--weights", "2x32x64"],
    "layouts": [],
}


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path even on a machine with a GPU (the GPU path is exercised on the device)."""
    monkeypatch.setattr("mxrt.runtime.device_available", lambda: False)


def test_every_suite_has_a_small_case() -> None:
    assert set(SMALL) == set(SUITES)


@pytest.mark.usefixtures("no_gpu")
def test_bench_gemm_without_gpu_says_so_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gemm.json"
    assert cli.main(["bench", "gemm", "--json", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "no GPU" in text.splitlines()[0] and "numpy reference" in text
    assert "| shape MxNxK | format | peer | TFLOP/s |" in text and "host overhead" in text
    result = json.loads(out.read_text())
    assert result["suite"] == "gemm" and result["gpu"] is False and result["argv"][:2] == ["bench", "gemm"]
    peers = {r["peer"] for r in result["rows"]}
    assert peers == {"mxrt numpy reference", "numpy f32 matmul"}
    assert all(r["seconds"] > 0 for r in result["rows"])
    assert all(r["check"].startswith("ok") for r in result["rows"] if r["peer"] == "mxrt numpy reference")
    assert {r["op"] for r in result["overhead"]} == {overhead.OP_NUMPY_MATMUL, overhead.OP_GEMM, overhead.OP_QUANT}


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_suite_runs_on_cpu_and_writes_json_and_plot(
    suite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["bench", suite, *SMALL[suite], "--json", str(js), "--plot", str(png), "--no-progress"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "no GPU" in text and f"wrote {png}" in text
    rows = json.loads(js.read_text())["rows"]
    assert rows and all(r.get("s", r.get("seconds", r.get("wall_s"))) for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_fails_before_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setattr("mxrt.bench.gpu_present", lambda: pytest.fail("must not start the run"))
    assert cli.main(["bench", "gemm", "--plot", str(tmp_path / "p.png"), "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"mxrt bench gemm: --plot {core.PLOT_MISSING}" and "pip install" in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["gemm", "--shapes", "16x7168"], "MxNxK"),
        (["gemm", "--formats", "mxfp6"], "--formats"),
        (["overhead", "--calls", "0"], "--calls"),
        (["quant", "--shapes", "1x2x3"], "MxK"),
        (["quant", "--dual-variants", "a:b"], "--dual-variants"),
        (["grouped-quant", "--weights", "2x3"], "GxNxK"),
        (["layouts", "--iters", "0"], "--iters"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"mxrt bench {argv[0]}: ") and words in err


def test_unknown_suite_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "nope"])
    assert e.value.code == 2 and "gemm" in capsys.readouterr().err


def test_bench_imports_without_optional_packages() -> None:
    """The CLI and every suite import with none of cupy, torch, triton, tqdm, matplotlib present."""
    code = (
        "import sys\n"
        "for m in ('cupy', 'torch', 'triton', 'tqdm', 'matplotlib'): sys.modules[m] = None\n"
        "import mxrt.cli, mxrt.bench\n"
        "p = mxrt.cli.build_parser().parse_args(['bench', 'gemm', '--quick'])\n"
        "print(p.suite, sorted(mxrt.bench.SUITES))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gemm ")


def test_session_progress_lines_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = tmp_path / "s.json"
    ses = core.Session("x", ["bench", "x"], str(js), progress=False)
    seen = list(ses.track([(1, 2), (3, 4)], "demo", lambda s: core.shape_label(*s)))
    ses.result["rows"].append({"a": 1})
    ses.save()
    out = capsys.readouterr().out
    assert seen == [(1, 2), (3, 4)] and "[1/2] demo 1x2" in out and "[2/2] demo 3x4" in out
    saved = json.loads(js.read_text())
    assert saved["rows"] == [{"a": 1}] and saved["suite"] == "x" and "wall_s" in saved


def test_core_shapes_and_table() -> None:
    assert core.parse_shapes("1x2x3, 4x5x6,", 3) == [(1, 2, 3), (4, 5, 6)]
    for bad in ("1x2", "1x-2x3", "", "1x2x3x4"):
        with pytest.raises(ShapeError):
            core.parse_shapes(bad, 3)
    cols = [core.Column("a", lambda r: r["a"]), core.Column("n", lambda r: core.fmt_num(r.get("n"), ".1f"), True)]
    assert core.markdown_table([{"a": "x", "n": 1.25}, {"a": "y"}], cols).splitlines() == [
        "| a | n |",
        "|---|---:|",
        "| x | 1.2 |",
        "| y | - |",
    ]


def test_overhead_ratios_and_verdict() -> None:
    rows = [
        {"shape": "1x128x128", "op": overhead.OP_TORCH, "wall_s": 20e-6, "latency_s": 30e-6},
        {"shape": "1x128x128", "op": overhead.OP_GEMM, "wall_s": 25e-6, "latency_s": 90e-6},
        {"shape": "1x128x128", "op": overhead.OP_QUANT, "wall_s": 40e-6, "latency_s": 45e-6},
        {"shape": "4x7168x4096", "op": overhead.OP_GEMM, "wall_s": 50e-6, "latency_s": None},
    ]
    overhead.add_ratios(rows, overhead.OP_TORCH)
    assert rows[1]["vs_torch"] == pytest.approx(1.25) and rows[1]["vs_torch_latency"] == pytest.approx(3.0)
    assert rows[3]["vs_torch"] is None  # no torch row for that shape
    line = overhead.verdict(rows)
    assert "mxrt.gemm_mx worst 1.25x (met)" in line and "mxrt.quantize_mx worst 2.00x (MISSED)" in line
    table = overhead.format_table(rows)
    assert "| 1x128x128 | mxrt.gemm_mx | 25.0 | 1.25 | 90.0 | 3.00 | - |" in table


def test_bandwidth_columns() -> None:
    rows = quant.add_bandwidth([{"kernel": "q", "shape": "1x1", "s": 1e-3, "bytes": 2e9, "copy_Bps": 4e12}], 3e12)
    assert rows[0]["tbps"] == pytest.approx(2.0) and rows[0]["pct_copy"] == pytest.approx(200 / 3)
    assert rows[0]["pct_same_copy"] == pytest.approx(50.0)
    lens = grouped_quant.split(4096, 32, seed=1)
    assert lens.sum() == 4096 and (lens == 0).sum() >= 32 // 8 and lens.dtype.kind == "i"


@pytest.mark.usefixtures("no_gpu")
def test_from_json_reprints_and_replots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    js, png = tmp_path / "o.json", tmp_path / "o.png"
    assert cli.main(["bench", "overhead", *SMALL["overhead"], "--json", str(js), "--no-progress"]) == 0
    first = capsys.readouterr().out
    assert cli.main(["bench", "overhead", "--from-json", str(js), "--plot", str(png)]) == 0
    again = capsys.readouterr().out
    assert overhead.format_table(json.loads(js.read_text())["rows"]) in first and again.startswith("host overhead")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["bench", "gemm", "--from-json", str(js)]) == 2
    assert "not 'gemm'" in capsys.readouterr().err
    assert cli.main(["bench", "gemm", "--from-json", str(tmp_path / "missing.json")]) == 2
