"""mxrt.layouts imports with numpy alone, and every layouts name is public."""

from __future__ import annotations

import subprocess
import sys

import mxrt
import mxrt.layouts

BLOCKED = ("cupy", "cupy_backends", "hip", "torch", "triton")


def test_layouts_import_with_gpu_stacks_blocked() -> None:
    code = (
        "import sys\n"
        f"for m in {BLOCKED!r}: sys.modules[m] = None\n"
        "import numpy as np, mxrt.layouts as L\n"
        "L.preshuffle_scales(np.zeros((3, 3), np.uint8), 'aiter32x8')\n"
        "L.moe_align_block_size(np.zeros((2, 2), np.int32), 4, 2)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_layouts_names_are_public() -> None:
    missing = [n for n in mxrt.layouts.__all__ if n != "INT32_MAX" and n not in mxrt.__all__]
    assert not missing
    for n in mxrt.layouts.__all__:  # the face defines each op once: the twin itself, or a wrapper / dispatcher
        if n in mxrt.__all__ and callable(getattr(mxrt.layouts, n)):
            face = getattr(mxrt, n)
            assert (
                face is getattr(mxrt.layouts, n)
                or getattr(face, "__wrapped__", None) is getattr(mxrt.layouts, n)
                or (face.__module__ == "mxrt.api.layouts")
            ), n
