"""Launch configurations (frozen, computed apart from building) and the launch itself.

On CUDA a launch goes straight to the driver (``cuLaunchKernel`` through ctypes): the kernel's argument types are
read once per (kernel, argument kinds) into a :class:`_ParamBlock` (a ``struct`` layout over one host buffer and
the ``kernelParams`` pointer array into it), and each call packs the values with one ``struct.pack_into``. That
costs a few microseconds where CuPy's ``RawKernel.__call__`` costs ~15-20 (it converts every argument, and a
128-byte by-value tensor map through a per-call ctypes type). ``MXRT_LAUNCH=cupy`` (or ROCm) keeps CuPy's call.
Both launch on CuPy's current stream, so both are CUDA-graph capturable. The driver call itself is CuPy's
``cupy.cuda.driver.launchKernel`` (Cython: ~0.3 us) where CuPy has it, else ``cuLaunchKernel`` through ctypes
(~2 us of argument conversion).

:func:`prepare` goes one step further for the small-call plans (``gemm_mx`` / ``quantize_mx``): a
:class:`PreparedLaunch` fixes the kernel, its launch configuration (checked once) and its own parameter block, and
takes the raw per-call values (device pointers as ints, tensor maps as bytes, scalars as ints).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import launch_mode
from ..errors import MxrtError, ShapeError
from .alloc import after_launch

MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0

    def check(self, op: str) -> None:
        gx, gy, gz = self.grid
        if not (1 <= gx <= MAX_GRID_X and 1 <= gy <= MAX_GRID_YZ and 1 <= gz <= MAX_GRID_YZ):
            raise ShapeError(f"{op}: launch grid {self.grid} is beyond the limits ({MAX_GRID_X}, 65535, 65535)")


def launch(op: str, kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...], *, early: bool = False) -> None:
    """Launch on CuPy's current stream. A failed launch raises; asynchronous faults surface at the next
    synchronisation, or right here inside ``mxrt.runtime.debug(sync_after_launch=True)`` (the GPU tests).

    ``args``: CuPy arrays (passed as device pointers) and numpy scalars (int32 / uint32 / int64 / uint64 /
    float32 by value, or a structured ``np.void`` such as a 128-byte tensor map, by value).

    ``early``: a programmatic dependent launch where the driver route has ``cuLaunchKernelEx`` (CUDA 12+): the
    kernel's CTAs may be scheduled before the previous kernel on the stream has finished (once all of that
    kernel's CTAs have run ``griddepcontrol.launch_dependents`` or exited), so its launch latency hides under the
    previous kernel's last wave. The kernel must run ``griddepcontrol.wait`` (sm_90+) before it touches anything
    the previous kernel wrote; without the attribute (other launch routes, a driver that refuses it) that wait
    returns at once and the launch is an ordinary one."""
    cfg.check(op)
    fn = _driver()
    block = _param_block(kernel, args) if fn is not None and launch_mode() == "driver" else None
    if block is None:
        kernel(cfg.grid, cfg.block, args, shared_mem=cfg.shared_mem)
    elif not (early and block.launch_early(op, kernel, cfg, args)):
        block.launch(fn, op, kernel, cfg, args)
    after_launch(op, kernel, cfg.grid, cfg.block)


# ---- the driver route --------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_DRIVER: Any = None  # ctypes cuLaunchKernel, or False where there is none (ROCm, no libcuda)
_BLOCKS: dict[tuple, Any] = {}
_SCALAR_CODES = {
    np.dtype(np.int32): ("i", 4),
    np.dtype(np.uint32): ("I", 4),
    np.dtype(np.int64): ("q", 8),
    np.dtype(np.uint64): ("Q", 8),
    np.dtype(np.float32): ("f", 4),
}


def _driver() -> Any:
    """``fn(func, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra) -> CUresult`` (0: launched), or None
    where kernels go through CuPy's call (ROCm, no libcuda)."""
    global _DRIVER
    if _DRIVER is None:
        with _LOCK:
            if _DRIVER is None:
                try:
                    import cupy

                    if cupy.cuda.runtime.is_hip:
                        raise OSError("ROCm: CuPy's call")
                    _DRIVER = _cupy_launch_kernel(cupy) or _ctypes_launch_kernel()
                except (OSError, AttributeError, ImportError):
                    _DRIVER = False
    return _DRIVER or None


def _ctypes_launch_kernel() -> Any:
    fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    fn.restype = ctypes.c_int
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return fn


# cuLaunchKernelEx's config with one attribute: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h)
_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class _LaunchConfigEx(ctypes.Structure):
    """CUlaunchConfig."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_mem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_LaunchAttribute)),
        ("num_attrs", ctypes.c_uint),
    ]


_LAUNCH_EX: Any = None  # ctypes cuLaunchKernelEx, or False where there is none


def _launch_ex() -> Any:
    global _LAUNCH_EX
    if _LAUNCH_EX is None:
        with _LOCK:
            if _LAUNCH_EX is None:
                try:
                    fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
                    fn.restype = ctypes.c_int
                    fn.argtypes = [ctypes.POINTER(_LaunchConfigEx), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
                    _LAUNCH_EX = fn
                except (OSError, AttributeError):
                    _LAUNCH_EX = False
    return _LAUNCH_EX or None


def _cupy_launch_kernel(cupy: Any) -> Any:
    """CuPy's Cython binding of cuLaunchKernel (it raises CUDADriverError; this returns the CUresult instead), or
    None when this CuPy has none."""
    driver = getattr(cupy.cuda, "driver", None)
    fn = getattr(driver, "launchKernel", None)
    err = getattr(driver, "CUDADriverError", None)
    if fn is None or not isinstance(err, type):
        return None

    def launch_kernel(func: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, stream: int,
                      params: int, extra: Any) -> int:  # fmt: skip
        try:
            fn(func, gx, gy, gz, bx, by, bz, smem, stream, params, 0)
        except err as e:
            return int(getattr(e, "status", -1))
        return 0

    return launch_kernel


def _kind(x: Any) -> tuple[str, int, int] | None:
    """(struct code, size, alignment) of one kernel argument, or None for a kind only CuPy's call handles."""
    if hasattr(x, "data") and hasattr(x.data, "ptr") and type(x).__module__.split(".", 1)[0] == "cupy":
        return ("Q", 8, 8)
    if isinstance(x, np.void):
        size = x.dtype.itemsize
        return (f"{size}s", size, 64 if size >= 64 else 8)
    if isinstance(x, np.generic):
        code = _SCALAR_CODES.get(x.dtype)
        return None if code is None else (code[0], code[1], code[1])
    return None


class _ParamBlock:
    """The packed parameters of one kernel signature: a 64-byte aligned host buffer, the ``struct`` format that
    writes every argument at its aligned offset, and the ``void* kernelParams[]`` array pointing into it."""

    def __init__(self, kinds: list[tuple[str, int, int]], kernel: Any, func: int) -> None:
        self.kernel = kernel  # held: the cache key holds its id
        self.func = func  # the CUfunction of the current device
        fmt, offsets, off = "=", [], 0
        for code, size, align in kinds:
            pad = (-off) % align
            fmt += f"{pad}x" if pad else ""
            off += pad
            offsets.append(off)
            fmt += code
            off += size
        self.struct = struct.Struct(fmt)
        self.raw = ctypes.create_string_buffer(off + 64)
        base = ctypes.addressof(self.raw)
        self.shift = (-base) % 64
        self.base = base + self.shift
        self.view = memoryview(self.raw).cast("B")[self.shift : self.shift + max(off, 1)]
        self.params = (ctypes.c_void_p * max(len(kinds), 1))(*(self.base + o for o in offsets))
        self.params_ptr = ctypes.addressof(self.params)  # what both driver bindings accept
        self.codes = [k[0] for k in kinds]
        self.lock = threading.Lock()

    def values(self, args: tuple[Any, ...]) -> list[Any]:
        out = []
        for code, x in zip(self.codes, args, strict=True):
            if code == "Q" and not isinstance(x, np.generic):
                out.append(x.data.ptr)
            elif code[-1] == "s":
                out.append(x.tobytes())
            else:
                out.append(x.item())
        return out

    def launch(self, fn: Any, op: str, kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...]) -> None:
        import cupy

        vals = self.values(args)
        stream = cupy.cuda.get_current_stream().ptr
        (gx, gy, gz), (bx, by, bz) = cfg.grid, cfg.block
        with self.lock:  # one buffer per signature: the driver copies the parameters before it returns
            self.struct.pack_into(self.view, 0, *vals)
            res = fn(self.func, gx, gy, gz, bx, by, bz, cfg.shared_mem, stream, self.params_ptr, None)
        if res != 0:
            raise _launch_failed(op, kernel, cfg, res)

    def launch_early(self, op: str, kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...]) -> bool:
        """:func:`launch` with ``early``: True when cuLaunchKernelEx took it, False where there is none or the
        driver refused the attribute (the caller then launches as usual)."""
        import cupy

        fn = _launch_ex()
        if fn is None:
            return False
        vals = self.values(args)
        attr = _LaunchAttribute(id=_PROGRAMMATIC_STREAM_SERIALIZATION)
        attr.value[0] = 1
        conf = _LaunchConfigEx()
        conf.grid[:], conf.block[:] = cfg.grid, cfg.block
        conf.shared_mem = cfg.shared_mem
        conf.stream = cupy.cuda.get_current_stream().ptr or None
        conf.attrs = ctypes.pointer(attr)
        conf.num_attrs = 1
        with self.lock:
            self.struct.pack_into(self.view, 0, *vals)
            res = fn(ctypes.byref(conf), self.func, self.params_ptr, None)
        return res == 0


def _launch_failed(op: str, kernel: Any, cfg: LaunchConfig, res: int) -> MxrtError:
    return MxrtError(
        f"{op}: cuLaunchKernel of {getattr(kernel, 'name', kernel)} failed with CUresult {res} (grid "
        f"{cfg.grid}, block {cfg.block}, shared memory {cfg.shared_mem} bytes)"
    )


class _NoBlock:
    kernel = None  # never ``is`` a kernel: a kind only CuPy's call handles is re-checked (rare, cheap)


_NO_BLOCK = _NoBlock()


def _param_block(kernel: Any, args: tuple[Any, ...]) -> _ParamBlock | None:
    """The cached parameter block of ``kernel`` for these argument kinds, or None when one needs CuPy's call."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (id(kernel), dev, *(x.dtype if type(x) is np.void else type(x) for x in args))
    hit = _BLOCKS.get(key)
    if hit is not None and hit.kernel is kernel:
        return hit
    kinds = [_kind(x) for x in args]
    # a cupy.RawKernel: .kernel is its Function on the current device (compiled there on first use), .ptr the
    # CUfunction; anything else (a test double) goes through its own call
    func = getattr(getattr(kernel, "kernel", None), "ptr", None)
    if any(k is None for k in kinds) or not isinstance(func, int) or not func:
        _BLOCKS[key] = _NO_BLOCK
        return None
    block = _ParamBlock(kinds, kernel, func)  # type: ignore[arg-type]
    with _LOCK:
        _BLOCKS[key] = block
    return block


# ---- prepared launches (the small-call plans) ---------------------------------------------------------------


class PreparedLaunch:
    """One kernel launch whose kernel, configuration and argument kinds are fixed (:func:`prepare`); a call passes
    only the raw values: device pointers as ints, by-value structs (tensor maps) as bytes, scalars as ints, in the
    kernel's argument order. It packs them into its own parameter block and launches on CuPy's current stream
    through the driver, then runs the test hook (:func:`mxrt.runtime.debug`) as :func:`launch` does.

    Call :meth:`usable` first on every call: it is False when ``MXRT_LAUNCH`` no longer selects the driver route or
    the current device is not the one the launch was prepared on (then use :func:`launch`).
    """

    __slots__ = ("_args", "_block", "_cfg", "_device", "_fn", "_get_device", "_stream", "kernel", "op")

    def __init__(self, op: str, kernel: Any, cfg: LaunchConfig, block: _ParamBlock, fn: Any, cupy: Any) -> None:
        self.op, self.kernel, self._cfg, self._block, self._fn = op, kernel, cfg, block, fn
        (gx, gy, gz), (bx, by, bz) = cfg.grid, cfg.block
        self._args = (block.func, gx, gy, gz, bx, by, bz, cfg.shared_mem)
        self._get_device = cupy.cuda.runtime.getDevice
        self._stream = cupy.cuda.get_current_stream
        self._device = self._get_device()

    def usable(self) -> bool:
        return launch_mode() == "driver" and self._get_device() == self._device

    def __call__(self, *vals: Any) -> None:
        b = self._block
        stream = self._stream().ptr
        with b.lock:  # the driver copies the parameters before it returns
            b.struct.pack_into(b.view, 0, *vals)
            res = self._fn(*self._args, stream, b.params_ptr, None)
        if res != 0:
            raise _launch_failed(self.op, self.kernel, self._cfg, res)
        after_launch(self.op, self.kernel, self._cfg.grid, self._cfg.block)


def prepare(op: str, kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...]) -> PreparedLaunch | None:
    """A :class:`PreparedLaunch` of ``kernel`` with ``cfg`` for arguments of the kinds of ``args`` (the same
    objects :func:`launch` takes), or None where launches go through CuPy's call (ROCm, ``MXRT_LAUNCH=cupy``, no
    libcuda, an argument kind the driver route does not pack, a kernel that is no ``cupy.RawKernel``).
    ``cfg`` is checked here (the same typed error as :func:`launch`)."""
    cfg.check(op)
    fn = _driver()
    if fn is None or launch_mode() != "driver":
        return None
    kinds = [_kind(x) for x in args]
    func = getattr(getattr(kernel, "kernel", None), "ptr", None)
    if any(k is None for k in kinds) or not isinstance(func, int) or not func:
        return None
    import cupy

    return PreparedLaunch(op, kernel, cfg, _ParamBlock(kinds, kernel, func), fn, cupy)  # type: ignore[arg-type]
