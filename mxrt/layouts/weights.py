"""Weight (B operand) preshuffle for AMD MFMA GEMMs: aiter ``shuffle_weight(x, layout=(16, 16))``."""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, ShapeError, UnknownLayoutError
from ._check import align, as_array, check_alloc, check_int

#: Weight layout names accepted by :func:`preshuffle_weight`.
WEIGHT_LAYOUTS = ("aiter16x16",)


def _check_layout(layout: object, op: str) -> str:
    if not isinstance(layout, str) or layout not in WEIGHT_LAYOUTS:
        raise UnknownLayoutError(
            f"{op}: argument 'layout' is {layout!r}, an unknown weight layout; expected one of {list(WEIGHT_LAYOUTS)}"
        )
    return layout


def weight_layout_shape(layout: str, n: int, k: int) -> tuple[int, int]:
    """Padded ``(n, k)`` that ``layout`` stores: ``(ceil(n/16)*16, ceil(k/32)*32)`` for ``"aiter16x16"``.

    ``k`` counts entries of the array's last axis: fp8 codes, or bytes of packed fp4 ``[n, k_elems/2]``.
    """
    return _layout_shape(layout, n, k, "weight_layout_shape")


def _layout_shape(layout: object, n: object, k: object, op: str, args: tuple[str, str] = ("n", "k")) -> tuple[int, int]:
    _check_layout(layout, op)
    return align(check_int(n, op, args[0], minimum=0), 16), align(check_int(k, op, args[1], minimum=0), 32)


def _check_weight(q: object, op: str, arg: str) -> np.ndarray:
    a = as_array(q, op, arg)
    if a.dtype.itemsize not in (1, 2) or a.dtype.kind not in "uifV":
        raise DtypeError(
            f"{op}: argument '{arg}' has dtype {a.dtype}, expected a 1-byte dtype (fp8 codes, packed fp4 uint8, "
            "float8) or a 2-byte one (fp16/bf16)"
        )
    if not 2 <= a.ndim <= _MAX_NDIM:
        raise ShapeError(
            f"{op}: argument '{arg}' has shape {a.shape}, expected [..., n, k] with 2 <= ndim <= {_MAX_NDIM} (the "
            "shuffle views it with 3 more dims; numpy allows 64)"
        )
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


#: Largest rank of a weight: the shuffle reshapes ``[..., n, k]`` into ``[..., n0, 16, k0, k1, k2]``.
_MAX_NDIM = 61


def preshuffle_weight(q: np.ndarray, layout: str = "aiter16x16") -> np.ndarray:
    """Shuffle ``q [..., n, k]`` into aiter's 16x16 weight layout (MX_REFERENCE.md 3b').

    With ``kp = 16 / itemsize`` entries per 16-byte chunk (16 for fp8 codes and packed-fp4 bytes), ``q`` is
    zero-padded to ``weight_layout_shape(layout, n, k) = (np_, kk)``, viewed as ``[..., np_/16, 16, kk/32, 32/kp,
    kp]`` = ``(n0, n1, k0, k1, k2)`` with ``n = 16*n0 + n1``, ``k = 32*k0 + kp*k1 + k2``, and permuted to
    ``(n0, k0, k1, n1, k2)``: entry ``(n, k)`` lands at flat offset
    ``o = n0*16*kk + k0*512 + k1*16*kp + n1*kp + k2`` of each ``[np_, kk]`` matrix (aiter ``shuffle_weight``,
    wave ``preshuffle_b_aiter``, Primus-Turbo ``compute_shuffled_index``). Returns ``[..., np_, kk]``, same dtype.
    Packed fp4 ``[n, k/2]`` uint8 is shuffled as bytes (32 fp4 values per 16-byte chunk).
    """
    op = "preshuffle_weight"
    q = _check_weight(q, op, "q")
    _check_layout(layout, op)
    *batch, n, k = q.shape
    np_, kk = _layout_shape(layout, n, k, op)
    check_alloc((*batch, np_, kk), op, "the padded weight")
    kp = 16 // q.dtype.itemsize
    x = np.zeros((*batch, np_, kk), dtype=q.dtype)
    x[..., :n, :k] = q
    b = len(batch)
    v = x.reshape(*batch, np_ // 16, 16, kk // 32, 32 // kp, kp)
    perm = (*range(b), b + 0, b + 2, b + 3, b + 1, b + 4)
    return np.ascontiguousarray(v.transpose(perm)).reshape(*batch, np_, kk)


def unshuffle_weight(p: np.ndarray, layout: str = "aiter16x16", shape: tuple[int, int] | None = None) -> np.ndarray:
    """Invert :func:`preshuffle_weight`: ``p [..., np_, kk]`` back to ``[..., n, k]`` (``shape = (n, k)``, the
    original last two dims; ``None`` keeps the padded ``(np_, kk)``)."""
    op = "unshuffle_weight"
    p = _check_weight(p, op, "p")
    _check_layout(layout, op)
    *batch, np_, kk = p.shape
    if np_ % 16 or kk % 32:
        raise ShapeError(f"{op}: argument 'p' has shape {p.shape}, expected [..., n, k] with n % 16 == 0, k % 32 == 0")
    if shape is None:
        n, k = np_, kk
    else:
        if not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise ShapeError(f"{op}: argument 'shape' is {shape!r}, expected (n, k)")
        n = check_int(shape[0], op, "shape[0]", minimum=0)
        k = check_int(shape[1], op, "shape[1]", minimum=0)
        if _layout_shape(layout, n, k, op, ("shape[0]", "shape[1]")) != (np_, kk):
            raise ShapeError(
                f"{op}: argument 'shape' is {tuple(shape)}, which pads to {_layout_shape(layout, n, k, op)}, "
                f"expected a shape that pads to p's ({np_}, {kk})"
            )
    kp = 16 // p.dtype.itemsize
    b = len(batch)
    v = p.reshape(*batch, np_ // 16, kk // 32, 32 // kp, 16, kp)
    perm = (*range(b), b + 0, b + 3, b + 1, b + 2, b + 4)
    x = v.transpose(perm).reshape(*batch, np_, kk)
    return np.ascontiguousarray(x[..., :n, :k])
