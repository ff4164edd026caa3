"""The scripted correctness suite behind ``mxrt check``.

Each module here exposes ``CASES``: a list of functions, each taking the resolved backend name and returning
an iterable of :class:`CheckRow`. Numpy results are compared against independent formulas (ml_dtypes, bit
formulas, worked examples of MX_REFERENCE.md); GPU rows compare kernels against the numpy twins.
"""

from __future__ import annotations

import traceback

from .core import CheckFn, CheckRow, backend_for, mismatches

__all__ = ["CheckFn", "CheckRow", "all_cases", "backend_for", "mismatches", "run_all"]


def all_cases() -> list[CheckFn]:
    from . import formats, gemm, gpu, layouts

    return [*formats.CASES, *layouts.CASES, *gemm.CASES, *gpu.CASES]


def run_all(backend: str) -> list[CheckRow]:
    rows: list[CheckRow] = []
    for fn in all_cases():
        try:
            rows.extend(fn(backend))
        except Exception as exc:  # a crashing check is a failing row, not a crashed suite
            detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            rows.append(CheckRow(fn.__module__.rsplit(".", 1)[-1], fn.__name__, backend, "exception", detail, False))
    return rows
