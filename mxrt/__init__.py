"""mxrt: numpy-first, portable OCP Microscaling (MX) numerics, layouts and kernels.

Layers (imports point one way, a test checks the graph has no cycle):
formats -> layouts -> problems -> reference (pure numpy) -> runtime (the only one touching cupy) -> ops (GPU
twins) -> api (the public face: every op below, dispatching explicitly) -> cli / checks / bench.
Arrays go in as numpy, CuPy, torch or JAX (DLPack, zero-copy) and come back in the caller's kind.
"""

from ._version import __version__
from .api.deep_gemm import (
    k_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from .api.dispatch import BACKENDS, GPU_OPS
from .api.gemm import gemm_mx
from .api.grouped_gemm import grouped_gemm_mx, grouped_gemm_mx_wgrad
from .api.interop import convert
from .api.layouts import (
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
    moe_combine,
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
from .api.moe_gemm import moe_gemm_mx
from .api.quant import (
    dequantize_mx,
    per_block_cast_to_fp8,
    per_token_cast_to_fp8,
    quantize_mx,
    quantize_mx_dual,
)
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
from .formats import FORMATS, MXArray, MXDual, ScaleMode
from .layouts import (
    SCALE_LAYOUTS,
    WEIGHT_LAYOUTS,
    MXGrouped,
    padded_rows_upper_bound,
    scale_layout_shape,
    weight_layout_shape,
)
from .problems import GEMM_FORMAT_PAIRS, GemmProblem, MoeGemmProblem

__all__ = [
    "BACKENDS",
    "FORMATS",
    "GEMM_FORMAT_PAIRS",
    "GPU_OPS",
    "SCALE_LAYOUTS",
    "WEIGHT_LAYOUTS",
    "CompileError",
    "DtypeError",
    "GemmProblem",
    "LayoutError",
    "MXArray",
    "MXDual",
    "MXGrouped",
    "MoeGemmProblem",
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
    "grouped_gemm_mx",
    "grouped_gemm_mx_wgrad",
    "k_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "moe_align_block_size",
    "moe_combine",
    "moe_gemm_mx",
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
