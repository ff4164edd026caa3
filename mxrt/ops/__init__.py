"""GPU ops: validate -> allocate -> dispatch -> launch. Importing this package registers the ops into
:data:`mxrt._backend.GPU_OPS`; it imports without cupy (cupy is imported when an op runs)."""

from . import gemm_amd, gemm_paths, grouped, layouts, moe, quant

__all__ = ["gemm_amd", "gemm_paths", "grouped", "layouts", "moe", "quant"]
