"""Float64 references and accuracy metrics (numpy only)."""

from .metrics import calc_diff, max_abs_diff, relative_error, snr_db

__all__ = ["calc_diff", "max_abs_diff", "relative_error", "snr_db"]
