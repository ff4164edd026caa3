"""The offline compile check, where its tools are installed (``pip install .[compilecheck]``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mxrt import cli
from mxrt.ops import kernels, quant_kernels
from mxrt.runtime import compile_check, kernel_spec

# offline builds for three targets: ~50 s; CI still runs it
pytestmark = pytest.mark.slow
TARGETS = ("gfx942", "gfx950", "sm_90a")


@pytest.mark.parametrize("target", TARGETS)
def test_first_variant_of_every_spec_builds(target: str) -> None:
    why = compile_check.tools_missing(target)
    if why:
        pytest.skip(why)
    for spec in kernels.ALL_SPECS:
        if not spec.supports(target):
            continue
        r = compile_check.build_one(spec, spec.variants[-1], target)
        assert r.ok, r.error
        if target.startswith("gfx"):
            assert r.spills == 0 and r.scratch == 0
            assert set(r.registers) == {"vgpr", "agpr", "sgpr"} and r.registers["vgpr"] > 0
        else:
            assert r.registers["regs"] > 0
        assert isinstance(r.mma, list)


def test_a_broken_define_set_fails_with_the_log() -> None:
    if compile_check.tools_missing("gfx950"):
        pytest.skip("ziglang missing")
    bad = kernel_spec.defines(FMT=9, IN_DTYPE=1, THREADS=256)  # FMT 9 names no format
    r = compile_check.build_amd(quant_kernels.QUANTIZE_MX_ROWWISE, bad, "gfx950")
    assert not r.ok and "error" in r.error


def test_a_missing_expected_instruction_fails_the_build() -> None:
    if compile_check.tools_missing("gfx950"):
        pytest.skip("ziglang missing")
    s = quant_kernels.QUANTIZE_MX_ROWWISE
    want = kernel_spec.KernelSpec(s.symbol, s.file, s.required, s.variants[:1], s.targets, (("gfx950", ("v_mfma",)),))
    r = compile_check.build_one(want, want.variants[0], "gfx950")
    assert not r.ok and "v_mfma" in r.error and r.mma == []
    assert compile_check.build_one(want, want.variants[0], "gfx942").ok  # the expectation is per target


def test_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if compile_check.tools_missing("gfx942"):
        pytest.skip("ziglang missing")
    small = tuple(
        kernel_spec.KernelSpec(s.symbol, s.file, s.required, s.variants[:1], s.targets) for s in kernels.ALL_SPECS
    )
    real = compile_check.run_compile_check
    monkeypatch.setattr(compile_check, "run_compile_check", lambda t, specs, jobs=None: real(t, small, jobs))
    out = tmp_path / "cc.json"
    assert cli.main(["compile-check", "--targets", "gfx942", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == sum(s.supports("gfx942") for s in kernels.ALL_SPECS)  # target-specific specs skip it
    assert {"kernel", "target", "ok", "registers", "spills", "scratch", "lds", "mma"} <= set(rows[0])
    assert "builds passed" in capsys.readouterr().out
