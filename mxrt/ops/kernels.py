"""Every op family's kernel specs and dispatch rows, gathered from the family files (``ops/*_kernels.py``).

:data:`ALL_SPECS` is what the offline compile check builds (``mxrt compile-check``) and what the test that every
``extern "C"`` kernel has exactly one spec reads; :data:`DISPATCH` is op -> {target or "generic": spec}, from
which the GPU tests derive their skips.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..runtime import kernel_spec
from ..runtime.kernel_spec import KernelSpec
from . import (
    ep_kernels,
    gemm_amd_kernels,
    gemm_decode_amd_kernels,
    gemm_decode_kernels,
    gemm_kernels,
    gemm_sm90_kernels,
    grouped_gemm_kernels,
    grouped_kernels,
    layout_kernels,
    moe_kernels,
    quant_kernels,
)

FAMILIES = (
    quant_kernels,
    layout_kernels,
    moe_kernels,
    ep_kernels,
    grouped_kernels,
    gemm_kernels,
    gemm_sm90_kernels,
    gemm_decode_kernels,
    gemm_amd_kernels,
    gemm_decode_amd_kernels,
    grouped_gemm_kernels,
)

ALL_SPECS: tuple[KernelSpec, ...] = tuple(s for f in FAMILIES for s in f.SPECS)

#: Dispatch tables: op -> {target or "generic": spec}. Tests derive their GPU skips from these.
DISPATCH: Mapping[str, Mapping[str, KernelSpec]] = {op: row for f in FAMILIES for op, row in f.DISPATCH.items()}


def select(op: str, target: str) -> KernelSpec:
    """The spec that runs ``op`` on ``target``: the target's own entry, else ``"generic"``."""
    return kernel_spec.select(DISPATCH, op, target)


def op_supports(op: str, target: str) -> bool:
    return kernel_spec.supports(DISPATCH, op, target)
