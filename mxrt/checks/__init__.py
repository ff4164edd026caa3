"""The scripted correctness suite behind ``mxrt check``.

Each module here exposes ``CASES``: a list of functions, each taking the resolved backend name and returning
an iterable of :class:`CheckRow`. Numpy results are compared against independent formulas (ml_dtypes, bit
formulas, worked examples of MX_REFERENCE.md); GPU rows compare kernels against the numpy twins.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CheckRow:
    op: str
    case: str
    backend: str
    metric: str
    value: str
    ok: bool

    @property
    def result(self) -> str:
        return "PASS" if self.ok else "FAIL"

    def as_dict(self) -> dict:
        d = asdict(self)
        d["result"] = self.result
        return d


CheckFn = Callable[[str], Iterable[CheckRow]]


def mismatches(op: str, case: str, backend: str, got, expected) -> CheckRow:
    """Row for a bitwise comparison: the metric counts differing elements (NaN == NaN)."""
    import numpy as np

    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return CheckRow(op, case, backend, "shape", f"{got.shape} vs {expected.shape}", False)
    if got.dtype.kind == "f":
        diff = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    else:
        diff = got != expected
    n = int(np.count_nonzero(diff))
    return CheckRow(op, case, backend, "mismatches", f"{n}/{got.size}", n == 0)


def backend_for(op: str, backend: str) -> str:
    """The backend a check passes to ``op``: the suite's backend, except ``"numpy"`` for an op without a GPU
    kernel when the suite runs on the GPU (so a numpy-only op is still checked instead of raising)."""
    if backend != "gpu":
        return backend
    from .._backend import GPU_OPS, _load_gpu_ops

    _load_gpu_ops()
    return backend if op in GPU_OPS else "numpy"


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
