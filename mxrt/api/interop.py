"""Arrays in and out of the public ops: numpy, CuPy, and anything with ``__dlpack__`` (torch, JAX), zero-copy.

In: :func:`import_array` turns a caller's array into the *native* array the numpy twins and GPU ops read (a numpy
array on the host, a CuPy array on the device) by DLPack, without copying. Types DLPack cannot carry travel as
bits: a torch/JAX ``bfloat16`` tensor as int16 (then viewed as ``ml_dtypes.bfloat16``), torch ``float8_*`` /
``float8_e8m0fnu`` as uint8. The :class:`Caller` it returns remembers what came in.

Out: :func:`export` turns a native result back into the caller's kind, again zero-copy: torch in -> torch out
(bfloat16 as ``torch.bfloat16``, element codes as ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` (other formats
uint8), E8M0 scales as ``torch.float8_e8m0fnu`` where torch has it, else uint8), JAX in -> JAX out, CuPy in ->
CuPy out (bfloat16 as uint16 bits), numpy in -> numpy out (bfloat16 as ``ml_dtypes.bfloat16``).

torch and JAX are never imported here unless the caller handed one of their arrays in (then they are already
imported) or asked for them by name (:func:`convert`). CuPy is reached through :mod:`mxrt.runtime` only.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from .._kinds import array_kind, dtype_name
from ..errors import DtypeError, UnknownNameError, UnsupportedArchError
from ..formats import MXArray, MXDual
from ..formats.mx import FP8_CODE_DTYPES
from ..layouts import MXGrouped

BF16 = np.dtype(ml_dtypes.bfloat16)

#: torch dtype names that DLPack cannot carry, read as bytes (codes / E8M0 scales) on the way in
_TORCH_BYTE_DTYPES = (
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
)

KINDS_OUT = ("numpy", "cupy", "torch", "jax")
#: ml_dtypes' narrow floats (numpy kind "V"): bytes DLPack carries as uint8 / int16 views
_BYTE_LIKE = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
)


class Caller(NamedTuple):
    """What an op's array argument came in as: ``kind`` (numpy, cupy, torch, jax) and whether it lives on a GPU."""

    kind: str
    device: bool


HOST = Caller("numpy", False)


def _torch() -> Any:
    return sys.modules["torch"]


def _device_import(x: Any, op: str, arg: str) -> Any:
    from .. import runtime  # the only layer that touches cupy

    try:
        return runtime.from_dlpack(x)
    except UnsupportedArchError:
        raise
    except Exception as e:  # DLPack export refused by the producer (dtype, device)
        raise DtypeError(f"{op}: argument '{arg}' could not be read through DLPack: {e}") from None


def _from_torch(t: Any, op: str, arg: str) -> tuple[Any, Caller]:
    torch = _torch()
    t = t.detach()
    name = str(t.dtype).removeprefix("torch.")
    bf16 = name == "bfloat16"
    if bf16:
        t = t.view(torch.int16)
    elif name in _TORCH_BYTE_DTYPES:
        t = t.view(torch.uint8)
    dev = t.device.type
    if dev == "cpu":
        a = np.from_dlpack(t)
        return (a.view(BF16) if bf16 else a), Caller("torch", False)
    if dev in ("cuda", "hip"):
        from .. import runtime

        a = runtime.arrays.from_torch_cuda(t) if dev == "cuda" else None
        if a is None:
            a = _device_import(t, op, arg)
        return (_device_bf16(a) if bf16 else a), Caller("torch", True)
    raise DtypeError(f"{op}: argument '{arg}' is a torch tensor on device {t.device}, expected a CPU or CUDA tensor")


def _device_bf16(a: Any) -> Any:
    """int16 bits on the device as CuPy bfloat16 (CuPy >= 14), else as uint16 bits (mxrt's older device form)."""
    try:
        return a.view(BF16)
    except (TypeError, ValueError):
        return a.view("uint16")


def _dlpack_device(x: Any) -> int:
    try:
        return int(x.__dlpack_device__()[0])
    except Exception:
        return 1  # kDLCPU


def _from_dlpack(x: Any, kind: str, op: str, arg: str) -> tuple[Any, Caller]:
    """A JAX array or another DLPack producer: kDLCPU (1) to numpy, kDLCUDA (2) / kDLROCM (10) to CuPy."""
    dev = _dlpack_device(x)
    bf16 = str(getattr(x, "dtype", "")) == "bfloat16"
    if kind == "jax" and bf16:  # DLPack has bfloat16 but numpy/CuPy's import may not: carry the bits
        jax = sys.modules["jax"]
        x = jax.lax.bitcast_convert_type(x, "int16")
    if dev == 1:
        try:
            a = np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError) as e:
            raise DtypeError(
                f"{op}: argument '{arg}' ({type(x).__name__}) could not be read through DLPack: {e}"
            ) from None
        return (a.view(BF16) if bf16 else a), Caller(kind if kind == "jax" else "numpy", False)
    if dev in (2, 3, 10):
        a = _device_import(x, op, arg)
        return (_device_bf16(a) if bf16 else a), Caller(kind if kind == "jax" else "cupy", True)
    raise DtypeError(f"{op}: argument '{arg}' lives on DLPack device type {dev}, expected the CPU or a GPU")


def import_array(x: Any, op: str, arg: str) -> tuple[Any, Caller]:
    """``(native, caller)``: ``x`` as a numpy or CuPy array (zero-copy), and what it came in as.

    Objects that are no array (lists, scalars, None) come back unchanged with the numpy caller: the numpy twin
    validates them.
    """
    kind = array_kind(x)
    if kind == "numpy":
        return x, HOST
    if kind == "cupy":
        return x, Caller("cupy", True)
    if kind == "torch":
        return _from_torch(x, op, arg)
    if kind in ("jax", "dlpack"):
        return _from_dlpack(x, kind, op, arg)
    return x, HOST


def import_optional(x: Any, op: str, arg: str) -> Any:
    """The native array of an optional argument (None stays None)."""
    return None if x is None else import_array(x, op, arg)[0]


def import_mx(q: Any, op: str, arg: str) -> tuple[Any, Caller]:
    """An MXArray whose ``data``/``scales`` are native arrays (fields of any kind accepted), and its caller.

    Anything else (raw ``(codes, scales, fmt[, k])`` pieces are converted item by item) is returned with the
    caller of its first array.
    """
    if isinstance(q, MXArray):
        data, caller = import_array(q.data, op, f"{arg}.data")
        scales, c2 = import_array(q.scales, op, f"{arg}.scales")
        if c2.device != caller.device:
            raise DtypeError(
                f"{op}: argument '{arg}' mixes host and device fields (data on "
                f"{'GPU' if caller.device else 'host'}, scales on {'GPU' if c2.device else 'host'})"
            )
        if data is q.data and scales is q.scales:
            return q, caller
        return dataclasses.replace(q, data=data, scales=scales), caller
    if isinstance(q, tuple) and len(q) in (3, 4):
        codes, caller = import_array(q[0], op, f"{arg}[0]")
        scales, _ = import_array(q[1], op, f"{arg}[1]")
        return (codes, scales, *q[2:]), caller
    return q, HOST


# ---- out ----------------------------------------------------------------------------------------------------


def _is_bf16(a: Any, role: str) -> bool:
    """bfloat16 values: typed (numpy / CuPy >= 14) or CuPy's uint16 bits (``role="bfloat16"``)."""
    return role == "bfloat16" or dtype_name(a.dtype) == "bfloat16"


def _to_torch(a: Any, role: str) -> Any:
    """A native array as a torch tensor sharing its memory; ``role`` names the typed view to apply."""
    torch = _torch()
    if _is_bf16(a, role):  # DLPack importers may not know bfloat16: its bits travel as int16
        return torch.from_dlpack(a.view("int16")).view(torch.bfloat16)
    t = torch.from_dlpack(a)
    if t.dtype == torch.uint8:
        name = None
        if role.startswith("codes:"):
            name = FP8_CODE_DTYPES.get(role[6:])
        elif role == "scales":
            name = "float8_e8m0fnu"
        if name is not None and hasattr(torch, name):
            t = t.view(getattr(torch, name))
    return t


def _to_jax(a: Any, role: str) -> Any:
    jax = sys.modules.get("jax")
    if jax is None:
        import jax  # the caller asked for JAX
    jnp = jax.numpy
    if _is_bf16(a, role):
        return jax.lax.bitcast_convert_type(jnp.from_dlpack(a.view("int16")), jnp.bfloat16)
    out = jnp.from_dlpack(a)
    if out.dtype == jnp.uint8 and role.startswith("codes:") and role[6:] in FP8_CODE_DTYPES:
        out = jax.lax.bitcast_convert_type(out, getattr(jnp, FP8_CODE_DTYPES[role[6:]]))
    return out


def export(a: Any, caller: Caller, role: str = "value") -> Any:
    """A native result ``a`` as an array of the caller's kind (zero-copy where the target can share memory).

    ``role`` is ``"value"`` (numbers: dtype kept, bfloat16 typed), ``"bfloat16"`` (uint16 bits of bfloat16
    values, CuPy's form), ``"codes:<fmt>"`` (uint8 element codes) or ``"scales"`` (uint8 E8M0 bytes).
    """
    if a is None or caller.kind in ("numpy", "cupy"):
        return a
    if not isinstance(a, np.ndarray) and array_kind(a) != "cupy":
        return a  # scalars, ints, None: as they are
    if caller.kind == "torch":
        return _to_torch(a, role)
    if caller.kind == "jax":
        return _to_jax(a, role)
    return a


def export_mx(q: Any, caller: Caller) -> Any:
    """An MXArray / MXDual / MXGrouped (or a tuple of arrays) with every field exported to the caller's kind."""
    if caller.kind in ("numpy", "cupy") or q is None:
        return q
    if isinstance(q, MXArray):
        return dataclasses.replace(
            q, data=export(q.data, caller, f"codes:{q.fmt}"), scales=export(q.scales, caller, "scales")
        )
    if isinstance(q, MXDual):
        return MXDual(export_mx(q.row, caller), export_mx(q.col, caller))
    if isinstance(q, MXGrouped):
        return MXGrouped(*(export_mx(f, caller) if isinstance(f, MXArray) else export(f, caller) for f in q))
    if isinstance(q, tuple):
        return tuple(export(v, caller) for v in q)
    return export(q, caller)


def convert(x: Any, kind: str) -> Any:
    """``x`` (an array of any kind, an MXArray, MXDual, MXGrouped or a tuple of those) as ``kind``, zero-copy.

    ``kind``: ``"numpy"`` (host arrays only), ``"cupy"`` (device arrays only), ``"torch"`` or ``"jax"``. mxrt
    never moves data between host and device: a device array asked for as numpy is a typed error (use
    ``.get()`` / ``.cpu()``).
    """
    op = "convert"
    if kind not in KINDS_OUT:
        raise UnknownNameError(
            f"{op}: argument 'kind' is {kind!r}, an unknown array kind; expected one of {list(KINDS_OUT)}"
        )
    if isinstance(x, (MXArray, MXDual, MXGrouped)) or (isinstance(x, tuple) and not hasattr(x, "__dlpack__")):
        if isinstance(x, MXArray):
            native, caller = import_mx(x, op, "x")
            return _convert_mx(native, caller, kind)
        if isinstance(x, (MXDual, MXGrouped)) or hasattr(x, "_fields"):
            return type(x)(*(convert(v, kind) if v is not None else None for v in x))
        return tuple(convert(v, kind) for v in x)
    if array_kind(x) == "other":
        raise DtypeError(f"{op}: argument 'x' is a {type(x).__name__}, expected an array or an MXArray / MXDual")
    native, caller = import_array(x, op, "x")
    dt = native.dtype
    if (dt.kind not in "biuf" and dt.name not in _BYTE_LIKE) or not dt.isnative:
        raise DtypeError(
            f"{op}: argument 'x' has dtype {dt}, expected a native-byte-order numeric array (DLPack carries no "
            "objects, strings, complex or big-endian data)"
        )
    _check_side(op, caller.device, kind)
    if kind in ("numpy", "cupy"):
        return native
    return export(native, Caller(kind, caller.device))


def _check_side(op: str, device: bool, kind: str) -> None:
    if kind == "numpy" and device:
        raise DtypeError(f"{op}: x lives on the GPU but kind='numpy'; copy it to the host first (.get() / .cpu())")
    if kind == "cupy" and not device:
        raise DtypeError(f"{op}: x lives on the host but kind='cupy'; copy it to the GPU first (cupy.asarray)")


def _convert_mx(q: MXArray, caller: Caller, kind: str) -> MXArray:
    _check_side("convert", caller.device, kind)
    if kind in ("numpy", "cupy"):
        return q
    return export_mx(q, Caller(kind, caller.device))
