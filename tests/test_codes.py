"""mxrt/codes.py owns every number a kernel sees: the committed kernels_src/common/mx_codes.h is exactly what it
generates, no other kernel file defines one of those macros, and the Python tables agree with the public names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import mxrt
from mxrt import codes
from mxrt.formats import FORMATS, ScaleMode

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels_src"
GENERATED = KERNELS / "common" / "mx_codes.h"


def test_committed_header_is_generated() -> None:
    stale = "kernels_src/common/mx_codes.h differs from mxrt/codes.py: run python -m mxrt.codes --write"
    assert GENERATED.read_text() == codes.header(), stale
    assert GENERATED.read_text().startswith("// GENERATED")


def test_check_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "mxrt.codes", "--check"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_kernel_file_redefines_a_code() -> None:
    generated = set(re.findall(r"^#define (\w+) ", GENERATED.read_text(), re.M))
    files = [*KERNELS.rglob("*.h"), *KERNELS.rglob("*.hip"), *(ROOT / "tests" / "support").glob("*.cpp")]
    for path in files:
        if path == GENERATED:
            continue
        for name in re.findall(r"^\s*#\s*define\s+(\w+)", path.read_text(), re.M):
            assert name not in generated, f"{path.relative_to(ROOT)} defines {name}, owned by mxrt/codes.py"


def test_tables_cover_the_public_names() -> None:
    assert set(codes.FMT_CODES) == set(FORMATS)
    assert set(codes.SCALE_MODE_CODES) == {m.value for m in ScaleMode}
    assert set(codes.SCALE_LAYOUT_CODES) == {None, *mxrt.SCALE_LAYOUTS}
    assert codes.SCALE_LAYOUT_CODES[None] == 0
    assert set(codes.WEIGHT_LAYOUT_CODES) == {None, *mxrt.WEIGHT_LAYOUTS}
    assert codes.WEIGHT_LAYOUT_CODES[None] == 0  # row-major builds carry no WLB define
    for table in (codes.FMT_CODES, codes.SCALE_MODE_CODES, codes.IN_DTYPE_CODES, codes.GEMM_OUT_DTYPE_CODES):
        assert sorted(table.values()) == list(range(len(table))), table
    layout_codes = [*codes.SCALE_LAYOUT_CODES.values(), codes.SCALE_LAYOUT_TURBO16X4_U32]
    assert len(set(layout_codes)) == len(layout_codes)
    flags = (codes.FLAG_VEC_IN, codes.FLAG_VEC_OUT, codes.FLAG_VEC_OUT_COL, codes.FLAG_FLAT)
    assert all(f & (f - 1) == 0 for f in flags) and len(set(flags)) == len(flags)


def test_one_python_table_per_code() -> None:
    """No module under mxrt/ spells a code table of its own: the literal tables live in mxrt/codes.py only."""
    # an integer code after the name (a tolerance table such as {"e4m3": 1e-3} is no code table)
    pattern = re.compile(r'\{\s*(None:\s*0,\s*)?"(e4m3|floor|float32|aiter32x8)":\s*\d+\s*[,}]')
    for path in (ROOT / "mxrt").rglob("*.py"):
        if path.name == "codes.py":
            continue
        assert not pattern.search(path.read_text()), f"{path.relative_to(ROOT)} spells a code table: use mxrt.codes"
