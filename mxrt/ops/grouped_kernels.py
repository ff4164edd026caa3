"""Kernel specs, variants and dispatch of the grouped quantizers (kernels_src/quant/quantize_mx_grouped*.hip,
quantize_mx_dual_grouped.hip), launched by mxrt/ops/grouped.py. The most groups a launch takes is
mxrt.codes.GROUPED_MAX_GROUPS (MXRT_MAX_GROUPS of the generated mx_codes.h)."""

from __future__ import annotations

from ..codes import FMT_CODES, IN_DTYPE_CODES
from ..runtime.kernel_spec import KernelSpec, define_grid

QUANT_GROUPED_THREADS = 256
#: persistent grids of quantize_mx_grouped_rowcol / quantize_mx_dual_grouped: CTAs per SM (NVIDIA) / CU (AMD), the
#: kernels' __launch_bounds__ minimum (QRC_MIN_BLOCKS / QDG_MIN_BLOCKS), each walking tiles with the next one's loads
#: in flight. Both are latency-bound (ncu, session 16 call 6: achieved occupancy 35% with 3 CTAs); 4 CTAs of 64
#: registers fill the register file: +8-9% (dual) and +6-7% (row+col, whose (256, 4) builds spill 8-24 bytes) on an
#: H200 (session 16 call 10)
PERSISTENT_CTAS = {"nvidia": 4, "amd": 2}


#: 32-row tiles per unit of those kernels (MXG_SUB of mx_group.h): a unit's column side leaves as whole lines (1 on
#: AMD, where 4 pushed some builds past the SGPRs)
PERSISTENT_SUB = {"nvidia": 4, "amd": 1}


def persistent_ctas(target: str) -> int:
    """Resident CTAs per SM / CU that the persistent grouped quantizers are built for on ``target``."""
    return PERSISTENT_CTAS["amd" if target.startswith("gfx") else "nvidia"]


def persistent_sub(target: str) -> int:
    """32-row tiles per unit (MXG_SUB) of the persistent grouped quantizers' builds for ``target``."""
    return PERSISTENT_SUB["amd" if target.startswith("gfx") else "nvidia"]


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
