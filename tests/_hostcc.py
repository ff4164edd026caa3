"""Host C++ builds of device headers for CPU tests (g++, clang++ or the ziglang wheel's clang)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def host_compiler() -> list[str] | None:
    for cxx in ("g++", "clang++"):
        if shutil.which(cxx):
            return [cxx]
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ziglang", "c++"]


def build_host_lib(out_dir: Path, support_file: str) -> ctypes.CDLL:
    """Compile ``tests/support/<support_file>`` with ``-DMXRT_HOST_TEST`` into a shared library and load it;
    skips the calling test when no host compiler exists."""
    cxx = host_compiler()
    if cxx is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    src = ROOT / "tests" / "support" / support_file
    out = out_dir / (Path(support_file).stem + ".so")
    subprocess.run(
        [*cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-DMXRT_HOST_TEST", str(src), "-o", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return ctypes.CDLL(str(out))


def build_simt_lib(out: Path, support_file: str, flags: list[str]) -> ctypes.CDLL:
    """Compile a SIMT-emulator harness ``tests/support/<support_file>`` (kernel chosen by ``flags``, ``-O1``: the
    fiber switches make higher levels slow to build) into ``out`` and load it, ``simt_error`` returning a string.
    A failed build fails the calling test with the compiler's message."""
    src = ROOT / "tests" / "support" / support_file
    cmd = [*host_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", *flags, str(src), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"host build of {support_file} {' '.join(flags)} failed:\n{proc.stderr[-4000:]}")
    so = ctypes.CDLL(str(out))
    so.simt_error.restype = ctypes.c_char_p
    return so
