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
