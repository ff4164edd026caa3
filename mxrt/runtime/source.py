"""Kernel sources: locate ``kernels_src/``, inline ``#include "..."`` recursively, stamp the result.

CuPy's disk cache keys on the source string it is given, so the string must hold every header it uses:
an edited header then changes the string and can never load a stale binary.
"""

from __future__ import annotations

import hashlib
import re
import sys
from functools import cache
from pathlib import Path

from .._version import __version__
from ..config import kernels_src_override
from ..errors import CompileError

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$")


def kernels_src_dir() -> Path:
    """The ``kernels_src`` folder: ``MXRT_KERNELS_SRC``, else the checkout beside the package, else the copy
    that ``pip install`` puts under ``<prefix>/share/mxrt/kernels_src``."""
    override = kernels_src_override()
    candidates = [Path(override)] if override else []
    candidates += [
        Path(__file__).resolve().parents[2] / "kernels_src",
        Path(sys.prefix) / "share" / "mxrt" / "kernels_src",
    ]
    for c in candidates:
        if (c / "common" / "prelude.h").is_file():
            return c
    raise CompileError(f"mxrt: kernels_src not found (looked in {', '.join(str(c) for c in candidates)})")


def _inline(path: Path, seen: set[Path], stack: tuple[Path, ...]) -> list[str]:
    if path in stack:
        raise CompileError(f"mxrt: include cycle {' -> '.join(str(p) for p in (*stack, path))}")
    if path in seen:  # every header is #pragma once
        return []
    seen.add(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CompileError(f"mxrt: cannot read kernel source {path}: {exc}") from None
    out = [f"// ---- begin {path.name}"]
    for line in text.splitlines():
        m = _INCLUDE.match(line)
        if m:
            out.extend(_inline((path.parent / m.group(1)).resolve(), seen, (*stack, path)))
        elif not _PRAGMA_ONCE.match(line):
            out.append(line)
    out.append(f"// ---- end {path.name}")
    return out


@cache
def inlined_source(relpath: str) -> str:
    """The self-contained text of ``kernels_src/<relpath>``, every quoted include inlined once."""
    root = kernels_src_dir()
    return "\n".join(_inline((root / relpath).resolve(), set(), ())) + "\n"


def stamped_source(relpath: str, target: str) -> str:
    """``inlined_source`` with a first line naming the mxrt version, the text's hash and the target."""
    body = inlined_source(relpath)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"// mxrt {__version__} sha256:{digest} target {target} file {relpath}\n{body}"


def extern_c_symbols(text: str) -> list[str]:
    """Names of the ``extern "C"`` kernels defined in a source text."""
    # between ``void`` and the name: ``__launch_bounds__(...)`` and upper-case attribute macros (``WG_CLUSTER``)
    pattern = r'extern\s+"C"\s+__global__\s+void\s+(?:(?:__launch_bounds__\([^)]*\)|[A-Z][A-Z0-9_]*)\s+)*(\w+)\s*\('
    return re.findall(pattern, text)
