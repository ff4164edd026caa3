"""The public face: every op a user calls, defined once here, dispatching explicitly to the numpy twin
(:mod:`mxrt.formats`, :mod:`mxrt.layouts`, :mod:`mxrt.reference`) or the GPU op (:mod:`mxrt.ops`).

Arrays come in as numpy, CuPy, or any DLPack producer (torch, JAX) and go out in the caller's kind
(:mod:`mxrt.api.interop`); the backend choice lives in :mod:`mxrt.api.dispatch`.
"""

from .dispatch import BACKENDS, GPU_OPS
from .gemm import gemm_mx
from .interop import convert
from .layouts import (
    calc_diff,
    ceil_to_ue8m0,
    contiguous_m_indices,
    contiguous_psum_layout,
    decode,
    e8m0_decode,
    encode,
    from_masked,
    group_lens_from_m_indices,
    group_lens_from_psum,
    group_offsets,
    moe_align_block_size,
    moe_sorting,
    pack_fp4,
    pad_group_layout,
    pad_rows,
    preshuffle_scales,
    preshuffle_weight,
    quantize_mx_dual_grouped,
    quantize_mx_grouped,
    relative_error,
    scale_index,
    snr_db,
    to_masked,
    unpack_fp4,
    unpad_rows,
    unshuffle_scales,
    unshuffle_weight,
)
from .quant import dequantize_mx, per_block_cast_to_fp8, per_token_cast_to_fp8, quantize_mx, quantize_mx_dual

__all__ = [
    "BACKENDS",
    "GPU_OPS",
    "calc_diff",
    "ceil_to_ue8m0",
    "contiguous_m_indices",
    "contiguous_psum_layout",
    "convert",
    "decode",
    "dequantize_mx",
    "e8m0_decode",
    "encode",
    "from_masked",
    "gemm_mx",
    "group_lens_from_m_indices",
    "group_lens_from_psum",
    "group_offsets",
    "moe_align_block_size",
    "moe_sorting",
    "pack_fp4",
    "pad_group_layout",
    "pad_rows",
    "per_block_cast_to_fp8",
    "per_token_cast_to_fp8",
    "preshuffle_scales",
    "preshuffle_weight",
    "quantize_mx",
    "quantize_mx_dual",
    "quantize_mx_dual_grouped",
    "quantize_mx_grouped",
    "relative_error",
    "scale_index",
    "snr_db",
    "to_masked",
    "unpack_fp4",
    "unpad_rows",
    "unshuffle_scales",
    "unshuffle_weight",
]
