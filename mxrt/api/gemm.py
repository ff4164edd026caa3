"""``mxrt.gemm_mx``: dense MX GEMM ``d = a @ b.T``, numpy twin or GPU path chosen explicitly here.

Flow: operands in (:mod:`mxrt.api.interop`, zero-copy) -> :func:`mxrt.problems.gemm_problem` validates once
into a frozen :class:`~mxrt.problems.GemmProblem` -> :func:`mxrt.api.dispatch.use_gpu` ->
:func:`mxrt.reference.gemm_numpy` or :func:`mxrt.ops.gemm.gemm_mx_gpu` (which runs the GEMM path
:func:`mxrt.ops.gemm_paths.select_gemm_path` picks) -> the result in the caller's kind.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from typing import Any

import numpy as np

from .._kinds import dtype_name, is_device_array
from ..config import gemm_path_override
from ..formats import MXArray
from ..ops import gemm as gemm_ops
from ..ops.gemm_paths import DeviceGemm, PreparedGemm, plans_generation, select_gemm_path
from ..problems.gemm import GemmProblem, gemm_problem
from ..reference.gemm import gemm_numpy
from ..runtime import alloc
from ..runtime.arrays import torch_on_legacy_streams
from ..runtime.graph_memory import graph_safe
from . import interop
from .dispatch import use_gpu

OP = "gemm_mx"

# ---- launch plans: the small-problem dispatch (issue 9, host overhead) ------------------------------------------
# A call on CuPy-backed MXArrays with no ``out`` is described by a key of everything its validation and path choice
# read (formats, logical shapes, the buffers' dtypes / shapes / strides / 16-byte alignment / device, the scalar
# arguments with their types, the forced path). A key seen before reuses the validated problem (with its buffers
# stripped), the chosen path and, where the path has one, its prepared launches (only the pointers change): no
# re-validation, no path search, no per-call launch set-up. Plans made before a path was registered or a tuned
# table reloaded are dropped (``gemm_paths.plans_generation``).
#
# An operand's part of the key is kept on the MXArray itself (a frozen dataclass: its fields cannot change) with
# the buffers it was read from; it is reused while ``data`` / ``scales`` are the same objects with the same dtype,
# shape, strides and pointer (a shape can change in place; a copied MXArray carries the key of its original).
#
# CUDA torch tensors in (MXArray fields from quantize_mx / mxrt.convert): the same plans, keyed on the tensors'
# metadata; a planned call reads their pointers and returns a torch tensor allocated by torch (the unplanned route
# returns a CuPy pool buffer exported through DLPack: same values, shape, dtype and strides). Only while both
# libraries are on the legacy default stream (runtime.arrays.torch_on_legacy_streams, the condition under which
# the unplanned route also shares tensors without events) and outside mxrt.runtime.debug (poisoned outputs come
# from CuPy's pool); otherwise the unplanned route runs.


@dataclasses.dataclass(frozen=True)
class _Plan:
    p: GemmProblem  # validated, without buffers (a, b, scales, out are None)
    path: Any
    arch: Any
    out_dtype: Any  # numpy dtype of the CuPy result (bfloat16 bits as uint16)
    out_name: str  # "bfloat16", "float16" or "float32": the torch dtype of a torch result
    runner: PreparedGemm | None  # the path's prepared form, or None (every call through path.run)
    generation: int


_PLANS: dict[tuple, _Plan] = {}
_PLANS_KEPT = 512
_PLANS_LOCK = threading.Lock()
_KEY_ATTR = "_mxrt_plan_key"  # where an MXArray keeps its operand key (never part of its fields or repr)


def _operand_key(x: Any) -> tuple | None:
    """``("cupy" | "torch", ...)``: the operand's part of the plan key, or None (no plan for it)."""
    if type(x) is not MXArray:
        return None
    d, s = x.data, x.scales
    c = x.__dict__.get(_KEY_ATTR)
    if c is not None and c[0] is d and c[1] is s:  # (a deep copy or an unpickled MXArray fails the pointer test)
        if c[2] == "cupy":
            if c[3] == d.shape and c[4] == d.strides and c[5] == d.dtype and c[6] == s.shape and c[7] == s.strides:
                if c[8] == s.dtype and c[9] == d.data.ptr and c[10] == s.data.ptr:
                    return c[11]
        elif c[3] == d.shape and c[4] == d.stride() and c[5] == d.dtype and c[6] == s.shape and c[7] == s.stride():
            if c[8] == s.dtype and c[9] == d.data_ptr() and c[10] == s.data_ptr():
                return c[11]
    shape = x.shape
    if type(shape) is not tuple or any(type(v) is not int for v in shape):
        return None
    if type(x.block_size) is not int or type(x.axis) is not int or type(x.fmt) is not str:
        return None
    head = (x.fmt, x.block_size, x.axis, shape, x.scale_layout)
    if is_device_array(d) and is_device_array(s):
        dm, sm = d.data, s.data
        key = (
            "cupy", *head,
            d.dtype, d.shape, d.strides, dm.ptr & 15, dm.device_id,
            s.dtype, s.shape, s.strides, sm.ptr & 15, sm.device_id,
        )  # fmt: skip
        meta = ("cupy", d.shape, d.strides, d.dtype, s.shape, s.strides, s.dtype, dm.ptr, sm.ptr)
    else:
        torch = sys.modules.get("torch")
        if torch is None or not (isinstance(d, torch.Tensor) and isinstance(s, torch.Tensor)):
            return None
        if not (d.is_cuda and s.is_cuda):
            return None
        key = (
            "torch", *head,
            d.dtype, tuple(d.shape), d.stride(), d.data_ptr() & 15, d.get_device(),
            s.dtype, tuple(s.shape), s.stride(), s.data_ptr() & 15, s.get_device(),
        )  # fmt: skip
        meta = ("torch", d.shape, d.stride(), d.dtype, s.shape, s.stride(), s.dtype, d.data_ptr(), s.data_ptr())
    object.__setattr__(x, _KEY_ATTR, (d, s, *meta, key))
    return key


def _plan_key(a, b, out_dtype, split_k, deterministic, out, backend, a_scale_layout, b_scale_layout) -> tuple | None:
    if out is not None or a_scale_layout is not None or b_scale_layout is not None:
        return None
    if type(backend) is not str or backend not in ("auto", "gpu"):
        return None
    if type(out_dtype) is not str or type(split_k) is not int or type(deterministic) is not bool:
        return None
    ka = _operand_key(a)
    if ka is None:
        return None
    kb = _operand_key(b)
    if kb is None or kb[0] != ka[0]:
        return None
    return (ka, kb, out_dtype, split_k, deterministic, gemm_path_override())


def _run_plan(plan: _Plan, a: MXArray, b: MXArray) -> Any:
    p = plan.p
    out = alloc.empty((p.m, p.n), plan.out_dtype)
    r = plan.runner
    if r is not None and r.usable():
        r.run(a.data.data.ptr, b.data.data.ptr, a.scales.data.ptr, b.scales.data.ptr, out.data.ptr)
    else:
        plan.path.run(DeviceGemm(p=p, a_codes=a.data, b_codes=b.data, a_scales=a.scales, b_scales=b.scales, out=out,
                                 arch=plan.arch))  # fmt: skip
    return out


def _run_plan_torch(plan: _Plan, a: MXArray, b: MXArray) -> Any:
    """A planned call on CUDA torch tensors, or None where the unplanned route must run (see above)."""
    r = plan.runner
    if r is None or not r.usable() or alloc.current_debug() is not None:
        return None
    torch = sys.modules["torch"]
    dev = a.data.get_device()
    if not torch_on_legacy_streams(torch, dev):
        return None
    p = plan.p
    out = torch.empty((p.m, p.n), dtype=getattr(torch, plan.out_name), device=dev)
    r.run(a.data.data_ptr(), b.data.data_ptr(), a.scales.data_ptr(), b.scales.data_ptr(), out.data_ptr())
    return out


def _planned_run(key: tuple, p: GemmProblem) -> Any:
    """First call of a key: run it through the path search and keep the plan."""
    generation = plans_generation()
    dg = gemm_ops.device_gemm(p)
    path = select_gemm_path(dg)
    path.run(dg)
    runner = path.prepare(dg) if path.prepare is not None else None
    bare = dataclasses.replace(p, a=None, b=None, a_scales_given=None, b_scales_given=None, out=None)
    out_dtype = np.dtype(gemm_ops.DEVICE_OUT_DTYPES[dtype_name(p.out_dtype)])
    with _PLANS_LOCK:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = _Plan(bare, path, dg.arch, out_dtype, dtype_name(p.out_dtype), runner, generation)
    return dg.out


def clear_plans() -> None:
    """Forget every cached launch plan (tests; a path registered after a plan was made)."""
    with _PLANS_LOCK:
        _PLANS.clear()


def _no_reason() -> None:
    return None  # per-problem support is decided by the GEMM paths (select_gemm_path)


@graph_safe
def gemm_mx(
    a: Any,
    b: Any,
    *,
    out_dtype: str = "bfloat16",
    split_k: int = 1,
    deterministic: bool = True,
    out: Any = None,
    backend: str = "auto",
    a_scale_layout: str | None = None,
    b_scale_layout: str | None = None,
    b_weight_layout: str | None = None,
) -> Any:
    """Dense MX GEMM ``d = a @ b.T`` ("NT"): both operands MX-quantized along K, one E8M0 scale per 32.

    Parameters
    ----------
    a : MXArray ``[m, k]`` quantized along axis 1 (K) with ``block_size=32``, or raw pieces
        ``(codes, scales, fmt)`` / ``(codes, scales, fmt, k)``: ``codes`` uint8 ``[m, k]`` (fp8; float8 views
        accepted) or packed e2m1 ``[m, ceil(k/2)]`` (even k in the low nibble; without the 4th item
        ``k = 2 * codes.shape[1]``), ``scales`` E8M0 uint8 (or float8_e8m0fnu) ``[m, ceil(k/32)]``, or that matrix
        preshuffled into ``a_scale_layout``. Arrays may be numpy, CuPy, torch (CPU or CUDA) or JAX, read
        zero-copy; both operands must live on the same side (host or GPU).
    b : the same for ``[n, k]``.
    out_dtype : ``"bfloat16"`` (default), ``"float16"`` or ``"float32"``.
    split_k : K is split into ``split_k`` ranges on 32-element scale boundaries
        (``1 <= split_k <= max(1, ceil(k/32))``; ranges in ``GemmProblem.k_ranges``).
    deterministic : GPU split-K reduces partials through a workspace in a fixed order (True) or atomically.
    out : optional ``[m, n]`` array of ``out_dtype`` to write into (returned), of the operands' kind.
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"``; GPU operands always run on the GPU.
    a_scale_layout, b_scale_layout : ``None`` (row-major scales) or one of ``mxrt.SCALE_LAYOUTS``
        (``"aiter32x8"``, ``"turbo16x4"``, ``"cublas128x4"``, ``"deepgemm_ue8m0"``): the raw-piece scales are the
        buffer :func:`mxrt.preshuffle_scales` returned for the logical ``[rows, ceil(k/32)]`` scales.
    b_weight_layout : ``None`` (row-major codes) or ``"aiter16x16"``: b is raw pieces ``(codes, scales, fmt[, k])``
        whose codes are :func:`mxrt.preshuffle_weight`'s ``[ceil(n/16)*16, ceil(row bytes/32)*32]`` buffer (aiter's
        ``shuffle_weight(w, (16, 16))``); n is the row count of the row-major scales, or the codes' row count with
        a ``b_scale_layout``. The decode kernels (``sm90_decode``, ``gfx950_decode``, ``gfx942_decode``: m <= 64)
        read it in place; any other GPU path first unshuffles it into a device workspace (one extra pass over the
        weight); the numpy twin unshuffles it at validation.

    Returns
    -------
    ``d [m, n]`` of ``out_dtype`` in the operands' kind: numpy (bfloat16 as ``ml_dtypes.bfloat16``), torch
    (``torch.bfloat16``), JAX, or CuPy (float32, float16, or **uint16 holding the bfloat16 bits**, since CuPy's
    bfloat16 support is recent: ``d.view(ml_dtypes.bfloat16)`` on CuPy >= 14, or ``torch.from_dlpack(d)
    .view(torch.bfloat16)``). With ``out`` given, ``out`` itself.

    Formats (a.fmt, b.fmt): e4m3/e5m2 in any combination, e2m1 x e2m1, e4m3 x e2m1 and e2m1 x e4m3.

    Raises
    ------
    DtypeError : wrong operand type, codes/scales dtype, unsupported format pair, out_dtype, split_k type,
        deterministic not a bool, ``out`` dtype, operands on different sides.
    ShapeError : operand not 2-D, quantized along an axis other than K, block size != 32, codes or scales of the
        wrong shape, mismatched K, ``split_k`` out of range, ``out`` of the wrong shape or read-only.
    LayoutError : an unknown scale or weight layout, or a layout given for an MXArray operand.

    Notes
    -----
    The numpy twin (:func:`mxrt.reference.gemm_numpy`) computes each split's partial in float64 from the exactly
    dequantized operands and rounds once to ``out_dtype``; its result does not depend on ``split_k``. It equals
    :func:`mxrt.reference.gemm_mx`, the float64 twin every GPU path is tested against. Empty ``m`` or ``n`` give
    an empty result; ``k == 0`` gives zeros.
    """
    key = None
    if b_weight_layout is None:  # weight-layout calls take the validated route (their b is raw pieces anyway)
        key = _plan_key(a, b, out_dtype, split_k, deterministic, out, backend, a_scale_layout, b_scale_layout)
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None and plan.generation == plans_generation():
            if key[0][0] == "cupy":
                return _run_plan(plan, a, b)  # CuPy in, CuPy out (bfloat16 as uint16 bits), as below
            d = _run_plan_torch(plan, a, b)
            if d is not None:
                return d  # torch in, torch out, as below
    a, caller = interop.import_mx(a, OP, "a")
    b, _ = interop.import_mx(b, OP, "b")
    out_native = interop.import_optional(out, OP, "out")
    if caller.device and out_native is not None and dtype_name(out_native.dtype) == "bfloat16":
        out_native = out_native.view("uint16")  # the device kernels write bfloat16 bits
    p = gemm_problem(
        a,
        b,
        out_dtype=out_dtype,
        split_k=split_k,
        deterministic=deterministic,
        out=out_native,
        a_scale_layout=a_scale_layout,
        b_scale_layout=b_scale_layout,
        b_weight_layout=b_weight_layout,
        op=OP,
    )
    # device operands write p.out in place; host operands (either path) come back as a fresh numpy array
    if not use_gpu(OP, backend, p.device, _no_reason):
        d = gemm_numpy(p)
    elif key is not None and p.device and not p.is_empty and caller.kind == key[0][0]:
        d = _planned_run(key, p)
    else:
        d = gemm_ops.gemm_mx_gpu(p)
    if out is not None:
        if d is not out_native:
            out_native[...] = d
        return out
    bits = p.device and dtype_name(p.out_dtype) == "bfloat16"
    return interop.export(d, caller, "bfloat16" if bits else "value")
