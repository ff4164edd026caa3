"""Kernel specs: the Python mirror of a kernel file's header, as frozen data, and the generic dispatch lookup.

The runtime knows no op: each op family keeps its specs, define variants, dispatch table and tuning constants in
its own file under :mod:`mxrt.ops` (``ops/*_kernels.py``; :data:`mxrt.ops.ALL_SPECS` gathers them). A test checks
that every ``extern "C"`` kernel in kernels_src has exactly one spec, and the offline compile check
(``mxrt compile-check``) builds every spec it is given with every define set in :attr:`KernelSpec.variants`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UnsupportedArchError

#: Every target the offline compile check knows; "generic" kernels build for all of them.
KNOWN_TARGETS = ("gfx942", "gfx950", "sm_90a")

Defines = tuple[tuple[str, int], ...]


def defines(**kw: int) -> Defines:
    """A hashable, ordered define set: ``defines(FMT=0, THREADS=256)``."""
    return tuple(sorted((k, int(v)) for k, v in kw.items()))


def define_grid(**axes: tuple[int, ...]) -> tuple[Defines, ...]:
    """Every define set of the cartesian product of ``axes``: ``define_grid(FMT=(0, 1), THREADS=(256,))``."""
    names = list(axes)
    return tuple(defines(**dict(zip(names, vals, strict=True))) for vals in itertools.product(*axes.values()))


@dataclass(frozen=True)
class KernelSpec:
    """One ``extern "C"`` kernel: its file under kernels_src, its symbol, the defines it needs and the
    define sets the ops use (``variants``), and the targets it supports (``("generic",)``: any GPU)."""

    symbol: str
    file: str
    required: tuple[str, ...]
    variants: tuple[Defines, ...]
    targets: tuple[str, ...] = ("generic",)
    #: target -> matrix-instruction prefixes each build for that target must contain (the compile check fails
    #: the build otherwise); e.g. ``{"gfx950": ("v_mfma_scale_f32_16x16x128_f8f6f4",)}``.
    expect_mma: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: defines some builds take (the kernel checks when it needs them), e.g. one that only one format uses
    optional: tuple[str, ...] = ()

    def expected_mma(self, target: str) -> tuple[str, ...]:
        return dict(self.expect_mma).get(target, ())

    def check_defines(self, d: Defines) -> None:
        names = {k for k, _ in d}
        missing = [r for r in self.required if r not in names]
        extra = sorted(names - set(self.required) - set(self.optional))
        if missing or extra:
            raise UnsupportedArchError(
                f"{self.symbol}: defines {dict(d)} do not match the kernel header: missing {missing}, unknown {extra}"
            )

    def supports(self, target: str) -> bool:
        return "generic" in self.targets or target in self.targets


#: A dispatch table: op -> {target or "generic": spec}.
DispatchTable = Mapping[str, Mapping[str, KernelSpec]]


def select(table: DispatchTable, op: str, target: str) -> KernelSpec:
    """The spec that runs ``op`` on ``target`` in ``table``: the target's own entry, else ``"generic"``."""
    row = table.get(op, {})
    spec = row.get(target) or row.get("generic")
    if spec is None:
        raise UnsupportedArchError(f"{op}: no kernel for target {target!r}; supported targets: {sorted(row)}")
    return spec


def supports(table: DispatchTable, op: str, target: str) -> bool:
    """True when ``table`` has a kernel for ``op`` on ``target``."""
    row = table.get(op, {})
    return target in row or "generic" in row
