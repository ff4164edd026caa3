"""GPU ops: validate -> allocate -> dispatch -> launch. Importing this package registers the ops into
:data:`mxrt._backend.GPU_OPS`; it imports without cupy (cupy is imported when an op runs)."""

from . import gemm, gemm_amd, gemm_generic, gemm_paths, gemm_sm90, grouped, layouts, moe, quant

__all__ = ["gemm", "gemm_amd", "gemm_generic", "gemm_paths", "gemm_sm90", "grouped", "layouts", "moe", "quant"]
