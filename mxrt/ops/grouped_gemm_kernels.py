"""Kernel specs and variants of the grouped MX GEMMs on the generic path (kernels_src/gemm/gemm_mx_grouped_generic.hip,
launched by mxrt/ops/grouped_gemm.py): forward / dgrad by group lengths (MODE 0), DeepGEMM's contiguous layout of
per-row group ids (MODE 1) and masked layout (MODE 2), and the variable-K wgrad (MODE 3). The main loop is the dense
generic kernel's (kernels_src/gemm/gemm_generic_tile.h)."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import KernelSpec, defines
from .gemm_kernels import GEMM_GENERIC_THREADS

#: MODE define per problem kind (mxrt.problems.grouped_gemm.GROUPED_KINDS)
GROUPED_GEMM_MODES = {"lens": 0, "indices": 1, "masked": 2, "wgrad": 3}
#: DeepGEMM's m-grouped layouts (modes 1, 2) take fp8 operands and write bfloat16 (as DeepGEMM's kernels do)
DEEPGEMM_PAIRS = tuple(p for p in GEMM_FORMAT_PAIRS if "e2m1" not in p)
WGRAD_OUT = ("float32", "bfloat16")

GEMM_MX_GROUPED_GENERIC = KernelSpec(
    symbol="gemm_mx_grouped_generic",
    file="gemm/gemm_mx_grouped_generic.hip",
    required=("ACCUM", "FMT_A", "FMT_B", "MODE", "OUT_DTYPE", "THREADS"),
    variants=(
        *(
            defines(
                ACCUM=0, FMT_A=FMT_CODES[fa], FMT_B=FMT_CODES[fb], MODE=0, OUT_DTYPE=od, THREADS=GEMM_GENERIC_THREADS
            )
            for fa, fb in GEMM_FORMAT_PAIRS
            for od in GEMM_OUT_DTYPE_CODES.values()
        ),
        *(
            defines(
                ACCUM=0,
                FMT_A=FMT_CODES[fa],
                FMT_B=FMT_CODES[fb],
                MODE=mode,
                OUT_DTYPE=GEMM_OUT_DTYPE_CODES["bfloat16"],
                THREADS=GEMM_GENERIC_THREADS,
            )
            for fa, fb in DEEPGEMM_PAIRS
            for mode in (1, 2)
        ),
        *(
            defines(
                ACCUM=acc,
                FMT_A=FMT_CODES[fa],
                FMT_B=FMT_CODES[fb],
                MODE=3,
                OUT_DTYPE=GEMM_OUT_DTYPE_CODES[od],
                THREADS=GEMM_GENERIC_THREADS,
            )
            for fa, fb in GEMM_FORMAT_PAIRS
            for od in WGRAD_OUT
            for acc in (0, 1)
        ),
    ),
)

SPECS = (GEMM_MX_GROUPED_GENERIC,)
DISPATCH = {"grouped_gemm_mx": {"generic": GEMM_MX_GROUPED_GENERIC}}
