"""Kernel specs, variants and dispatch of the MX quantizers (kernels_src/quant/quantize_mx_rowwise.hip,
quantize_mx_dual.hip, transpose_u8.hip), launched by mxrt/ops/quant.py, and of the dequantizer (dequantize_mx.hip,
mxrt/ops/dequant.py)."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES, IN_DTYPE_CODES, SCALE_LAYOUT_CODES, SCALE_LAYOUT_TURBO16X4_U32
from ..runtime.kernel_spec import KernelSpec, define_grid

QUANT_ROWWISE_THREADS = 256
QUANT_DUAL_THREADS = 256
DEQUANT_THREADS = 256
#: elements per chunk of the dequantizer (CH; 16 measured 8-10% faster than 8, session 10 call 4)
DEQUANT_CH = 16

# The fused scale layouts (SCALE_LAYOUT 1..4) only change where a scale byte is stored, the same code for every
# element format: the compile check builds them with e4m3 and e2m1 (the MXFP8 / MXFP4 formats GEMMs read) on
# every input dtype, and every format with plain scales, instead of the full 5 x 5 x 3 grid (a third of the time).
_LAYOUTS = tuple(v for v in SCALE_LAYOUT_CODES.values() if v)
_FUSED_FMTS = (FMT_CODES["e4m3"], FMT_CODES["e2m1"])
_PLAIN = SCALE_LAYOUT_CODES[None]

QUANTIZE_MX_ROWWISE = KernelSpec(
    symbol="quantize_mx_rowwise",
    file="quant/quantize_mx_rowwise.hip",
    required=("FMT", "IN_DTYPE", "SCALE_LAYOUT", "THREADS"),
    variants=define_grid(
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=(_PLAIN,),
        THREADS=(QUANT_ROWWISE_THREADS,),
    )
    + define_grid(
        FMT=_FUSED_FMTS,
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=_LAYOUTS,
        THREADS=(QUANT_ROWWISE_THREADS,),
    ),
)

QUANTIZE_MX_DUAL = KernelSpec(
    symbol="quantize_mx_dual",
    file="quant/quantize_mx_dual.hip",
    required=("BLOCK_2D", "FMT", "IN_DTYPE", "SCALE_LAYOUT", "THREADS"),
    variants=define_grid(
        BLOCK_2D=(0, 1),
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=(_PLAIN,),
        THREADS=(QUANT_DUAL_THREADS,),
    )
    + define_grid(
        BLOCK_2D=(0, 1),
        FMT=_FUSED_FMTS,
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        SCALE_LAYOUT=_LAYOUTS,
        THREADS=(QUANT_DUAL_THREADS,),
    ),
)

# The transpose pass of the scales stored transposed (flag SCALES_T) by quantize_mx_dual and the row+col grouped
# quantizer (mxrt/ops/grouped.py): one build.
TRANSPOSE_U8_THREADS = 256
TRANSPOSE_U8 = KernelSpec(
    symbol="transpose_u8",
    file="quant/transpose_u8.hip",
    required=("THREADS",),
    variants=define_grid(THREADS=(TRANSPOSE_U8_THREADS,)),
)

# Dequantize: every format and output dtype with plain scales; the layouts (only where a scale byte is read) with the
# MX GEMM formats e4m3 / e2m1; GATE=1 (the sm90_cublas GEMM's bf16 operands) for the three GEMM formats on every layout.
_GEMM_FMTS = (FMT_CODES["e4m3"], FMT_CODES["e5m2"], FMT_CODES["e2m1"])
_READ_LAYOUTS = (*_LAYOUTS, SCALE_LAYOUT_TURBO16X4_U32)
DEQUANTIZE_MX = KernelSpec(
    symbol="dequantize_mx",
    file="quant/dequantize_mx.hip",
    required=("CH", "EFMT", "GATE", "OUT_DTYPE", "SL", "THREADS"),
    variants=define_grid(
        CH=(DEQUANT_CH,),
        EFMT=tuple(FMT_CODES.values()),
        GATE=(0,),
        OUT_DTYPE=tuple(GEMM_OUT_DTYPE_CODES.values()),
        SL=(_PLAIN,),
        THREADS=(DEQUANT_THREADS,),
    )
    + define_grid(
        CH=(DEQUANT_CH,),
        EFMT=_FUSED_FMTS,
        GATE=(0,),
        OUT_DTYPE=tuple(GEMM_OUT_DTYPE_CODES.values()),
        SL=_READ_LAYOUTS,
        THREADS=(DEQUANT_THREADS,),
    )
    + define_grid(
        CH=(DEQUANT_CH,),
        EFMT=_GEMM_FMTS,
        GATE=(1,),
        OUT_DTYPE=(GEMM_OUT_DTYPE_CODES["bfloat16"],),
        SL=(_PLAIN, *_READ_LAYOUTS),
        THREADS=(DEQUANT_THREADS,),
    ),
)

SPECS = (QUANTIZE_MX_ROWWISE, QUANTIZE_MX_DUAL, TRANSPOSE_U8, DEQUANTIZE_MX)
DISPATCH = {
    "quantize_mx": {"generic": QUANTIZE_MX_ROWWISE},
    "quantize_mx_dual": {"generic": QUANTIZE_MX_DUAL},
    "transpose_u8": {"generic": TRANSPOSE_U8},
    "dequantize_mx": {"generic": DEQUANTIZE_MX},
}
