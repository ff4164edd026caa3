"""The GPU twin of :func:`mxrt.gemm_mx`: :func:`gemm_mx_gpu` runs a validated :class:`~mxrt.problems.GemmProblem`.

Input (already validated by :func:`mxrt.problems.gemm_problem`):

- CuPy operands (``GemmProblem.device``): no transfer; scales are read in the layout they came in (row-major or a
  preshuffled ``*_scale_layout``: the kernels index it through kernels_src/common/scale_layouts.h). The result is a
  CuPy array ``[m, n]`` (float32, float16, or uint16 holding bfloat16 bits, since CuPy has no bfloat16), written
  into ``out`` when given.
- numpy operands with ``backend="gpu"`` (or ``"auto"`` with a GPU): codes and the logical row-major scales are
  uploaded, the GEMM runs, the result is downloaded (numpy of ``out_dtype``).

Then :class:`~mxrt.ops.gemm_paths.DeviceGemm` -> :func:`~mxrt.ops.gemm_paths.select_gemm_path` -> ``path.run``, all
on CuPy's current stream with no host synchronisation (empty problems launch nothing and give zeros).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

from .._kinds import dtype_name
from ..problems.gemm import GemmProblem
from ..runtime import alloc
from ..runtime.arch import get_arch
from .gemm_paths import DeviceGemm, select_gemm_path

OP = "gemm_mx"
#: CuPy dtype of the device result per out_dtype (bfloat16 bits travel as uint16)
DEVICE_OUT_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}


def _empty(shape: tuple[int, ...], dtype: str) -> Any:
    """Output allocation (poisoned inside mxrt.runtime.debug(poison=...))."""
    return alloc.empty(shape, dtype)


def _upload(x: Any) -> Any:
    import cupy

    return cupy.asarray(np.ascontiguousarray(np.asarray(x, dtype=np.uint8)))


def device_gemm(p: GemmProblem, out: Any = None) -> DeviceGemm:
    """The :class:`DeviceGemm` of a validated problem: CuPy buffers as given, or uploaded host operands."""
    name = dtype_name(p.out_dtype)
    if p.device:
        d = dict(a_codes=p.a.data, b_codes=p.b.data, a_scales=p.a.scales, b_scales=p.b.scales)
    else:  # host operands: the logical row-major scales travel (a preshuffled host buffer is not re-read)
        d = dict(a_codes=_upload(p.a.data), b_codes=_upload(p.b.data))
        d.update(a_scales=_upload(p.a.scales), b_scales=_upload(p.b.scales))
        p = dataclasses.replace(p, a_scale_layout=None, b_scale_layout=None, device=True, out=None)
    if out is None:
        out = _empty((p.m, p.n), DEVICE_OUT_DTYPES[name])
    return DeviceGemm(p=p, out=out, arch=get_arch(), **d)


def gemm_mx_gpu(p: GemmProblem) -> Any:
    """Run a validated GEMM on the GPU: CuPy in -> CuPy out (``p.out`` when given), numpy in -> numpy out."""
    dg = device_gemm(p, p.out if p.device else None)
    if p.is_empty:
        if dg.out.size:
            dg.out.fill(0)  # k == 0: zeros, no launch
    else:
        select_gemm_path(dg).run(dg)
    if p.device:
        return dg.out
    host = dg.out.get()
    return host.view(ml_dtypes.bfloat16) if dtype_name(p.out_dtype) == "bfloat16" else host
