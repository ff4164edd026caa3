"""MX element formats, E8M0 scales, scale rules and quantization (numpy + ml_dtypes only)."""

from .blockscale import per_block_cast_to_fp8, per_token_cast_to_fp8
from .codecs import (
    E2M1,
    E2M3,
    E3M2,
    E4M3,
    E5M2,
    E8M0_NAN,
    E8M0_ONE,
    FORMATS,
    ElemFormat,
    ceil_to_ue8m0,
    decode,
    decode_table,
    e8m0_decode,
    encode,
    get_format,
    pack_fp4,
    unpack_fp4,
)
from .mx import MXArray, MXDual, dequantize_mx, quantize_mx, quantize_mx_dual
from .scales import ScaleMode, compute_scales

__all__ = [
    "E2M1",
    "E2M3",
    "E3M2",
    "E4M3",
    "E5M2",
    "E8M0_NAN",
    "E8M0_ONE",
    "FORMATS",
    "ElemFormat",
    "MXArray",
    "MXDual",
    "ScaleMode",
    "ceil_to_ue8m0",
    "compute_scales",
    "decode",
    "decode_table",
    "dequantize_mx",
    "e8m0_decode",
    "encode",
    "get_format",
    "pack_fp4",
    "per_block_cast_to_fp8",
    "per_token_cast_to_fp8",
    "quantize_mx",
    "quantize_mx_dual",
    "unpack_fp4",
]
