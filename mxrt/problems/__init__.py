"""Problem descriptions: user arguments validated once into frozen objects that every backend reads (numpy only).

Sits above ``formats`` and ``layouts`` and below ``reference``: the float64 twins, the numpy backend and the GPU
paths all take a :class:`GemmProblem` (dense), or a :class:`MoeGemmProblem` (MoE decode, ``mxrt.moe_gemm_mx``).
"""

from .gemm import GEMM_BLOCK, GEMM_FORMAT_PAIRS, GEMM_OUT_DTYPES, GemmProblem, gemm_problem
from .moe_gemm import MOE_GEMM_OUT_DTYPES, MoeGemmProblem, moe_gemm_problem

__all__ = [
    "GEMM_BLOCK",
    "GEMM_FORMAT_PAIRS",
    "GEMM_OUT_DTYPES",
    "MOE_GEMM_OUT_DTYPES",
    "GemmProblem",
    "MoeGemmProblem",
    "gemm_problem",
    "moe_gemm_problem",
]
