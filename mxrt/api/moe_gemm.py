"""``mxrt.moe_gemm_mx``: the MoE decode GEMM on vLLM's ``moe_align_block_size`` layout (issue 12).

Flow as :mod:`mxrt.api.gemm`: arrays in (:mod:`mxrt.api.interop`, zero-copy) -> :func:`mxrt.problems.moe_gemm.
moe_gemm_problem` validates once -> :func:`mxrt.api.dispatch.use_gpu` -> :func:`mxrt.reference.moe_gemm.
moe_gemm_numpy` or ``mxrt.ops.moe_gemm.moe_gemm_mx_gpu`` (imported when the GPU path is asked about) -> the result
in the caller's kind.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np

from .._kinds import is_device_array
from ..errors import DtypeError, ShapeError
from ..problems.moe_gemm import MoeGemmProblem, moe_gemm_problem
from ..reference.moe_gemm import moe_gemm_numpy
from ..runtime.graph_memory import graph_safe
from . import interop
from .dispatch import use_gpu
from .gemm import _operand_key
from .grouped_gemm import _same_buffer, import_out

OP = "moe_gemm_mx"

# ---- call plans (host time of plain calls; session 20) ------------------------------------------------------------
# A call with CuPy operands (MXArrays) and CuPy layout arrays (and ``out``, if given), or all of them CUDA torch
# tensors, the vLLM layout and backend auto / gpu is keyed by everything its validation and launch read: the operands'
# keys (mxrt.api.gemm's, kept on the MXArrays), the layout arrays', routing weights' and ``out``'s dtype / shape /
# strides / device, the scalars and the build the op would choose. A key seen before skips validation and launch
# set-up: the caller's ``out`` or a fresh one (CuPy's pool, or torch's allocator for torch calls), a cudaMemsetAsync
# and one prepared launch (mxrt.ops.moe_gemm.PreparedMoe). Made only where the op reads every array as it is; torch
# calls run their plan only on the legacy default streams and outside mxrt.runtime.debug, as gemm_mx's.
_PLANS: dict[tuple, Any] = {}
_PLANS_KEPT = 512
_PLANS_LOCK = threading.Lock()


def _array_key(a: Any, kind: str) -> tuple | None:
    """A layout array's part of the key, for operands of ``kind`` ("cupy" or "torch"), or None."""
    if kind == "cupy":
        if not is_device_array(a) or type(a).__module__.split(".", 1)[0] != "cupy":
            return None
        return (a.dtype, a.shape, a.strides, a.data.device_id)
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(a, torch.Tensor) or not a.is_cuda:
        return None
    return (a.dtype, tuple(a.shape), a.stride(), a.get_device())


def _ptr(a: Any) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else a.data.ptr


def _plan_key(x, w, ids, experts, ntpp, top_k, block_size, topk_weights, a_div, out, out_dtype, backend, layout):
    if layout != "vllm" or type(backend) is not str or backend not in ("auto", "gpu"):
        return None
    if type(top_k) is not int or type(block_size) is not int or block_size < 1 or type(out_dtype) is not str:
        return None
    if a_div is not None and type(a_div) is not int:
        return None
    kx, kw = _operand_key(x), _operand_key(w)
    if kx is None or kw is None or kx[0] != kw[0] or len(w.shape) != 3:
        return None
    arrays = tuple(_array_key(a, kx[0]) for a in (ids, experts, ntpp))
    if any(k is None for k in arrays):
        return None
    tw = None if topk_weights is None else _array_key(topk_weights, kx[0])
    if topk_weights is not None and tw is None:
        return None
    ko = None
    if out is not None:
        ko = _array_key(out, kx[0])
        contiguous = out.is_contiguous() if kx[0] == "torch" else out.flags.c_contiguous
        if ko is None or not contiguous:
            return None
    from ..ops import moe_gemm as moe_gemm_ops

    numel = x.shape[0] * (top_k if a_div is None else a_div)
    n_ids = math.prod(experts.shape)
    build = moe_gemm_ops.plan_build(block_size, numel, w.shape[0], w.fmt, w.shape[2], n_ids)  # the op's own
    return (kx, kw, arrays, tw, ko, top_k, block_size, a_div, out_dtype, build)


def _run_plan(plan: tuple, kind: str, x, w, ids, experts, ntpp, topk_weights, out) -> Any | None:
    """A planned call (``out`` itself when given), or None where the unplanned route must run (another launch route
    or device; for torch: not on the legacy streams, or inside mxrt.runtime.debug)."""
    prepared, shape, dtype, out_name = plan
    if not prepared.usable():
        return None
    from ..runtime import alloc

    if kind == "cupy":
        if out is None:
            out = alloc.empty(shape, dtype)
        out_ptr = out.data.ptr
    else:
        from ..runtime.arrays import torch_on_legacy_streams

        torch = sys.modules["torch"]
        dev = x.data.get_device()
        if alloc.current_debug() is not None or not torch_on_legacy_streams(torch, dev):
            return None
        if out is None:
            out = torch.empty(shape, dtype=getattr(torch, out_name), device=dev)
        out_ptr = out.data_ptr()
    tw = 0 if topk_weights is None else _ptr(topk_weights)
    prepared(_ptr(x.data), _ptr(x.scales), _ptr(w.data), _ptr(w.scales), out_ptr, _ptr(ids), _ptr(experts),
             _ptr(ntpp), tw)  # fmt: skip
    return out


def _keep_plan(key: tuple, p: MoeGemmProblem, d: Any, given: tuple) -> None:
    """After the first GPU run of a key (``d`` its result): prepare its launch and keep the plan, where the problem
    holds the caller's arrays ``given`` (x, w, sorted_token_ids, expert_ids, num_tokens_post_padded, topk_weights)
    themselves (a planned call reads their pointers)."""
    from ..ops import moe_gemm as moe_gemm_ops

    x, w, ids, experts, ntpp, tw, out = given
    pairs = [(x.data, p.x_codes), (x.scales, p.x_scales), (w.data, p.w_codes), (w.scales, p.w_scales)]
    pairs += [(ids, p.sorted_token_ids), (experts, p.expert_ids), (ntpp, p.num_tokens_post_padded)]
    if tw is not None:
        pairs.append((tw, p.topk_weights))
    if out is not None:
        pairs.append((out, p.out))
    if any(_ptr(a) != b.data.ptr for a, b in pairs):
        return
    prepared = moe_gemm_ops.prepare(p, d)
    if prepared is None:
        return
    with _PLANS_LOCK:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = (prepared, d.shape, d.dtype, p.out_dtype)


def clear_plans() -> None:
    """Forget every call plan (tests; a changed build table)."""
    with _PLANS_LOCK:
        _PLANS.clear()


def _unsupported(p: MoeGemmProblem) -> str | None:
    from ..ops import moe_gemm as moe_gemm_ops

    return moe_gemm_ops.unsupported(p)


def _run_gpu(p: MoeGemmProblem) -> Any:
    from ..ops import moe_gemm as moe_gemm_ops

    return moe_gemm_ops.moe_gemm_mx_gpu(p)


def _from_aiter(sorted_ids: Any, num_valid_ids: Any, top_k: Any, numel: int) -> tuple[Any, Any]:
    """aiter ``moe_sorting`` arrays -> the vLLM ones: ``(s & 0xFFFFFF) * top_k + (s >> 24)`` clipped to the sentinel
    ``numel`` (aiter's padding ``(top_k << 24) | T`` maps to ``numel + top_k``), int32 on the arrays' own side, and
    ``num_valid_ids[:1]``; the problem validates everything else (dtypes, shapes, ranges)."""
    if getattr(sorted_ids, "dtype", None) is None or sorted_ids.dtype.kind not in "iu":
        raise DtypeError(f"{OP}: argument 'sorted_token_ids' (aiter layout) must be an int32 array")
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise DtypeError(f"{OP}: argument 'top_k' is {top_k!r}, expected an int >= 1")
    if getattr(num_valid_ids, "shape", None) != (2,):
        raise ShapeError(
            f"{OP}: argument 'num_tokens_post_padded' (aiter num_valid_ids) has shape "
            f"{getattr(num_valid_ids, 'shape', None)}, expected (2,)"
        )
    slot_ids = ((sorted_ids & 0xFFFFFF) * int(top_k) + (sorted_ids >> 24)).clip(0, numel).astype(sorted_ids.dtype)
    return slot_ids, num_valid_ids[:1]


@graph_safe
def moe_gemm_mx(
    x: Any,
    w: Any,
    sorted_token_ids: Any,
    expert_ids: Any,
    num_tokens_post_padded: Any,
    *,
    top_k: int,
    block_size: int,
    topk_weights: Any = None,
    a_div: int | None = None,
    out: Any = None,
    out_dtype: str = "bfloat16",
    backend: str = "auto",
    layout: str = "vllm",
) -> Any:
    """MoE decode GEMM: one output row per routed slot, on the layout of :func:`mxrt.moe_align_block_size`
    (``layout="vllm"``) or of aiter's :func:`mxrt.moe_sorting` (``layout="aiter"``).

    Parameters
    ----------
    x : MX activations ``[m_act, k]`` quantized along axis 1 (K) with block 32 (``mxrt.quantize_mx(x)``), or raw
        pieces ``(codes, scales, fmt[, k])`` as :func:`mxrt.gemm_mx` takes them (row-major scales). ``m_act = T``
        for the gate/up GEMM (``a_div = top_k``), ``T * top_k`` for the down GEMM (``a_div = 1``).
    w : MX weights ``[E, n, k]`` quantized along axis 2 (K) with block 32 (``mxrt.quantize_mx(w, axis=2)``), or
        ``(codes [E, n, k] (packed e2m1: ceil(k/2)), scales [E, n, ceil(k/32)], fmt[, k])``. ``(x.fmt, w.fmt)`` is
        one of ``mxrt.GEMM_FORMAT_PAIRS``.
    sorted_token_ids : int32 ``[cap]``: slot ids sorted by expert, padded with the sentinel ``numel``.
    expert_ids : int32 ``[ceil(cap / block_size)]``: the (local) expert of each block; negative = not local.
    num_tokens_post_padded : int32 ``[1]``: blocks at or past ``num_tokens_post_padded[0] / block_size`` are idle.
    top_k : experts per token (>= 1).
    block_size : slots per block (>= 1), the ``block_size`` the layout was built with.
    topk_weights : optional float32 with ``numel`` elements (``[T, top_k]`` or flat): row ``id`` is multiplied by
        ``topk_weights.flat[id]``.
    a_div : slot ``id`` reads activation row ``id // a_div``; default ``top_k`` (gate/up); 1 for the down GEMM.
    out : optional ``[numel, n]`` array of ``out_dtype`` (the inputs' kind) written entirely and returned.
    out_dtype : ``"bfloat16"`` (default), ``"float16"`` or ``"float32"``.
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"``; device inputs always run on the GPU.
    layout : ``"vllm"`` (default), or ``"aiter"``: the three layout arrays are then ``moe_sorting``'s
        ``sorted_ids`` (entries ``(slot << 24) | token``, padding ``(top_k << 24) | T``), ``sorted_expert_ids``
        (local ids, -1 unused) and ``num_valid_ids`` ``[2]`` (its first element plays ``num_tokens_post_padded``);
        each entry becomes the slot id ``token * top_k + slot`` (padding lands past ``numel``, skipped) with array
        arithmetic on the arrays' own side (no copy to the host, no synchronisation). aiter's ``sorted_weights``
        hold ``topk_weights[token, slot]`` per entry; pass ``topk_weights`` itself.

    Returns
    -------
    ``out [numel, n]``, ``numel = m_act * a_div``, in the inputs' kind (numpy with bfloat16 as
    ``ml_dtypes.bfloat16``, torch, or CuPy with bfloat16 as uint16 bits, as :func:`mxrt.gemm_mx`):
    ``out[id] = dequant(x)[id // a_div] @ dequant(w)[expert_ids[b]].T`` (times ``topk_weights.flat[id]``) for every
    id at a position of a live block ``b`` (``b < numel``, ``b * block_size < num_tokens_post_padded[0]``,
    ``0 <= expert_ids[b] < E``: every block of a ``moe_align_block_size`` layout that holds a slot is live) with
    ``0 <= id < numel``; every other row is 0. Computed in float64 and rounded once (the numpy twin).

    Raises
    ------
    DtypeError : operand types / formats, a format pair outside ``GEMM_FORMAT_PAIRS``, layout arrays that are not
        int32, ``topk_weights`` not float32, ``out_dtype``, ``out``'s dtype, arrays on different sides.
    ShapeError : ``x`` not 2-D along K, ``w`` not 3-D along axis 2, codes / scales that do not fit ``[E, n, k]``,
        mismatched K, layout arrays not 1-D, ``len(expert_ids) != ceil(cap / block_size)``,
        ``num_tokens_post_padded`` not ``[1]``, ``top_k`` / ``block_size`` / ``a_div`` < 1, ``topk_weights`` without
        ``numel`` elements, ``out`` of the wrong shape; host ids outside ``[0, numel]`` or host expert ids ``>= E``
        (device ones are skipped by the kernel: the host never reads them).
    LayoutError : non-contiguous device arrays.

    Notes
    -----
    vLLM's fused-MoE contract as aiter's ``grouped_gemm_mxfp8`` (PR #3783) uses it (``../shared/spec/PEERS_MOE.md``
    3.3): sentinel ``num_valid_tokens = numel``, activation row ``id // a_div``, zero-initialised ``out``, the
    routing weight applied at the store. The combine (summing a token's ``top_k`` rows) is left to the caller.
    """
    try:
        key = _plan_key(x, w, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, block_size, topk_weights,
                        a_div, out, out_dtype, backend, layout)  # fmt: skip
    except (AttributeError, TypeError, ValueError):  # array-likes without CuPy's memory attributes: no plan
        key = None
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None:
            d = _run_plan(plan, key[0][0], x, w, sorted_token_ids, expert_ids, num_tokens_post_padded, topk_weights,
                          out)  # fmt: skip
            if d is not None:
                return d  # CuPy in, CuPy out (bfloat16 as uint16 bits); torch in, torch out; out itself: as below
    x_given, w_given = x, w
    x, caller = interop.import_mx(x, OP, "x")
    w, _ = interop.import_mx(w, OP, "w")
    ids, _ = interop.import_array(sorted_token_ids, OP, "sorted_token_ids")
    experts, _ = interop.import_array(expert_ids, OP, "expert_ids")
    ntpp, _ = interop.import_array(num_tokens_post_padded, OP, "num_tokens_post_padded")
    if layout == "aiter":
        rows = x.shape[0] if isinstance(getattr(x, "shape", None), tuple) and x.shape else 0
        numel = rows * (a_div if isinstance(a_div, int) and a_div >= 1 else top_k if isinstance(top_k, int) else 1)
        ids, ntpp = _from_aiter(ids, ntpp, top_k, numel)
    elif layout != "vllm":
        raise DtypeError(f"{OP}: argument 'layout' is {layout!r}, expected 'vllm' or 'aiter'")
    tw = interop.import_optional(topk_weights, OP, "topk_weights")
    out_native = import_out(out, OP, caller)
    p = moe_gemm_problem(
        x,
        w,
        ids,
        experts,
        ntpp,
        top_k=top_k,
        block_size=block_size,
        topk_weights=tw,
        a_div=a_div,
        out=out_native,
        out_dtype=out_dtype,
        op=OP,
    )
    gpu = use_gpu(OP, backend, p.device, lambda: _unsupported(p))
    d = _run_gpu(p) if gpu else moe_gemm_numpy(p)
    if gpu and key is not None and p.device and caller.kind == key[0][0]:
        given = (x_given, w_given, sorted_token_ids, expert_ids, num_tokens_post_padded, topk_weights, out)
        _keep_plan(key, p, d, given)
    if out is not None:
        if d is not out_native and not (p.device and d is not None and _same_buffer(d, out_native)):
            out_native[...] = d
        return out
    bits = p.device and p.out_dtype == "bfloat16"
    return interop.export(d, caller, "bfloat16" if bits else "value")
