"""``mxrt.grouped_gemm_mx`` / ``mxrt.grouped_gemm_mx_wgrad``: grouped (MoE) MX GEMMs, forward, dgrad and wgrad.

Flow as :mod:`mxrt.api.gemm`: operands in (:mod:`mxrt.api.interop`) -> :mod:`mxrt.problems.grouped_gemm`
validates once -> :func:`mxrt.api.dispatch.use_gpu` -> :func:`mxrt.reference.grouped_gemm.grouped_gemm_numpy` or
:func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu` -> the result in the caller's kind. A device call whose signature
was seen before and took the torch route or the Hopper engine skips all of that for its plan (below).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from .._kinds import dtype_name, is_device_array
from ..config import grouped_gemm_kernel_override, grouped_plans_enabled
from ..ops import grouped_gemm as grouped_ops
from ..problems.grouped_gemm import GroupedGemmProblem, grouped_gemm_problem, wgrad_operand, wgrad_problem
from ..reference.grouped_gemm import grouped_gemm_numpy
from ..runtime.arrays import torch_on_legacy_streams, view_torch_cuda
from ..runtime.graph_memory import graph_safe
from . import interop
from .dispatch import use_gpu
from .gemm import _operand_key

# ---- call plans: the torch route's host cost (issue 11) ------------------------------------------------------------
# An eager call of the torch route spent ~340-410 us on the host (H200, session 11: validation, three DLPack-free
# imports, the route and fallback choices, launch set-up of four kernels, CuPy views of torch tensors, a CuPy copy
# kernel into ``out``), more than the GPU work of small MoE shapes. A call whose operands are device MXArrays (CuPy,
# or CUDA torch tensors) with device ``group_lens`` (and ``out``, if given, of the same kind) is described by a key
# of everything validation and the route choice read: each operand's part as ``gemm_mx``'s plans make it (format,
# block, axis, logical shape, scale layout, the buffers' dtype / shape / strides / 16-byte alignment / device), the
# lengths' and ``out``'s dtype / shape / strides / device, ``out_dtype``, ``align`` / ``accumulate`` (wgrad), and
# ``MXRT_GROUPED_GEMM_KERNEL``. The first call of a key runs the validated route, then keeps the torch route with
# its four launches prepared (:func:`mxrt.ops.grouped_gemm.prepare_route`), or that no route serves the key. A later
# call of the key reads only the buffers' pointers: no validation (a different input is a different key, so it is
# validated and raises as before), no route search, no launch set-up, no CuPy view except of a new CuPy result, and
# ``out`` filled by one device copy. Checked on every call: the launch route and the current device (the prepared
# launches'), no CUDA-graph capture on CuPy's stream (the route steps aside there), and for torch tensors both
# libraries on the legacy default stream (pointers read without DLPack's stream ordering, as ``gemm_mx``'s plans).
# ``MXRT_GROUPED_PLANS=0`` turns the plans off (A/B).
# Session 21: a key whose call ran the bf16 route (float32 out: the wgrad's default and the fwd / dgrad; accumulate;
# no torch) or the Hopper grouped engine alone (fp16 out, or no torch; fp8 operands, lens) keeps those launches
# prepared instead (:data:`mxrt.ops.grouped_gemm.PREPARED`): a later call allocates ``out`` (CuPy's pool, or torch's
# allocator for torch operands) unless given, and queues the launches (the bf16 route: one pool allocation for its
# workspaces, group ends and gate word) with the tensor maps memoised by pointer. Checked as the route's plans, but a
# capture is no reason to step aside (both run there too; allocations inside ``graph_safe`` are held).


@dataclass(frozen=True)
class _Plan:
    route: Any  # torch_grouped.PreparedRoute, one of grouped_gemm.PREPARED, or None (an unplanned call)
    torch: bool  # the operands are CUDA torch tensors (a torch result), else CuPy arrays (a CuPy result)
    out: tuple = ()  # PREPARED's result: (shape, DEVICE_OUT_DTYPES name, out_dtype name); () for the torch route


_PLANS: dict[tuple, _Plan] = {}
_PLANS_KEPT = 512
_PLANS_LOCK = threading.Lock()


def _array_key(x: Any, kind: str) -> tuple | None:
    """The plan key's part of a device array argument (``group_lens``, ``out``) of the operands' ``kind``."""
    if kind == "cupy":
        if not is_device_array(x):
            return None
        return ("cupy", x.dtype, x.shape, x.strides, x.data.device_id)
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or not x.is_cuda:
        return None
    return ("torch", x.dtype, tuple(x.shape), x.stride(), x.get_device())


def _plan_key(op: str, a: Any, b: Any, lens: Any, out: Any, out_dtype: Any, backend: Any, extra: tuple) -> tuple | None:
    """The call's plan key, or None (no plan: the validated route runs)."""
    if not grouped_plans_enabled() or type(backend) is not str or backend not in ("auto", "gpu"):
        return None
    if type(out_dtype) is not str:
        return None
    try:
        return _key(op, a, b, lens, out, out_dtype, extra)
    except AttributeError:  # an array-like without CuPy's / torch's full surface: validation will say what it is
        return None


def _key(op: str, a: Any, b: Any, lens: Any, out: Any, out_dtype: str, extra: tuple) -> tuple | None:
    ka = _operand_key(a)
    if ka is None:
        return None
    kb = _operand_key(b)
    if kb is None or kb[0] != ka[0]:
        return None
    kl = _array_key(lens, ka[0])
    if kl is None:
        return None
    ko = None if out is None else _array_key(out, ka[0])
    if out is not None and ko is None:
        return None
    return (op, ka, kb, kl, ko, out_dtype, extra, grouped_gemm_kernel_override())


def _run_plan(plan: _Plan, a: Any, b: Any, lens: Any, out: Any) -> Any:
    """A planned call: the result (``out`` itself when given), or None where the validated route must run."""
    r = plan.route
    if not r.usable():
        return None
    if plan.out:
        return _run_prepared(plan, a, b, lens, out)
    if plan.torch:
        torch = sys.modules["torch"]
        if not torch_on_legacy_streams(torch, a.data.get_device()):
            return None
        d = r(a.data.data_ptr(), a.scales.data_ptr(), b.data.data_ptr(), b.scales.data_ptr(), lens.data_ptr(),
              None if out is None else out.data_ptr())  # fmt: skip
        return out if out is not None else d
    d = r(a.data.data.ptr, a.scales.data.ptr, b.data.data.ptr, b.scales.data.ptr, lens.data.ptr,
          None if out is None else out.data.ptr)  # fmt: skip
    return out if out is not None else view_torch_cuda(d, "uint16")  # CuPy in, CuPy out (bfloat16 bits)


def _run_prepared(plan: _Plan, a: Any, b: Any, lens: Any, out: Any) -> Any:
    """A planned call of the bf16 route or the engine (:data:`mxrt.ops.grouped_gemm.PREPARED`)."""
    shape, device_dtype, out_name = plan.out
    if plan.torch:
        torch = sys.modules["torch"]
        dev = a.data.get_device()
        if not torch_on_legacy_streams(torch, dev):
            return None
        d = out if out is not None else torch.empty(shape, dtype=getattr(torch, out_name), device=a.data.device)
        ptrs = (a.data.data_ptr(), a.scales.data_ptr(), b.data.data_ptr(), b.scales.data_ptr(), lens.data_ptr())
        return d if plan.route(*ptrs, d.data_ptr()) else None
    from ..runtime import alloc

    d = out if out is not None else alloc.empty(shape, device_dtype)
    ptrs = (a.data.data.ptr, a.scales.data.ptr, b.data.data.ptr, b.scales.data.ptr, lens.data.ptr)
    return d if plan.route(*ptrs, d.data.ptr) else None  # CuPy bfloat16 as uint16 bits, as unplanned


def _remember(key: tuple, p: GroupedGemmProblem) -> None:
    """After the first (validated) call of ``key``: keep its prepared launches, or that none serves it."""
    route, keep = grouped_ops.prepare_route(p)
    if keep:
        result = ()  # where the prepared launches write: the route allocates its own result
        if isinstance(route, grouped_ops.PREPARED):
            name = dtype_name(p.out_dtype)
            result = (p.out_shape, grouped_ops.DEVICE_OUT_DTYPES[name], name)
        with _PLANS_LOCK:
            if len(_PLANS) >= _PLANS_KEPT:
                _PLANS.clear()
            _PLANS[key] = _Plan(route, key[1][0] == "torch", result)


def clear_plans() -> None:
    """Forget every grouped call plan (tests)."""
    with _PLANS_LOCK:
        _PLANS.clear()


def run_grouped(p: GroupedGemmProblem, backend: object, caller: Any, out: Any, out_native: Any) -> Any:
    """Dispatch a validated problem and hand the result back in the caller's kind (``out`` itself when given)."""
    gpu = use_gpu(p.op, backend, p.device, lambda: grouped_ops.unsupported_reason(p))
    d = grouped_ops.grouped_gemm_gpu(p) if gpu else grouped_gemm_numpy(p)
    if out is not None:
        if d is not out_native and not (p.device and d is not None and _same_buffer(d, out_native)):
            out_native[...] = d
        return out
    bits = p.device and dtype_name(p.out_dtype) == "bfloat16"
    return interop.export(d, caller, "bfloat16" if bits else "value")


def _same_buffer(d: Any, o: Any) -> bool:
    try:
        return d.data.ptr == o.data.ptr
    except AttributeError:
        return False


def import_out(out: Any, op: str, caller: Any) -> Any:
    out_native = interop.import_optional(out, op, "out")
    if caller.device and out_native is not None and dtype_name(out_native.dtype) == "bfloat16":
        out_native = out_native.view("uint16")  # the device kernels write bfloat16 bits
    return out_native


@graph_safe
def grouped_gemm_mx(
    a: Any,
    b: Any,
    group_lens: Any,
    *,
    out_dtype: str = "bfloat16",
    out: Any = None,
    backend: str = "auto",
) -> Any:
    """Grouped MX GEMM (MoE forward or dgrad): ``out[rows of group g] = a_g @ b[g].T``.

    Parameters
    ----------
    a : MXArray ``[M, k]`` quantized along axis 1 (K) with ``block_size=32`` (``mxrt.quantize_mx(x)``), or raw pieces
        ``(codes, scales, fmt[, k])`` as :func:`mxrt.gemm_mx`. Its rows are grouped contiguously: group g owns rows
        ``[offs[g], offs[g+1])``, ``offs = mxrt.group_offsets(group_lens)`` (the tight layout: no padding).
    b : MXArray ``[G, n, kb]`` quantized along its last axis (axis 2) with block 32, or ``(codes [G, n, kb],
        scales [G, n, ceil(kb/32)], fmt[, kb])``: one NT weight per group. ``kb`` is ``k``, or ``k`` padded with
        whole blocks (the ``k_pad`` of :func:`mxrt.quantize_mx_dual_grouped`); the padding is not read.
    group_lens : int ``[G]``, lengths >= 0 summing to ``M`` (empty groups allowed). With CuPy operands: a CuPy
        int32/int64 array read on the device (never copied back; see :mod:`mxrt.ops.grouped_gemm`).
    out_dtype : ``"bfloat16"`` (default), ``"float16"`` or ``"float32"``.
    out : optional ``[M, n]`` array of ``out_dtype`` (the operands' kind) to write into (returned).
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"``.

    Returns
    -------
    ``out [M, n]`` in the operands' kind (numpy, torch, JAX, CuPy with bfloat16 as uint16 bits, as
    :func:`mxrt.gemm_mx`).

    Notes
    -----
    **dgrad** is the same call: ``grad_x [M, k] = grad_out [M, n] @ W_g [n, k]`` runs as ``grouped_gemm_mx(
    quantize_mx(grad_out), Wt, group_lens)`` with ``Wt`` an MXArray ``[G, k, n]`` quantized along n (axis 2): the
    ``col`` of ``quantize_mx_dual_grouped(W)`` (``W [G, n, k]``), or ``quantize_mx(W.transpose(0, 2, 1))``.
    Names follow DeepGEMM / Primus-Turbo (``group_lens``, NT). The numpy twin rounds each group's float64 product
    of the dequantized operands once (:mod:`mxrt.reference.grouped_gemm`).

    Raises
    ------
    DtypeError, ShapeError, LayoutError : as :func:`mxrt.gemm_mx`, and for ``group_lens`` that are negative, of the
        wrong count (``!= b.shape[0]``), or do not sum to ``M``; ``b`` not 3-D along its last axis; ``b``'s K short
        of ``a``'s.
    """
    op = "grouped_gemm_mx"
    key = _plan_key(op, a, b, group_lens, out, out_dtype, backend, ())
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None and plan.route is not None:
            d = _run_plan(plan, a, b, group_lens, out)
            if d is not None:
                return d
    a, caller = interop.import_mx(a, op, "a")
    b, _ = interop.import_mx(b, op, "b")
    lens, _ = interop.import_array(group_lens, op, "group_lens")
    out_native = import_out(out, op, caller)
    p = grouped_gemm_problem(a, b, lens, kind="lens", out_dtype=out_dtype, out=out_native, op=op)
    d = run_grouped(p, backend, caller, out, out_native)
    if key is not None and key not in _PLANS and p.device:
        _remember(key, p)
    return d


@graph_safe
def grouped_gemm_mx_wgrad(
    a: Any,
    b: Any,
    group_lens: Any,
    *,
    align: int = 32,
    out_dtype: str = "float32",
    out: Any = None,
    accumulate: bool = False,
    backend: str = "auto",
) -> Any:
    """Grouped MX weight gradient (variable K): ``out[g] = a_g.T @ b_g`` over the rows of group g.

    Parameters
    ----------
    a : the colwise operand of ``grad_out [M, n]``: ``quantize_mx_grouped(grad_out, group_lens, colwise=True,
        col_align=align).col``, an MXArray ``[n, Mc]`` quantized along its columns (M) with block 32, group g's
        rows at columns ``[offs_pad[g], offs_pad[g] + group_lens[g])``, ``offs_pad = pad_group_layout(group_lens,
        align)[1]``, zero codes in each group's padding. The :class:`mxrt.MXGrouped` result itself is accepted
        (its ``col`` is used). Raw pieces ``(codes, scales, fmt[, Mc])`` as :func:`mxrt.gemm_mx`.
    b : the same for ``x [M, k]``: ``[k, Mc]``.
    group_lens : int ``[G]``, lengths >= 0 (CuPy int32/int64 with CuPy operands, read on the device).
    align : the per-group column padding the operands were quantized with (``col_align``), a multiple of 32.
    out_dtype : ``"float32"`` (default) or ``"bfloat16"``.
    out : optional ``[G, n, k]`` array to write into; required with ``accumulate``.
    accumulate : ``out[g] += a_g.T @ b_g`` (the product in fp32, added to ``out`` and rounded once).
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"``.

    Returns
    -------
    ``out [G, n, k]``: ``grad_W[g] = grad_out_g.T @ x_g`` (``W [G, n, k]``, the NT weight of the forward).

    Notes
    -----
    Group g reduces over columns ``[offs_pad[g], offs_pad[g+1])``: its rows and its padding (zero codes from the
    grouped quantizer); an empty group gives zeros (or leaves ``out`` unchanged with ``accumulate``). Primus-Turbo
    quantizes the wgrad operands colwise with per-group padding the same way (``col_align`` 128 there).

    Raises
    ------
    DtypeError, ShapeError : wrong operand kinds or formats, ``a`` / ``b`` column counts that differ or are short
        of the padded total, ``align`` not a multiple of 32, negative ``group_lens``, ``out`` of the wrong shape or
        dtype, ``accumulate`` without ``out``.
    """
    op = "grouped_gemm_mx_wgrad"
    a, b = wgrad_operand(a, "a", op), wgrad_operand(b, "b", op)
    key = None
    if type(align) is int and type(accumulate) is bool:
        key = _plan_key(op, a, b, group_lens, out, out_dtype, backend, (align, accumulate))
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None and plan.route is not None:
            d = _run_plan(plan, a, b, group_lens, out)
            if d is not None:
                return d
    a, caller = interop.import_mx(a, op, "a")
    b, _ = interop.import_mx(b, op, "b")
    lens, _ = interop.import_array(group_lens, op, "group_lens")
    out_native = import_out(out, op, caller)
    p = wgrad_problem(a, b, lens, align=align, out_dtype=out_dtype, out=out_native, accumulate=accumulate, op=op)
    d = run_grouped(p, backend, caller, out, out_native)
    if key is not None and key not in _PLANS and p.device:
        _remember(key, p)
    return d
