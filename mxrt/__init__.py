"""mxrt: numpy-first, portable OCP Microscaling (MX) numerics, layouts and kernels.

Layers (dependencies point one way): formats -> layouts -> reference -> runtime -> ops -> cli.
``mxrt.formats``, ``mxrt.layouts`` and ``mxrt.reference`` import with numpy and ml_dtypes alone.
"""

from ._version import __version__
from .errors import (
    CompileError,
    DtypeError,
    LayoutError,
    MxrtError,
    ShapeError,
    UnknownLayoutError,
    UnknownNameError,
    UnsupportedArchError,
)

# formats: codecs, scale rules, quantization
from .formats import (
    FORMATS,
    MXArray,
    MXDual,
    ScaleMode,
    ceil_to_ue8m0,
    decode,
    dequantize_mx,
    e8m0_decode,
    encode,
    pack_fp4,
    per_block_cast_to_fp8,
    per_token_cast_to_fp8,
    quantize_mx,
    quantize_mx_dual,
    unpack_fp4,
)

# layouts: scale and weight preshuffles, group and MoE layouts
from .layouts import (
    SCALE_LAYOUTS,
    WEIGHT_LAYOUTS,
    MXGrouped,
    contiguous_m_indices,
    contiguous_psum_layout,
    from_masked,
    group_lens_from_m_indices,
    group_lens_from_psum,
    group_offsets,
    moe_align_block_size,
    moe_sorting,
    pad_group_layout,
    pad_rows,
    padded_rows_upper_bound,
    preshuffle_scales,
    preshuffle_weight,
    quantize_mx_dual_grouped,
    quantize_mx_grouped,
    scale_index,
    scale_layout_shape,
    to_masked,
    unpad_rows,
    unshuffle_scales,
    unshuffle_weight,
    weight_layout_shape,
)

# reference: accuracy metrics
from .reference import calc_diff, relative_error, snr_db

# isort: split
# gemm: dense MX GEMM ``a @ b.T`` (numpy backend; GPU backends register into mxrt.gemm.GEMM_BACKENDS)
from .gemm import GEMM_FORMAT_PAIRS, GemmProblem, gemm_mx

__all__ = [
    "FORMATS",
    "GEMM_FORMAT_PAIRS",
    "SCALE_LAYOUTS",
    "WEIGHT_LAYOUTS",
    "CompileError",
    "DtypeError",
    "GemmProblem",
    "LayoutError",
    "MXArray",
    "MXDual",
    "MXGrouped",
    "MxrtError",
    "ScaleMode",
    "ShapeError",
    "UnknownLayoutError",
    "UnknownNameError",
    "UnsupportedArchError",
    "__version__",
    "calc_diff",
    "ceil_to_ue8m0",
    "contiguous_m_indices",
    "contiguous_psum_layout",
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
    "padded_rows_upper_bound",
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
    "scale_layout_shape",
    "snr_db",
    "to_masked",
    "unpack_fp4",
    "unpad_rows",
    "unshuffle_scales",
    "unshuffle_weight",
    "weight_layout_shape",
]
