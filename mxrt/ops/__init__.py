"""GPU ops: validate -> allocate -> dispatch -> launch. Importing this package registers the ops into
:data:`mxrt._backend.GPU_OPS`; it imports without cupy (cupy is imported when an op runs)."""

from . import gemm, gemm_amd, gemm_generic, gemm_paths, gemm_sm90, grouped, layouts, moe, quant
from .kernels import ALL_SPECS, DISPATCH  # every family's kernel specs (ops/*_kernels.py)

__all__ = ["gemm", "gemm_amd", "gemm_generic", "gemm_paths", "gemm_sm90", "grouped", "layouts", "moe", "quant"]
__all__ += ["ALL_SPECS", "DISPATCH"]
