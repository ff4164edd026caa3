"""Float64 references and accuracy metrics (numpy only)."""

from .gemm import gemm_f64, gemm_mx, gemm_numpy, round_to
from .metrics import calc_diff, max_abs_diff, relative_error, snr_db
from .moe_gemm import moe_gemm_f64, moe_gemm_numpy

__all__ = [
    "calc_diff",
    "gemm_f64",
    "gemm_mx",
    "gemm_numpy",
    "max_abs_diff",
    "moe_gemm_f64",
    "moe_gemm_numpy",
    "relative_error",
    "round_to",
    "snr_db",
]
