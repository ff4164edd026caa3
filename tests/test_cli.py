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
