"""MoE decode GEMM on vLLM's ``moe_align_block_size`` layout as a problem: validation into :class:`MoeGemmProblem`.

``mxrt.moe_gemm_mx(x, w, sorted_token_ids, expert_ids, num_tokens_post_padded, *, top_k, block_size, ...)``
computes one output row per routed slot (vLLM's fused-MoE contract as aiter's ``grouped_gemm_mxfp8`` uses it,
``../shared/spec/PEERS_MOE.md`` 3.3). With ``numel = m_act * a_div`` (the slot count and the padding sentinel):

- ``out = zeros [numel, n]``;
- for every block ``b < numel`` with ``b * block_size < num_tokens_post_padded[0]`` and
  ``0 <= e = expert_ids[b] < E``, and every ``i = b * block_size + r < cap`` (``r < block_size``) with
  ``0 <= id = sorted_token_ids[i] < numel``: ``out[id] = dequant(x)[id // a_div] @ dequant(w)[e].T`` (times
  ``topk_weights.flat[id]`` when given), in float64, rounded once to ``out_dtype``.

At most ``numel`` blocks are live: every block a layout of ``moe_align_block_size`` (vLLM's, or aiter's
``moe_sorting`` converted) has before ``num_tokens_post_padded`` holds at least one routed slot, so blocks
``numel`` and later are always past it. The host sizes the GPU grid from ``min(len(expert_ids), numel)`` instead
of the capacity's ``numel + E (block_size - 1)`` blocks (vLLM's fused MoE does the same for small batches: its
``EM = min(sorted_token_ids.size, M * top_k * BLOCK_SIZE_M)``); at T = 1 with 64 experts and blocks of 16 that is
8 CTA rows instead of 61.

Slots no block reaches stay 0 (experts that are not local under expert parallelism carry ``expert_ids`` -1). Host
layout arrays are checked here (ids in ``[0, numel]``, expert ids ``< E``); device ones (CuPy) only by dtype,
shape and contiguity: the kernels read them on the device, skip what is out of range and never synchronise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kinds import dtype_name, is_device_array
from ..errors import DtypeError, LayoutError, ShapeError, check_int, check_size_limit
from .gemm import GEMM_FORMAT_PAIRS, GEMM_OUT_DTYPES, _cdiv, _operand, _out_dtype
from .grouped_gemm import _check_out, _grouped_b

#: Output dtypes of :func:`mxrt.moe_gemm_mx` (those of :func:`mxrt.gemm_mx`).
MOE_GEMM_OUT_DTYPES = GEMM_OUT_DTYPES


@dataclass(frozen=True, eq=False)
class MoeGemmProblem:
    """A validated MoE decode GEMM (module docstring); everything a backend needs, nothing it must re-check.

    Attributes
    ----------
    op : the public op's name (error messages).
    x_codes : uint8 ``[m_act, k]`` fp8 codes or packed e2m1 ``[m_act, ceil(k/2)]`` (numpy, or CuPy on the device).
    x_scales : uint8 ``[m_act, ceil(k/32)]`` E8M0, row-major (logical) scales.
    x_fmt : element format of ``x``.
    w_codes : uint8 ``[e, n, k]`` fp8 codes or packed e2m1 ``[e, n, ceil(k/2)]``.
    w_scales : uint8 ``[e, n, ceil(k/32)]`` E8M0, row-major.
    w_fmt : element format of ``w``; ``(x_fmt, w_fmt)`` is one of :data:`mxrt.problems.GEMM_FORMAT_PAIRS`.
    m_act, e, n, k : activation rows, experts, output columns, reduction length.
    sorted_token_ids : int32 ``[cap]`` (host: native-order C-contiguous numpy, values in ``[0, numel]``).
    expert_ids : int32 ``[nblocks]``, ``nblocks = ceil(cap / block_size)`` (host: values ``< e``; negative = not
        local, skipped).
    num_tokens_post_padded : int32 ``[1]``.
    top_k : experts per token.
    a_div : activation row of slot ``id`` is ``id // a_div`` (``top_k`` for gate/up, 1 for down).
    numel : ``m_act * a_div``: the slot count, the rows of ``out`` and the padding sentinel of the ids.
    block_size : slots per block of the layout.
    topk_weights : float32 ``[numel]`` (flat, C-contiguous; the inputs' kind) or None.
    out : the caller's ``[numel, n]`` buffer (validated; on the device a bfloat16 ``out`` is its uint16 view) or
        None.
    out_dtype : ``"bfloat16"``, ``"float16"`` or ``"float32"``.
    device : True when the arrays are CuPy arrays (validated from shape, dtype and flags only; nothing read).
    """

    op: str
    x_codes: Any
    x_scales: Any
    x_fmt: str
    w_codes: Any
    w_scales: Any
    w_fmt: str
    m_act: int
    e: int
    n: int
    k: int
    sorted_token_ids: Any
    expert_ids: Any
    num_tokens_post_padded: Any
    top_k: int
    a_div: int
    numel: int
    block_size: int
    topk_weights: Any
    out: Any
    out_dtype: str
    device: bool

    @property
    def cap(self) -> int:
        """Length of ``sorted_token_ids``."""
        return int(self.sorted_token_ids.shape[0])

    @property
    def num_blocks(self) -> int:
        """Length of ``expert_ids``, ``ceil(cap / block_size)``."""
        return int(self.expert_ids.shape[0])

    @property
    def out_shape(self) -> tuple[int, int]:
        return (self.numel, self.n)

    @property
    def is_empty(self) -> bool:
        """True when ``out`` has no elements or nothing can be written (K = 0, no experts, no blocks): zeros."""
        return self.numel == 0 or self.n == 0 or self.k == 0 or self.e == 0 or self.cap == 0


def _host_array(x: Any, op: str, arg: str, kind: str, itemsize: int, what: str) -> np.ndarray:
    """A numpy array of numeric ``kind`` / ``itemsize`` (any byte order or strides) as native C-contiguous."""
    if isinstance(x, np.generic):
        x = np.asarray(x)  # a numpy scalar: 0-d, refused by the shape checks
    if not isinstance(x, np.ndarray):
        raise DtypeError(
            f"{op}: argument '{arg}' is a {type(x).__name__}, expected a numpy / CuPy / torch {what} array"
        )
    if x.dtype.kind != kind or x.dtype.itemsize != itemsize:
        raise DtypeError(f"{op}: argument '{arg}' has dtype {x.dtype}, expected {what}")
    check_size_limit(x.size, op, f"argument '{arg}': its element count")  # before any copy
    want = np.dtype(what)
    return np.ascontiguousarray(x.astype(want, copy=False) if x.dtype != want else x)


def _device_array(x: Any, op: str, arg: str, what: str) -> Any:
    if dtype_name(x.dtype) != what:
        raise DtypeError(f"{op}: argument '{arg}' is a CuPy array of dtype {x.dtype}, expected {what}")
    if not x.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument '{arg}' has strides {x.strides}, expected a C-contiguous CuPy array (the kernels read it "
            "in place; mxrt makes no implicit device copy)"
        )
    return x


def _layout_array(x: Any, op: str, arg: str, device: bool) -> Any:
    """An int32 1-D layout array: host ones native and contiguous, device ones checked in place."""
    if device:
        x = _device_array(x, op, arg, "int32")
    else:
        x = _host_array(x, op, arg, "i", 4, "int32")
    if x.ndim != 1:
        raise ShapeError(f"{op}: argument '{arg}' has shape {tuple(x.shape)}, expected a 1-D int32 array")
    check_size_limit(int(x.shape[0]), op, f"argument '{arg}': its length")
    return x


def _topk_weights(tw: Any, op: str, numel: int, top_k: int, device: bool) -> Any:
    if device:
        tw = _device_array(tw, op, "topk_weights", "float32")
    else:
        tw = _host_array(tw, op, "topk_weights", "f", 4, "float32")
    shape = tuple(int(v) for v in tw.shape)
    two_d = len(shape) == 2 and shape[1] == top_k and shape[0] * top_k == numel
    if shape != (numel,) and not two_d:
        raise ShapeError(
            f"{op}: argument 'topk_weights' has shape {shape}, expected ({numel},) or [T, top_k] = "
            f"{(numel // top_k, top_k) if numel % top_k == 0 else '(none: numel % top_k != 0)'} (numel = {numel} "
            "elements, one per routed slot)"
        )
    return tw.reshape(numel)


def moe_gemm_problem(
    x: object,
    w: object,
    sorted_token_ids: object,
    expert_ids: object,
    num_tokens_post_padded: object,
    *,
    top_k: object,
    block_size: object,
    topk_weights: object = None,
    a_div: object = None,
    out: object = None,
    out_dtype: object = "bfloat16",
    op: str = "moe_gemm_mx",
) -> MoeGemmProblem:
    """Validate the arguments of :func:`mxrt.moe_gemm_mx` into a :class:`MoeGemmProblem` (typed errors otherwise).

    Check order (STYLE.md 5): operands (types, formats, shapes), K match, the integer arguments, sides, the layout
    arrays' dtypes and shapes, ``nblocks == ceil(cap / block_size)``, ``topk_weights``, ``out_dtype``, ``out``,
    then the host layout values (ids in ``[0, numel]``, expert ids ``< E``).
    """
    qx, _, x_layout = _operand(x, "x", None, op)
    qw, e, n, kw = _grouped_b(w, op, "w")
    pair = (qx.fmt, qw.fmt)
    if pair not in GEMM_FORMAT_PAIRS:
        raise DtypeError(
            f"{op}: formats (x.fmt, w.fmt) are {pair}, expected one of {list(GEMM_FORMAT_PAIRS)} "
            "(MXFP8 e4m3/e5m2 pairs, e2m1 x e2m1, e4m3 x e2m1 in either order)"
        )
    m_act, k = qx.shape
    if kw != k:
        raise ShapeError(
            f"{op}: x has k = {k} (shape {qx.shape}) but w has k = {kw} (shape {(e, n, kw)}), expected equal K"
        )
    tk = check_int(top_k, op, "top_k", minimum=1)
    bs = check_int(block_size, op, "block_size", minimum=1)
    ad = tk if a_div is None else check_int(a_div, op, "a_div", minimum=1)
    numel = check_size_limit(m_act * ad, op, f"numel = x.shape[0] * a_div = {m_act} * {ad}")
    check_size_limit(numel * n, op, f"the result out [numel, n] = [{numel}, {n}]: its element count")
    device = is_device_array(qx.data)
    if device != is_device_array(qw.data):
        raise DtypeError(f"{op}: x and w live on different sides (host and device); expected both numpy or both CuPy")
    if device and x_layout is not None:
        raise LayoutError(f"{op}: x.scale_layout is {x_layout!r}, expected None (row-major scales on the device)")
    layout = (
        ("sorted_token_ids", sorted_token_ids),
        ("expert_ids", expert_ids),
        ("num_tokens_post_padded", num_tokens_post_padded),
    )
    for name, arr in layout:
        if arr is None:
            raise DtypeError(f"{op}: argument '{name}' is None, expected an int32 array")
    for name, arr in (*layout, ("topk_weights", topk_weights), ("out", out)):
        if arr is not None and is_device_array(arr) != device:
            raise DtypeError(
                f"{op}: argument '{name}' is {'a CuPy array' if device is False else 'a host array'} but x is "
                f"{'on the device' if device else 'on the host'}; expected every array on the same side (mxrt makes "
                "no implicit transfer)"
            )
    ids, experts, ntpp = (_layout_array(arr, op, name, device) for name, arr in layout)
    cap, nblocks = int(ids.shape[0]), int(experts.shape[0])
    if nblocks != _cdiv(cap, bs):
        raise ShapeError(
            f"{op}: argument 'expert_ids' has {nblocks} blocks, expected ceil(cap / block_size) = ceil({cap} / {bs}) = "
            f"{_cdiv(cap, bs)} (one expert id per block of sorted_token_ids)"
        )
    if tuple(ntpp.shape) != (1,):
        raise ShapeError(f"{op}: argument 'num_tokens_post_padded' has shape {tuple(ntpp.shape)}, expected (1,)")
    tw = None if topk_weights is None else _topk_weights(topk_weights, op, numel, tk, device)
    dt = _out_dtype(out_dtype, op, MOE_GEMM_OUT_DTYPES)
    _check_out(op, out, (numel, n), dt, device, required=False)
    if not device:
        if cap and (int(ids.min()) < 0 or int(ids.max()) > numel):
            raise ShapeError(
                f"{op}: argument 'sorted_token_ids' holds ids in [{int(ids.min())}, {int(ids.max())}], expected slot "
                f"ids in [0, numel) or the padding sentinel numel = {numel} (= x.shape[0] * a_div = {m_act} * {ad})"
            )
        if nblocks and int(experts.max()) >= e:
            raise ShapeError(
                f"{op}: argument 'expert_ids' holds {int(experts.max())}, expected expert ids < E = {e} (w.shape[0]); "
                "negative ids mark experts that are not local and are skipped"
            )
    codes_w = qw.data.reshape(e, n, -1) if e * n else qw.data.reshape(e, n, qw.data.shape[-1])
    scales_w = qw.scales.reshape(e, n, -1) if e * n else qw.scales.reshape(e, n, qw.scales.shape[-1])
    return MoeGemmProblem(
        op=op,
        x_codes=qx.data,
        x_scales=qx.scales,
        x_fmt=qx.fmt,
        w_codes=codes_w,
        w_scales=scales_w,
        w_fmt=qw.fmt,
        m_act=m_act,
        e=e,
        n=n,
        k=k,
        sorted_token_ids=ids,
        expert_ids=experts,
        num_tokens_post_padded=ntpp,
        top_k=tk,
        a_div=ad,
        numel=numel,
        block_size=bs,
        topk_weights=tw,
        out=out,
        out_dtype=dtype_name(dt),
        device=device,
    )
