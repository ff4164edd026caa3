"""The pieces every check module shares: the row type, the bitwise comparison, the backend an op runs on."""

from __future__ import annotations

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
    from ..api.dispatch import GPU_OPS

    return backend if op in GPU_OPS else "numpy"
