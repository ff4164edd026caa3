"""Kernel specs, variants and dispatch of the MoE kernels (kernels_src/moe/): moe_align_block_size (launched by
mxrt/ops/moe.py; ID_BYTES is the itemsize of the topk ids, 4 or 8) and moe_combine (mxrt/ops/moe_combine.py; VEC 1
reads 16-byte vectors of 8 bf16, IDX_BYTES is the itemsize of src)."""

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

COMBINE_THREADS = 256
#: most CTAs of one moe_combine launch (the kernel grid-strides beyond): ~8 resident waves on a 132-SM H100
COMBINE_MAX_CTAS = 8192
MOE_COMBINE = KernelSpec(
    symbol="moe_combine",
    file="moe/moe_combine.hip",
    required=("IDX_BYTES", "THREADS", "VEC"),
    variants=define_grid(IDX_BYTES=(4, 8), THREADS=(COMBINE_THREADS,), VEC=(0, 1)),
)

SPECS = (
    MOE_ALIGN_BLOCK_SIZE,
    MOE_ALIGN_BLOCK_SIZE_COUNT,
    MOE_ALIGN_BLOCK_SIZE_SCAN,
    MOE_ALIGN_BLOCK_SIZE_SCATTER,
    MOE_COMBINE,
)
DISPATCH = {
    "moe_combine": {"generic": MOE_COMBINE},
    # the one-CTA kernel; mxrt/ops/moe.py picks the multi-CTA trio (MOE_ALIGN_BLOCK_SIZE_*) for large numel
    "moe_align_block_size": {"generic": MOE_ALIGN_BLOCK_SIZE},
}
