"""A stand-in ``cupy`` for walking mxrt's device dispatch on the CPU: the small-call path of ``gemm_mx`` /
``quantize_mx`` (plans, launch caches, argument packing) runs here exactly as on a GPU up to the driver call,
which is a C no-op. Used by tests/test_overhead_plans.py (cache keys and invalidation),
tests/test_grouped_gemm_sm90_ws_dispatch.py (the grouped engine's packed parameters) and
benchmarks/overhead_cpu_profile.py (where the host time of a call goes, before any device time is spent).

What it cannot show: CuPy's own costs (its allocator, ndarray construction, stream queries) and the driver's.

Install with :func:`install` (a context manager; restores every patched name).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import struct
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np


class MemPtr:
    """CuPy's ``ndarray.data``: ``ptr`` (the address) and ``device_id``."""

    __slots__ = ("device_id", "ptr")

    def __init__(self, ptr: int, device_id: int = 0) -> None:
        self.ptr = ptr
        self.device_id = device_id


class FakeDeviceArray(np.ndarray):
    """A numpy array mxrt takes for a CuPy array (its type's module is ``cupy``); ``.data`` is a :class:`MemPtr`
    computed once per array, as CuPy's is an attribute."""

    def __array_finalize__(self, obj: Any) -> None:
        self._mem = None

    @property
    def data(self) -> MemPtr:  # type: ignore[override]
        mem = self._mem
        if mem is None:
            mem = self._mem = MemPtr(self.__array_interface__["data"][0])
        return mem

    def get(self) -> np.ndarray:
        return np.array(self)


FakeDeviceArray.__module__ = "cupy"


def asarray(x: Any, dtype: Any = None) -> FakeDeviceArray:
    return np.array(x, dtype=dtype, copy=True).view(FakeDeviceArray)


def _module(state: dict) -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.ndarray = FakeDeviceArray
    cp.asarray = asarray
    cp.empty = lambda shape, dtype="uint8": np.empty(shape, dtype).view(FakeDeviceArray)
    cp.zeros = lambda shape, dtype="uint8": np.zeros(shape, dtype).view(FakeDeviceArray)
    cp.ascontiguousarray = lambda x: np.ascontiguousarray(x).view(FakeDeviceArray)
    for name in ("uint8", "uint16", "int32", "int64", "float16", "float32"):
        setattr(cp, name, getattr(np, name))
    stream = types.SimpleNamespace(ptr=0, synchronize=lambda: None)
    runtime = types.SimpleNamespace(is_hip=False, getDevice=lambda: state["device"], deviceSynchronize=lambda: None)
    cp.cuda = types.SimpleNamespace(
        get_current_stream=lambda: stream,
        runtime=runtime,
        Device=_Device,
        ExternalStream=_ExternalStream,
    )
    return cp


class _Device:
    """``cupy.cuda.Device(i)``: ``id``, and a context manager (entering selects nothing here)."""

    def __init__(self, i: int | None = None) -> None:
        self.id = 0 if i is None else i

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _ExternalStream:
    """``cupy.cuda.ExternalStream(ptr, device_id=-1)``: ``ptr``, a context manager (launches stay on stream 0)."""

    def __init__(self, ptr: int, device_id: int = -1) -> None:
        self.ptr, self.device_id = ptr, device_id

    def __enter__(self) -> _ExternalStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


#: the packed parameter layout of each kernel the small-call plans launch (kernel argument order), for reading
#: back what the driver route packed: pointers as ints, tensor maps as bytes, scalars as ints
PARAM_FORMATS = {
    "gemm_mx_decode_sm90": "=128s128sQQQIIII",
    "gemm_mx_sm90": "=128s128sQQQiiii",
    "gemm_mx_sm90_ws": "=128s128sQQQiii",
    "gemm_mx_grouped_sm90_ws": "=128s128sQQQQIIIIIIII",
    "gemm_mx_splitk_reduce": "=QQQI",
    "quantize_mx_rowwise": "=QQQiiii",
    "ep_route_count": "=QQiii",
    "ep_route_scatter": "=QQQQQiiiii",
    "ep_gather_rows": "=QQQQQqqqqqqqq",
    "ep_recv_map": "=QQQQqiii",
}


def _value(x: Any) -> Any:
    """A kernel argument as the driver route packs it."""
    if isinstance(x, np.void):
        return x.tobytes()
    if isinstance(x, np.generic):
        return x.item()
    return x.data.ptr


class FakeKernel:
    """What :func:`mxrt.runtime.compiler.build` returns: ``.kernel.ptr`` (the CUfunction the driver route reads),
    ``max_dynamic_shared_size_bytes``, ``name``; calling it (CuPy's route) records the launch."""

    def __init__(self, spec: Any, d: Any, state: dict) -> None:
        self.name = spec.symbol
        self.defines = dict(d)
        self.kernel = types.SimpleNamespace(ptr=id(self))
        self.max_dynamic_shared_size_bytes = 0
        self._state = state

    def __call__(self, grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
        rec = ("cupy", self.name, tuple(grid), tuple(block), shared_mem, tuple(_value(a) for a in args))
        self._state["launches"].append(rec)


ARCH_NAME = "NVIDIA H100 80GB HBM3"


@contextlib.contextmanager
def install(*, record: bool = False) -> Iterator[dict]:
    """Fake cupy in ``sys.modules``, fake builds and an H100-shaped sm_90a :class:`~mxrt.runtime.Arch`.
    ``cuLaunchKernel`` is a C function that ignores its arguments and returns 0 (the launch route's packing runs in
    full), or with ``record`` a Python function that reads the packed parameters back (:data:`PARAM_FORMATS`).
    Yields a dict: ``builds`` (every FakeKernel built), ``launches`` (``(route, symbol, grid, block, shared_mem,
    values)`` of every launch, route "driver" or "cupy"), ``device`` (the current device id; settable)."""
    from mxrt.api import interop
    from mxrt.ops import gemm_sm90
    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler, cublas

    launch = importlib.import_module("mxrt.runtime.launch")  # the package exports a function of the same name
    state: dict = {"builds": [], "launches": [], "device": 0}
    kind = interop.array_kind

    def array_kind(x: Any) -> str:  # a FakeDeviceArray is an ndarray subclass: tell it apart first
        return "cupy" if type(x) is FakeDeviceArray else kind(x)

    fake_arch = arch_mod.Arch("nvidia", "sm_90a", ARCH_NAME, 32, 132, 232448, "sm_90a")
    cache: dict = {}
    by_ptr: dict = {}

    def build(spec: Any, d: Any, arch: Any, **_kw: Any) -> FakeKernel:
        spec.check_defines(d)  # what the real build does on a cache hit, so the profile has its cost
        if not spec.supports(arch.target):
            raise AssertionError(f"{spec.symbol} does not build for {arch.target}")
        key = (spec, d, arch.target)
        k = cache.get(key)
        if k is None:
            k = cache[key] = FakeKernel(spec, d, state)
            by_ptr[k.kernel.ptr] = k
            state["builds"].append(k)
        return k

    if record:

        def fn(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> int:
            k = by_ptr[func]
            fmt = PARAM_FORMATS.get(k.name)
            vals = None
            if fmt is not None:
                base = ctypes.c_void_p.from_address(params).value  # the first argument sits at the block's start
                vals = struct.unpack(fmt, ctypes.string_at(base, struct.calcsize(fmt)))
            state["launches"].append(("driver", k.name, (gx, gy, gz), (bx, by, bz), smem, vals))
            return 0

    else:
        # PyErr_Occurred ignores its arguments and returns NULL (0, "success") when no exception is set: a C no-op
        # with the cost of one ctypes call of cuLaunchKernel's 11 arguments
        noop = ctypes.cast(ctypes.pythonapi.PyErr_Occurred, ctypes.c_void_p).value
        fn = ctypes.PYFUNCTYPE(ctypes.c_int)(noop)  # PYFUNCTYPE: keeps the GIL PyErr_Occurred needs
        u = ctypes.c_uint
        fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    saved = {
        "cupy": sys.modules.get("cupy"),
        "build": compiler.build,
        "get_arch": arch_mod.get_arch,
        "driver": launch._DRIVER,
        "encode": gemm_sm90._driver,
        "cublas": cublas.available,
    }
    mods = [m for name, m in sys.modules.items() if name.startswith("mxrt.") and hasattr(m, "build")]
    mods += [m for name, m in sys.modules.items() if name.startswith("mxrt.") and hasattr(m, "get_arch")]
    patched: list[tuple[Any, str, Any]] = []
    try:
        sys.modules["cupy"] = _module(state)
        for m in mods:
            for name, new in (("build", build), ("get_arch", lambda *a, **k: fake_arch)):
                old = getattr(m, name, None)
                if old is saved[name]:
                    patched.append((m, name, old))
                    setattr(m, name, new)
        interop.array_kind = array_kind
        launch._DRIVER = fn
        gemm_sm90._driver = _encode  # cuTensorMapEncodeTiled
        cublas.available = lambda: False  # cuBLAS is not faked: the sm90_cublas path declines, the engines run
        _reset_caches()
        yield state
    finally:
        for m, name, old in reversed(patched):
            setattr(m, name, old)
        if saved["cupy"] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved["cupy"]
        interop.array_kind = kind
        launch._DRIVER = saved["driver"]
        gemm_sm90._driver = saved["encode"]
        cublas.available = saved["cublas"]
        _reset_caches()


def _encode(out, dtype, rank, ptr, dims, strides, box, estr, *rest) -> int:
    """cuTensorMapEncodeTiled's stand-in: writes what it encodes (address, dims, box) into the map, returns 0."""
    words = (ctypes.c_uint64 * 16).from_address(out)
    words[0], words[1], words[2] = ptr, dims[0], dims[1]
    words[3], words[4] = box[0], box[1]
    return 0


def _reset_caches() -> None:
    """Forget every plan / launch cache that may hold fake kernels or fake pointers."""
    from mxrt.api import gemm as api_gemm
    from mxrt.api import quant as api_quant
    from mxrt.ops import gemm_decode, gemm_sm90
    from mxrt.ops import quant as ops_quant

    launch = importlib.import_module("mxrt.runtime.launch")

    api_gemm.clear_plans()
    for cache in (
        gemm_sm90._LAUNCHES,
        gemm_sm90._KERNELS,
        gemm_sm90._maps,
        gemm_decode._LAUNCHES,
        gemm_decode._KERNELS,
        importlib.import_module("mxrt.runtime.compiler")._SMEM,
        ops_quant._ROWWISE_KERNELS,
        launch._BLOCKS,
    ):
        cache.clear()
    clear = getattr(api_quant, "clear_plans", None)
    if clear is not None:
        clear()
