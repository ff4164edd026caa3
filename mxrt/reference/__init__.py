"""Float64 references and accuracy metrics (numpy only)."""

from .gemm import GEMM_BLOCK, GEMM_FORMAT_PAIRS, GEMM_OUT_DTYPES, GemmProblem, gemm_mx, gemm_problem
from .metrics import calc_diff, max_abs_diff, relative_error, snr_db

__all__ = [
    "GEMM_BLOCK",
    "GEMM_FORMAT_PAIRS",
    "GEMM_OUT_DTYPES",
    "GemmProblem",
    "calc_diff",
    "gemm_mx",
    "gemm_problem",
    "max_abs_diff",
    "relative_error",
    "snr_db",
]
