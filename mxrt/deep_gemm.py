"""DeepGEMM-compatible entry points: ``import mxrt.deep_gemm as deep_gemm`` in place of ``import deep_gemm``.

The grouped FP8 GEMMs with DeepGEMM's names, argument order, shapes and in-place semantics (``d`` written, None
returned), on mxrt's grouped MX GEMMs (see :mod:`mxrt.api.deep_gemm` for the scale recipes and what runs where),
plus DeepGEMM's layout helpers and casts that mxrt already implements.
"""

from .api.deep_gemm import (
    MK_ALIGNMENT,
    k_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from .api.layouts import ceil_to_ue8m0
from .api.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

#: DeepGEMM's legacy alias (``fp8_m_grouped_gemm_nt_masked``).
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked


def get_mk_alignment_for_contiguous_layout() -> int:
    """DeepGEMM's M/K alignment of the contiguous layout: 128 (``kLegacyMKAlignmentForContiguousLayout``)."""
    return MK_ALIGNMENT


get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout

__all__ = [
    "ceil_to_ue8m0",
    "fp8_m_grouped_gemm_nt_masked",
    "get_k_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout",
    "get_mk_alignment_for_contiguous_layout",
    "k_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "per_block_cast_to_fp8",
    "per_token_cast_to_fp8",
]
