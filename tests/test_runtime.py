"""The runtime without a GPU: specs mirror kernels_src, sources inline and stamp, targets normalise,
dispatch tables answer, and the ops route to numpy when no device is present."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mxrt
from mxrt.errors import UnsupportedArchError
from mxrt.ops import kernels, quant_kernels
from mxrt.runtime import kernel_spec, source
from mxrt.runtime.arch import normalize_target

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels_src"
KERNEL_FILES = sorted(p for p in KERNELS.rglob("*.hip"))


def test_every_extern_c_kernel_has_exactly_one_spec() -> None:
    found = []
    for path in KERNEL_FILES:
        for sym in source.extern_c_symbols(path.read_text()):
            found.append((sym, path.relative_to(KERNELS).as_posix()))
    assert found, 'no extern "C" kernels found'
    for sym, rel in found:
        owners = [s for s in kernels.ALL_SPECS if s.symbol == sym]
        assert len(owners) == 1, f"{sym} ({rel}) has {len(owners)} specs"
        assert owners[0].file == rel
        assert Path(rel).stem == sym or sym.startswith(Path(rel).stem), "symbol should equal the file stem"
    assert sorted(s.symbol for s in kernels.ALL_SPECS) == sorted(sym for sym, _ in found)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_kernel_header_states_the_launch_contract(path: Path) -> None:
    head = path.read_text().splitlines()[:16]
    for key in ("// kernel", "// computes", "// args", "// grid", "// defines", "// requires"):
        assert any(line.startswith(key) for line in head), f"{path.name}: header line {key!r} missing"
    spec = next(s for s in kernels.ALL_SPECS if s.file == path.relative_to(KERNELS).as_posix())
    text = path.read_text()
    for name in (*spec.required, *spec.optional):
        assert name in text, f"{path.name}: define {name} of the spec is not mentioned in the source"
        for d in spec.variants:
            spec.check_defines(d)


def test_inlined_source_is_self_contained_and_stamped() -> None:
    for spec in kernels.ALL_SPECS:
        text = source.stamped_source(spec.file, "gfx950")
        first = text.splitlines()[0]
        assert re.fullmatch(rf"// mxrt {mxrt.__version__} sha256:[0-9a-f]{{16}} target gfx950 file {spec.file}", first)
        assert '#include "' not in text
        assert text.count("// ---- begin prelude.h") == 1  # included twice, inlined once
        assert source.extern_c_symbols(text) == [spec.symbol]


def test_stamp_changes_with_header_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    copy = tmp_path / "kernels_src"
    shutil.copytree(KERNELS, copy)
    monkeypatch.setenv("MXRT_KERNELS_SRC", str(copy))
    source.inlined_source.cache_clear()
    try:
        before = source.stamped_source(quant_kernels.QUANTIZE_MX_ROWWISE.file, "sm_90a").splitlines()[0]
        with open(copy / "common" / "mx_codecs.h", "a") as fh:
            fh.write("\n// edited\n")
        source.inlined_source.cache_clear()
        after = source.stamped_source(quant_kernels.QUANTIZE_MX_ROWWISE.file, "sm_90a").splitlines()[0]
    finally:
        source.inlined_source.cache_clear()
    assert before != after


def test_every_kernels_src_folder_ships_in_the_wheel() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for folder in sorted(p for p in KERNELS.iterdir() if p.is_dir()):
        assert f'"share/mxrt/kernels_src/{folder.name}"' in text, f"kernels_src/{folder.name} missing in data-files"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("gfx942:sramecc+:xnack-", "gfx942"),
        ("GFX950", "gfx950"),
        ("sm_90", "sm_90a"),
        ("sm_90a", "sm_90a"),
        ("9.0", "sm_90a"),
        ("90", "sm_90a"),
        ("compute_90", "sm_90a"),
        ("8.9", "sm_89"),
        ("sm_80", "sm_80"),
        ("10.0", "sm_100a"),
    ],
)
def test_normalize_target(raw: str, want: str) -> None:
    assert normalize_target(raw) == want


@pytest.mark.parametrize("bad", ["", "volta", "gfx", "sm_x"])
def test_normalize_target_rejects(bad: str) -> None:
    with pytest.raises(UnsupportedArchError):
        normalize_target(bad)


def test_dispatch_tables() -> None:
    for op, table in kernels.DISPATCH.items():
        assert "generic" in table, f"{op}: the generic path must exist (any CUDA or ROCm GPU)"
        for target in kernel_spec.KNOWN_TARGETS:
            assert kernels.select(op, target).supports(target)
    table = {"only_gfx950": {"gfx950": quant_kernels.QUANTIZE_MX_DUAL}}
    assert kernel_spec.select(table, "only_gfx950", "gfx950") is quant_kernels.QUANTIZE_MX_DUAL
    assert not kernel_spec.supports(table, "only_gfx950", "sm_90a")
    with pytest.raises(UnsupportedArchError, match=r"supported targets: \['gfx950'\]"):
        kernel_spec.select(table, "only_gfx950", "sm_90a")


def test_defines_must_match_the_header() -> None:
    with pytest.raises(UnsupportedArchError, match="missing"):
        quant_kernels.QUANTIZE_MX_ROWWISE.check_defines(kernel_spec.defines(FMT=0))


def test_optional_defines_are_accepted_and_others_still_refused() -> None:
    spec = kernel_spec.KernelSpec("k", "f.hip", ("A",), (), optional=("PF",))
    spec.check_defines(kernel_spec.defines(A=1))
    spec.check_defines(kernel_spec.defines(A=1, PF=2))
    with pytest.raises(UnsupportedArchError, match=r"unknown \['B'\]"):
        spec.check_defines(kernel_spec.defines(A=1, PF=2, B=0))
    with pytest.raises(UnsupportedArchError, match=r"missing \['A'\]"):
        spec.check_defines(kernel_spec.defines(PF=2))


def test_gpu_ops_register_and_auto_stays_on_numpy_without_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"quantize_mx", "quantize_mx_dual"} <= set(mxrt.GPU_OPS)
    monkeypatch.setattr("mxrt.runtime.device_available", lambda: False)
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    q = mxrt.quantize_mx(x, backend="auto")
    assert isinstance(q.data, np.ndarray)
    with pytest.raises(UnsupportedArchError):
        mxrt.quantize_mx(x, backend="gpu")


def test_runtime_imports_without_cupy() -> None:
    code = (
        "import sys\n"
        "sys.modules['cupy'] = None\n"
        "import mxrt.runtime, mxrt.ops\n"
        "assert mxrt.runtime.device_available() is False\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_runtime_imports_nothing_from_ops() -> None:
    """runtime/ is generic machinery: the op families' specs live in mxrt/ops/*_kernels.py."""
    import ast

    for path in (ROOT / "mxrt" / "runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = "." * node.level + (f"{node.module}." if node.module else "")
                names = [base + a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not re.match(r"(\.\.|mxrt\.)(ops)\b", name), f"{path.name} imports {name}"


def test_debug_hook_records_launches_nests_and_validates() -> None:
    from mxrt.runtime import LaunchConfig, debug, launch
    from mxrt.runtime.alloc import current_debug

    calls = []

    def kernel(grid, block, args, shared_mem=0):
        calls.append(grid)

    cfg = LaunchConfig((2, 1, 1), (64, 1, 1))
    launch("op", kernel, cfg, ())  # no session: nothing recorded, no synchronisation
    with debug(poison=0xA5) as outer:
        launch("op", kernel, cfg, ())
        with debug() as inner:  # e.g. around a CUDA-graph capture: no poison, no sync
            assert current_debug() is inner and inner.poison is None and not inner.sync_after_launch
            launch("op2", kernel, cfg, ())
        assert current_debug() is outer
    assert current_debug() is None and len(calls) == 3
    assert [x[0] for x in outer.launches] == ["op"] and [x[0] for x in inner.launches] == ["op2"]
    assert outer.launches[0][2:] == ((2, 1, 1), (64, 1, 1))
    for bad in (256, -1, True, 1.0):
        with pytest.raises(mxrt.DtypeError, match="poison"), debug(poison=bad):
            pass
