"""The numpy layers import without cupy or any GPU stack (STYLE.md 1)."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = ("cupy", "cupy_backends", "hip", "torch", "triton")


def test_numpy_layers_import_with_gpu_stacks_blocked() -> None:
    code = (
        "import sys\n"
        f"for m in {BLOCKED!r}: sys.modules[m] = None\n"
        "import mxrt, mxrt.formats, mxrt.reference, mxrt.checks\n"
        "import numpy as np\n"
        "q = mxrt.quantize_mx(np.ones((2, 32), np.float32))\n"
        f"assert not any(sys.modules.get(m) for m in {BLOCKED!r})\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_public_names_exist() -> None:
    import mxrt

    missing = [n for n in mxrt.__all__ if not hasattr(mxrt, n)]
    assert not missing


# Known exceptions, each a function-local import: formats/mx.py reaches up to layouts.scales for the fused
# scale_layout= option of quantize_mx (NOTES.md: move the fusion into layouts next session).
ALLOWED = {("formats/mx.py", "layouts")}

LOWER_MAY_NOT_IMPORT = {
    "formats": ("layouts", "reference", "runtime", "ops", "cli", "checks"),
    "layouts": ("reference", "runtime", "ops", "cli", "checks"),
    "reference": ("runtime", "ops", "cli", "checks"),
}


def _imported_packages(path) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module:
            if node.level == 2:  # from ..pkg import x, seen from mxrt/<layer>/<file>.py
                names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mxrt."):
            names.add(node.module.split(".")[1])
    return names


def test_layers_point_one_way() -> None:
    """formats -> layouts -> reference -> runtime -> ops -> cli: a lower layer never imports a higher one."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "mxrt"
    bad = []
    for layer, banned in LOWER_MAY_NOT_IMPORT.items():
        for path in sorted((root / layer).glob("*.py")):
            rel = str(path.relative_to(root))
            hits = {h for h in _imported_packages(path) & set(banned) if (rel, h) not in ALLOWED}
            if hits:
                bad.append(f"{path.relative_to(root)} imports {sorted(hits)}")
    assert not bad, bad
