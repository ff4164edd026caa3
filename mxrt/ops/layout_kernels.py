"""Kernel specs, variants and dispatch of the scale preshuffles (kernels_src/layout/preshuffle_scales.hip,
unshuffle_scales.hip), launched by mxrt/ops/layouts.py. LAYOUT is a preshuffled code of
mxrt.codes.SCALE_LAYOUT_CODES (1..4); WIDE=1 is the uint32 form of turbo16x4."""

from __future__ import annotations

from ..codes import SCALE_LAYOUT_CODES
from ..runtime.kernel_spec import KernelSpec, defines

LAYOUT_THREADS = 256
_LAYOUT_VARIANTS = tuple(
    defines(LAYOUT=code, WIDE=wide, THREADS=LAYOUT_THREADS)
    for name, code in SCALE_LAYOUT_CODES.items()
    if name is not None
    for wide in ((0, 1) if name == "turbo16x4" else (0,))
)

PRESHUFFLE_SCALES = KernelSpec(
    symbol="preshuffle_scales",
    file="layout/preshuffle_scales.hip",
    required=("LAYOUT", "THREADS", "WIDE"),
    variants=_LAYOUT_VARIANTS,
)

UNSHUFFLE_SCALES = KernelSpec(
    symbol="unshuffle_scales",
    file="layout/unshuffle_scales.hip",
    required=("LAYOUT", "THREADS", "WIDE"),
    variants=_LAYOUT_VARIANTS,
)

SPECS = (PRESHUFFLE_SCALES, UNSHUFFLE_SCALES)
DISPATCH = {
    "preshuffle_scales": {"generic": PRESHUFFLE_SCALES},
    "unshuffle_scales": {"generic": UNSHUFFLE_SCALES},
}
