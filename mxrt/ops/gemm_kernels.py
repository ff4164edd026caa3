"""Kernel specs and variants of the generic MX GEMM path (kernels_src/gemm/gemm_mx_generic.hip, launched by
mxrt/ops/gemm_generic.py) and of the split-K reduce every path shares (gemm_mx_splitk_reduce.hip,
mxrt/ops/gemm_splitk.py). The GEMM families choose among themselves through GemmPaths (mxrt/ops/gemm_paths.py);
the dispatch row here names the generic fallback's kernel."""

from __future__ import annotations

from ..codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime.kernel_spec import KernelSpec, define_grid, defines

GEMM_GENERIC_THREADS = 256
#: (block_m, block_n) of gemm_mx_generic's tile (BM, BN in the kernel)
GEMM_GENERIC_TILE = (128, 64)
GEMM_REDUCE_THREADS = 256

GEMM_MX_GENERIC = KernelSpec(
    symbol="gemm_mx_generic",
    file="gemm/gemm_mx_generic.hip",
    required=("ATOMIC", "FMT_A", "FMT_B", "OUT_DTYPE", "THREADS"),
    # every format pair with every output dtype and both accumulation modes (ATOMIC=0 with a 16-bit dtype is the
    # split_k == 1 direct store; fp32 covers the workspace slices)
    variants=tuple(
        defines(ATOMIC=at, FMT_A=FMT_CODES[fa], FMT_B=FMT_CODES[fb], OUT_DTYPE=od, THREADS=GEMM_GENERIC_THREADS)
        for fa, fb in GEMM_FORMAT_PAIRS
        for od in GEMM_OUT_DTYPE_CODES.values()
        for at in (0, 1)
    ),
)

GEMM_MX_SPLITK_REDUCE = KernelSpec(
    symbol="gemm_mx_splitk_reduce",
    file="gemm/gemm_mx_splitk_reduce.hip",
    required=("OUT_DTYPE", "THREADS"),
    variants=define_grid(OUT_DTYPE=tuple(GEMM_OUT_DTYPE_CODES.values()), THREADS=(GEMM_REDUCE_THREADS,)),
)

SPECS = (GEMM_MX_GENERIC, GEMM_MX_SPLITK_REDUCE)
DISPATCH = {
    "gemm_mx": {"generic": GEMM_MX_GENERIC},
    "gemm_mx_splitk_reduce": {"generic": GEMM_MX_SPLITK_REDUCE},
}
