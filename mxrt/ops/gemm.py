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

Weight layouts (``GemmProblem.b_weight_layout``, device codes only): the best path that reads the layout in place
runs (the decode kernels, m <= 64); when none does, :func:`unshuffled_weight` copies the codes into a row-major
device workspace (one pass over the weight, CuPy's copy kernel) and the ordinary selection runs on that.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

from .._kinds import dtype_name
from ..errors import UnsupportedArchError
from ..problems.gemm import GemmProblem
from ..runtime import alloc
from ..runtime.arch import get_arch
from .gemm_paths import DeviceGemm, GemmPath, select_gemm_path

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
        p = dataclasses.replace(
            p, a_scale_layout=None, b_scale_layout=None, b_weight_layout=None, device=True, out=None
        )  # the host problem's b.data is already unshuffled
    if out is None:
        out = _empty((p.m, p.n), DEVICE_OUT_DTYPES[name])
    return DeviceGemm(p=p, out=out, arch=get_arch(), **d)


def unshuffled_weight(dg: DeviceGemm) -> DeviceGemm:
    """``dg`` with its weight codes (``p.b_weight_layout == "aiter16x16"``, ``[np_, kk]``) copied into a row-major
    ``[n, row bytes]`` device workspace: the inverse of MX_REFERENCE.md 3b' (``(n0, k0, k1, n1, k2) -> (n0, n1, k0,
    k1, k2)``) as one strided copy, plus a second one that drops the padding when n % 16 or the row bytes % 32."""
    import cupy

    p, codes = dg.p, dg.b_codes
    np_, kk = (int(v) for v in codes.shape)
    row = -(-p.k // 2) if p.b_fmt == "e2m1" else p.k
    plain = alloc.empty((np_, kk), "uint8")
    src = codes.reshape(np_ // 16, kk // 32, 2, 16, 16).transpose(0, 3, 1, 2, 4)
    cupy.copyto(plain.reshape(np_ // 16, 16, kk // 32, 2, 16), src)
    if (p.n, row) != (np_, kk):
        plain = cupy.ascontiguousarray(plain[: p.n, :row])
    return dataclasses.replace(dg, p=dataclasses.replace(p, b_weight_layout=None), b_codes=plain)


def resolve_gemm_path(dg: DeviceGemm) -> tuple[GemmPath, DeviceGemm]:
    """The path that runs ``dg`` and the :class:`DeviceGemm` it runs on: ``dg`` itself, or for a weight layout no
    path reads in place, :func:`unshuffled_weight` of it."""
    try:
        return select_gemm_path(dg), dg
    except UnsupportedArchError:
        if dg.p.b_weight_layout is None:
            raise
        plain = unshuffled_weight(dg)
        return select_gemm_path(plain), plain


def gemm_mx_gpu(p: GemmProblem) -> Any:
    """Run a validated GEMM on the GPU: CuPy in -> CuPy out (``p.out`` when given), numpy in -> numpy out."""
    dg = device_gemm(p, p.out if p.device else None)
    if p.is_empty:
        if dg.out.size:
            dg.out.fill(0)  # k == 0: zeros, no launch
    else:
        path, run_dg = resolve_gemm_path(dg)
        path.run(run_dg)  # writes dg.out (run_dg shares it)
    if p.device:
        return dg.out
    host = dg.out.get()
    return host.view(ml_dtypes.bfloat16) if dtype_name(p.out_dtype) == "bfloat16" else host
