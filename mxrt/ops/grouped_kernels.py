"""Kernel specs, variants and dispatch of the grouped quantizers (kernels_src/quant/quantize_mx_grouped*.hip,
quantize_mx_dual_grouped.hip), launched by mxrt/ops/grouped.py. The most groups a launch takes is
mxrt.codes.GROUPED_MAX_GROUPS (MXRT_MAX_GROUPS of the generated mx_codes.h)."""

from __future__ import annotations

from ..codes import FMT_CODES, IN_DTYPE_CODES
from ..runtime.kernel_spec import KernelSpec, define_grid

QUANT_GROUPED_THREADS = 256
#: persistent grids of quantize_mx_dual_grouped / quantize_mx_grouped_rowcol: CTAs per SM / CU (the kernels'
#: __launch_bounds__ minimum, QDG_MIN_BLOCKS / QRC_MIN_BLOCKS), each walking tiles with the next one's loads in flight
DUAL_GROUPED_CTAS_PER_CU = 3
ROWCOL_CTAS_PER_CU = 3

QUANTIZE_MX_GROUPED_OFFSETS = KernelSpec(
    symbol="quantize_mx_grouped_offsets",
    file="quant/quantize_mx_grouped_offsets.hip",
    required=("THREADS",),
    variants=define_grid(THREADS=(QUANT_GROUPED_THREADS,)),
)

#: quarter blocks in flight per thread in quantize_mx_grouped (define UNROLL); the op uses the default
QUANT_GROUPED_UNROLLS = (1, 2)

QUANTIZE_MX_GROUPED = KernelSpec(
    symbol="quantize_mx_grouped",
    file="quant/quantize_mx_grouped.hip",
    required=("FMT", "IN_DTYPE", "THREADS", "UNROLL"),
    variants=define_grid(
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        THREADS=(QUANT_GROUPED_THREADS,),
        UNROLL=QUANT_GROUPED_UNROLLS,
    ),
)

QUANTIZE_MX_GROUPED_ROWCOL = KernelSpec(
    symbol="quantize_mx_grouped_rowcol",
    file="quant/quantize_mx_grouped_rowcol.hip",
    required=("FMT", "IN_DTYPE", "THREADS"),
    variants=define_grid(
        FMT=tuple(FMT_CODES.values()), IN_DTYPE=tuple(IN_DTYPE_CODES.values()), THREADS=(QUANT_GROUPED_THREADS,)
    ),
)

QUANTIZE_MX_DUAL_GROUPED = KernelSpec(
    symbol="quantize_mx_dual_grouped",
    file="quant/quantize_mx_dual_grouped.hip",
    required=("BLOCK_2D", "FMT", "IN_DTYPE", "THREADS"),
    variants=define_grid(
        BLOCK_2D=(0, 1),
        FMT=tuple(FMT_CODES.values()),
        IN_DTYPE=tuple(IN_DTYPE_CODES.values()),
        THREADS=(QUANT_GROUPED_THREADS,),
    ),
)

SPECS = (QUANTIZE_MX_GROUPED_OFFSETS, QUANTIZE_MX_GROUPED, QUANTIZE_MX_GROUPED_ROWCOL, QUANTIZE_MX_DUAL_GROUPED)
DISPATCH = {
    "quantize_mx_grouped_offsets": {"generic": QUANTIZE_MX_GROUPED_OFFSETS},
    "quantize_mx_grouped": {"generic": QUANTIZE_MX_GROUPED},
    "quantize_mx_grouped_rowcol": {"generic": QUANTIZE_MX_GROUPED_ROWCOL},
    "quantize_mx_dual_grouped": {"generic": QUANTIZE_MX_DUAL_GROUPED},
}
