"""Layouts kernels consume, as numpy (the reference and the shape/padding source of truth for the GPU ops).

- :mod:`.scales`: E8M0 scale preshuffles (aiter 32x8, Primus-Turbo 16x4, cuBLAS 128x4, DeepGEMM packed UE8M0).
- :mod:`.weights`: aiter 16x16 weight preshuffle.
- :mod:`.groups`: group offsets, per-group padding, DeepGEMM contiguous / psum / masked layouts.
- :mod:`.grouped_quant`: MX quantization straight into the per-group padded layout (MoE activations, weights).
- :mod:`.moe`: vLLM ``moe_align_block_size`` and aiter ``moe_sorting``.

Every transform has its inverse; index maps are in the docstrings (MX_REFERENCE.md sections 3 and 4).
"""

from ._check import INT32_MAX
from .grouped_quant import MXGrouped, quantize_mx_dual_grouped, quantize_mx_grouped
from .groups import (
    contiguous_m_indices,
    contiguous_psum_layout,
    from_masked,
    group_lens_from_m_indices,
    group_lens_from_psum,
    group_offsets,
    pad_group_layout,
    pad_rows,
    padded_rows_upper_bound,
    to_masked,
    unpad_rows,
)
from .moe import moe_align_block_size, moe_sorting
from .scales import SCALE_LAYOUTS, preshuffle_scales, scale_index, scale_layout_shape, unshuffle_scales
from .weights import WEIGHT_LAYOUTS, preshuffle_weight, unshuffle_weight, weight_layout_shape

__all__ = [
    "INT32_MAX",
    "SCALE_LAYOUTS",
    "WEIGHT_LAYOUTS",
    "MXGrouped",
    "contiguous_m_indices",
    "contiguous_psum_layout",
    "from_masked",
    "group_lens_from_m_indices",
    "group_lens_from_psum",
    "group_offsets",
    "moe_align_block_size",
    "moe_sorting",
    "pad_group_layout",
    "pad_rows",
    "padded_rows_upper_bound",
    "preshuffle_scales",
    "preshuffle_weight",
    "quantize_mx_dual_grouped",
    "quantize_mx_grouped",
    "scale_index",
    "scale_layout_shape",
    "to_masked",
    "unpad_rows",
    "unshuffle_scales",
    "unshuffle_weight",
    "weight_layout_shape",
]
