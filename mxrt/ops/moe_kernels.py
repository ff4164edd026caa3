"""Kernel specs, variants and dispatch of moe_align_block_size (kernels_src/moe/), launched by mxrt/ops/moe.py.
ID_BYTES is the itemsize of the topk ids (4 or 8)."""

from __future__ import annotations

from ..runtime.kernel_spec import KernelSpec, define_grid

MOE_THREADS = 256
_MOE_VARIANTS = define_grid(ID_BYTES=(4, 8), THREADS=(MOE_THREADS,))


def _moe_spec(symbol: str) -> KernelSpec:
    return KernelSpec(symbol=symbol, file=f"moe/{symbol}.hip", required=("ID_BYTES", "THREADS"), variants=_MOE_VARIANTS)


MOE_ALIGN_BLOCK_SIZE = _moe_spec("moe_align_block_size")  # one CTA, small numel
MOE_ALIGN_BLOCK_SIZE_COUNT = _moe_spec("moe_align_block_size_count")  # multi-CTA step 1
MOE_ALIGN_BLOCK_SIZE_SCAN = _moe_spec("moe_align_block_size_scan")  # multi-CTA step 2
MOE_ALIGN_BLOCK_SIZE_SCATTER = _moe_spec("moe_align_block_size_scatter")  # multi-CTA step 3

SPECS = (MOE_ALIGN_BLOCK_SIZE, MOE_ALIGN_BLOCK_SIZE_COUNT, MOE_ALIGN_BLOCK_SIZE_SCAN, MOE_ALIGN_BLOCK_SIZE_SCATTER)
DISPATCH = {
    # the one-CTA kernel; mxrt/ops/moe.py picks the multi-CTA trio (MOE_ALIGN_BLOCK_SIZE_*) for large numel
    "moe_align_block_size": {"generic": MOE_ALIGN_BLOCK_SIZE},
}
