"""The ``mxrt`` command line: check (the product's main job) and info."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mxrt import cli
from mxrt.checks import CheckRow


def test_check_passes_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert cli.main(["check", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "op" in text.splitlines()[0] and "result" in text.splitlines()[0]
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(r["result"] == "PASS" for r in rows)
    assert {"op", "case", "backend", "metric", "value", "result"} <= set(rows[0])
    assert {"encode", "decode", "quantize_mx", "quantize_mx_dual", "per_token_cast_to_fp8"} <= {r["op"] for r in rows}


def test_check_fails_on_a_failing_row(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def failing(backend: str):
        yield CheckRow("fake", "always fails", backend, "mismatches", "1/1", False)

    def crashing(backend: str):
        raise RuntimeError("boom")

    monkeypatch.setattr("mxrt.checks.all_cases", lambda: [failing, crashing])
    assert cli.main(["check"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "boom" in text and "0 passed, 2 failed" in text


def test_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert "mxrt" in text and "numpy" in text and "backend" in text


def test_console_entry_point_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "mxrt.cli", "--version"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "mxrt" in out.stdout


def test_compile_check_without_the_extra_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        "mxrt.runtime.compile_check.tools_missing", lambda t: "the ziglang wheel is not installed (pip install ziglang)"
    )
    monkeypatch.setattr("mxrt.runtime.compile_check.run_compile_check", lambda *a, **k: pytest.fail("must not build"))
    assert cli.main(["compile-check", "--targets", "gfx942"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and 'pip install ".[compilecheck]"' in err and "gfx942" in err
    assert "Traceback" not in err and captured.out == ""


def test_compile_check_unknown_target_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compile-check", "--targets", "gfx942,banana"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "banana" in err


def test_compile_check_console_script_without_the_extra() -> None:
    """The real entry point, where the extra is missing here: one line on stderr, no traceback."""
    from mxrt.runtime.compile_check import tools_missing

    if tools_missing("gfx942") is None:
        pytest.skip("the compilecheck extra is installed here")
    code = "import sys, mxrt.cli; sys.exit(mxrt.cli.main(['compile-check', '--targets', 'gfx942']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert 'pip install ".[compilecheck]"' in out.stderr


def test_info_compile_without_gpu_says_it_skips(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("mxrt.runtime.device_available", lambda: False)
    assert cli.main(["info", "--compile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("device     none")
    assert lines[-1].startswith("compile    skipped") and "GPU" in lines[-1]
    assert cli.main(["info"]) == 0
    assert "skipped" not in capsys.readouterr().out  # only --compile mentions the timings


def test_bench_is_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    text = capsys.readouterr().out
    assert all(s in text for s in ("gemm", "overhead", "quant", "grouped-quant", "layouts"))
