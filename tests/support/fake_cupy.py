"""A stand-in ``cupy`` for walking mxrt's device dispatch on the CPU: the small-call path of ``gemm_mx`` /
``quantize_mx`` (plans, launch caches, argument packing) runs here exactly as on a GPU up to the driver call,
which is a C no-op. Used by tests/test_overhead_plans.py (cache keys and invalidation),
tests/test_grouped_gemm_sm90_ws_dispatch.py (the grouped engine's packed parameters) and
benchmarks/overhead_cpu_profile.py (where the host time of a call goes, before any device time is spent).

What it cannot show: CuPy's own costs (its allocator, ndarray construction, stream queries) and the driver's.

The grouped GEMMs' torch route runs here too on CPU torch (:func:`route_on_cpu`: the route's tensors on the CPU,
torch's stream the null one): views of torch memory (``cupy.cuda.UnownedMemory`` / ``MemoryPointer`` /
``ndarray(memptr=...)``), the stream-ordered copies and memsets (done at once on host memory), and, with
``install(effects=True)``, the route's kernels computed by their numpy twins (``dequantize_mx`` into bf16,
``grouped_offsets``), so torch's CPU ``_grouped_mm`` multiplies real operands (tests/test_grouped_plans.py).

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

import ml_dtypes
import numpy as np


class MemPtr:
    """CuPy's ``ndarray.data``: ``ptr`` (the address) and ``device_id``."""

    __slots__ = ("device_id", "ptr")

    def __init__(self, ptr: int, device_id: int = 0) -> None:
        self.ptr = ptr
        self.device_id = device_id


class FakeDeviceArray(np.ndarray):
    """A numpy array mxrt takes for a CuPy array (its type's module is ``cupy``); ``.data`` is a :class:`MemPtr`
    computed once per array, as CuPy's is an attribute. ``FakeDeviceArray(shape, dtype, memptr=..., strides=...)``
    views foreign host memory as CuPy's constructor views device memory (a :class:`Memory` keeps its owner)."""

    def __new__(cls, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None) -> FakeDeviceArray:
        if memptr is None:
            return np.ndarray.__new__(cls, shape, dtype, strides=strides)
        mem, off = memptr
        buf = (ctypes.c_char * max(mem.size - off, 1)).from_address(mem.ptr + off)
        out = np.ndarray.__new__(cls, shape, dtype, buffer=buf, strides=strides)
        out._owner = (mem, buf)
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self._mem = None
        self._owner = getattr(obj, "_owner", None)

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
    cp.full = lambda shape, value, dtype=None: np.full(shape, value, dtype).view(FakeDeviceArray)
    cp.ascontiguousarray = lambda x: np.ascontiguousarray(x).view(FakeDeviceArray)
    for name in ("uint8", "uint16", "int32", "int64", "float16", "float32"):
        setattr(cp, name, getattr(np, name))
    stream = types.SimpleNamespace(ptr=0, synchronize=lambda: None)
    runtime = types.SimpleNamespace(
        is_hip=False,
        getDevice=lambda: state["device"],
        deviceSynchronize=lambda: None,
        streamIsCapturing=lambda ptr: int(state["capturing"]),
        memcpyDeviceToDevice=3,
        memsetAsync=_memset,
        memcpyAsync=_memcpy,
        memcpy2DAsync=_memcpy2d,
    )
    cp.cuda = types.SimpleNamespace(
        get_current_stream=lambda: stream,
        runtime=runtime,
        UnownedMemory=Memory,
        MemoryPointer=lambda mem, off: (mem, off),
        Device=_Device,
        ExternalStream=_ExternalStream,
    )
    return cp


class Memory:
    """``cupy.cuda.UnownedMemory(ptr, size, owner, device_id)``: holds ``owner``."""

    def __init__(self, ptr: int, size: int, owner: Any, device_id: Any = 0) -> None:
        self.ptr, self.size, self.owner = ptr, size, owner


def _memset(ptr: int, value: int, size: int, stream: int) -> None:
    ctypes.memset(ptr, value, size)


def _memcpy(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    ctypes.memmove(dst, src, size)


def _memcpy2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, stream: int) -> None:
    assert width <= min(dpitch, spitch), (width, dpitch, spitch)
    for r in range(height):
        ctypes.memmove(dst + r * dpitch, src + r * spitch, width)


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
    "gemm_mx_decode_sm90_moe": "=128sQQQQQQQQIIIIIIQ",
    "gemm_mx_sm90": "=128s128sQQQiiii",
    "gemm_mx_sm90_ws": "=128s128sQQQiii",
    "gemm_mx_grouped_sm90_ws": "=128s128sQQQQIIIIIIII",
    "gemm_wgrad_bf16_sm90": "=128s128sQQQIIIIQQ",
    "gemm_mx_splitk_reduce": "=QQQI",
    "quantize_mx_rowwise": "=QQQiiii",
    "quantize_mx_dual": "=QQQQQiiii",
    "transpose_u8": "=QQiiQQiii",
    "dequantize_mx": "=QQQQIIIII",
    "grouped_offsets": "=QQQIIqqq",
    "gemm_mx_grouped_generic": "=QQQQQQIIIIIIIIQ",
    "ep_route_count": "=QQiii",
    "ep_route_scatter": "=QQQQQiiiii",
    "ep_gather_rows": "=QQQQQqqqqqqqq",
    "ep_recv_map": "=QQQQqiii",
}


def _host(ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """The host memory at ``ptr`` (a fake device pointer) as a writable C-contiguous numpy array."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    return np.frombuffer((ctypes.c_char * max(n, 1)).from_address(ptr), dt, count=int(np.prod(shape))).reshape(shape)


def _dequantize_effect(defines: dict, vals: tuple) -> None:
    """kernels_src/quant/dequantize_mx.hip by its numpy twin: row-major scales, bf16 out (the route's pass)."""
    from mxrt import codes
    from mxrt.formats import MXArray

    q, s, out, _gate, rows, k, ldo, kbs, _flags = vals
    fmt = {v: n for n, v in codes.FMT_CODES.items()}[defines["EFMT"]]
    assert defines["SL"] == 0 and defines["OUT_DTYPE"] == codes.GEMM_OUT_DTYPE_CODES["bfloat16"]
    width = -(-k // 2) if fmt == "e2m1" else k
    x = MXArray(_host(q, (rows, width), np.uint8).copy(), _host(s, (rows, kbs), np.uint8).copy(), fmt, 32, 1,
                (rows, k), "given").dequantize(np.float32)  # fmt: skip
    o = _host(out, (rows, ldo), np.uint16)
    o[:, :k] = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    o[:, k:] = 0


def _offsets_effect(defines: dict, vals: tuple) -> None:
    """kernels_src/gemm/grouped_offsets.hip by its numpy twin (mxrt.ops.grouped_gemm_torch.offsets_numpy)."""
    from mxrt.ops.grouped_gemm_torch import offsets_numpy

    lens, offs, gate, g, lens_i64, cap, pad, total = vals
    ends, bad = offsets_numpy(_host(lens, (g,), np.int64 if lens_i64 else np.int32), cap, pad, total)
    _host(offs, (g,), np.int32)[:] = ends
    if gate and bad:
        _host(gate, (1,), np.uint32)[0] |= 2


#: kernels whose work ``install(effects=True)`` does on the host (the torch route's producers of torch's operands)
EFFECTS = {"dequantize_mx": _dequantize_effect, "grouped_offsets": _offsets_effect}


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
        self.effect(rec[-1])

    def effect(self, vals: tuple | None) -> None:
        """Do the kernel's work on the host where ``install(effects=True)`` asks for it (:data:`EFFECTS`)."""
        fn = EFFECTS.get(self.name) if self._state["effects"] else None
        if fn is not None:
            fn(self.defines, vals)


ARCH_NAME = "NVIDIA H100 80GB HBM3"


@contextlib.contextmanager
def install(*, record: bool = False, effects: bool = False) -> Iterator[dict]:
    """Fake cupy in ``sys.modules``, fake builds and an H100-shaped sm_90a :class:`~mxrt.runtime.Arch`.
    ``cuLaunchKernel`` is a C function that ignores its arguments and returns 0 (the launch route's packing runs in
    full), or with ``record`` a Python function that reads the packed parameters back (:data:`PARAM_FORMATS`);
    ``effects`` (with ``record``) also runs :data:`EFFECTS` on both launch routes.
    Yields a dict: ``builds`` (every FakeKernel built), ``launches`` (``(route, symbol, grid, block, shared_mem,
    values)`` of every launch, route "driver" or "cupy"), ``device`` (the current device id; settable),
    ``capturing`` (what ``streamIsCapturing`` answers; settable)."""
    from mxrt.api import interop
    from mxrt.ops import gemm_sm90
    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler, cublas

    launch = importlib.import_module("mxrt.runtime.launch")  # the package exports a function of the same name
    state: dict = {"builds": [], "launches": [], "device": 0, "capturing": False, "effects": effects}
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
            k.effect(vals)
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
        "launch_ex": launch._LAUNCH_EX,
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
        launch._LAUNCH_EX = False  # no cuLaunchKernelEx: a real one would get fake functions (a test may set its own)
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
        launch._LAUNCH_EX = saved["launch_ex"]
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
    from mxrt.ops import gemm_decode, gemm_sm90, grouped_gemm_sm90_ws, grouped_wgrad_bf16
    from mxrt.ops import quant as ops_quant

    launch = importlib.import_module("mxrt.runtime.launch")

    api_gemm.clear_plans()
    importlib.import_module("mxrt.api.moe_gemm").clear_plans()
    importlib.import_module("mxrt.api.grouped_gemm").clear_plans()
    importlib.import_module("mxrt.api.deep_gemm").clear_plans()
    for cache in (
        gemm_sm90._LAUNCHES,
        gemm_sm90._KERNELS,
        gemm_sm90._maps,
        gemm_decode._LAUNCHES,
        gemm_decode._KERNELS,
        importlib.import_module("mxrt.runtime.compiler")._SMEM,
        ops_quant._ROWWISE_KERNELS,
        grouped_gemm_sm90_ws._KERNELS,
        grouped_wgrad_bf16._KERNELS,
        launch._BLOCKS,
    ):
        cache.clear()
    clear = getattr(api_quant, "clear_plans", None)
    if clear is not None:
        clear()


@contextlib.contextmanager
def route_on_cpu() -> Iterator[None]:
    """The grouped GEMMs' torch route on CPU torch (inside :func:`install`): its tensors on the CPU, torch's
    current stream the null stream CuPy's stand-in reports, torch taken as usable."""
    from mxrt.runtime import torch_grouped

    saved = (torch_grouped.DEVICE_TYPE, torch_grouped._raw_stream, torch_grouped.unavailable)
    torch_grouped.DEVICE_TYPE = "cpu"
    torch_grouped._raw_stream = lambda torch, dev: 0
    torch_grouped.unavailable = lambda: None
    try:
        yield
    finally:
        torch_grouped.DEVICE_TYPE, torch_grouped._raw_stream, torch_grouped.unavailable = saved
