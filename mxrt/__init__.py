"""mxrt: numpy-first, portable OCP Microscaling (MX) numerics, layouts and kernels.

Layers (dependencies point one way): formats -> layouts -> reference -> runtime -> ops -> cli.
``mxrt.formats``, ``mxrt.layouts`` and ``mxrt.reference`` import with numpy and ml_dtypes alone.
"""

from ._version import __version__
from .errors import CompileError, DtypeError, LayoutError, MxrtError, ShapeError, UnsupportedArchError

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

# reference: accuracy metrics
from .reference import calc_diff, relative_error, snr_db

__all__ = [
    "FORMATS",
    "CompileError",
    "DtypeError",
    "LayoutError",
    "MXArray",
    "MXDual",
    "MxrtError",
    "ScaleMode",
    "ShapeError",
    "UnsupportedArchError",
    "__version__",
    "calc_diff",
    "ceil_to_ue8m0",
    "decode",
    "dequantize_mx",
    "e8m0_decode",
    "encode",
    "pack_fp4",
    "per_block_cast_to_fp8",
    "per_token_cast_to_fp8",
    "quantize_mx",
    "quantize_mx_dual",
    "relative_error",
    "snr_db",
    "unpack_fp4",
]
