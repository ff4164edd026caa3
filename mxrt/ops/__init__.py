"""GPU ops: validate -> allocate -> dispatch -> launch. Each public op in :mod:`mxrt.api` calls its twin here by
name; this package imports without cupy (cupy is imported when an op runs)."""

from . import (
    dequant,
    gemm,
    gemm_amd,
    gemm_cublas,
    gemm_decode,
    gemm_decode_amd,
    gemm_decode_wg,
    gemm_generic,
    gemm_paths,
    gemm_sm90,
    gemm_sm90_bf16,
    gemm_sm90_ws,
    grouped,
    layouts,
    moe,
    moe_combine,
    quant,
)
from .kernels import ALL_SPECS, DISPATCH  # every family's kernel specs (ops/*_kernels.py)

__all__ = [
    "dequant",
    "gemm",
    "gemm_amd",
    "gemm_cublas",
    "gemm_decode",
    "gemm_decode_amd",
    "gemm_decode_wg",
    "gemm_generic",
    "gemm_paths",
    "gemm_sm90",
    "gemm_sm90_bf16",
    "gemm_sm90_ws",
    "grouped",
    "layouts",
    "moe",
    "moe_combine",
    "quant",
]
__all__ += ["ALL_SPECS", "DISPATCH"]
