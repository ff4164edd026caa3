"""The Hopper (sm_90a) GEMM path ``sm90_wgmma``: kernels_src/gemm/gemm_mx_sm90.hip.

One fp8 ``wgmma`` m64n128k32 per MX block of 32 (the K of one fp8 wgmma is the MX block), each partial from zero
and promoted into an fp32 accumulator with the block's two scales (``acc = fma(P * 2^sb, 2^sa, acc)``). CTA tile
(:func:`plan`): 256 x 128 (two warpgroups of two m64 row halves) by default, 64 x 128 (one warpgroup) for
m <= 64, 128 x 128 for m <= 128 and for fp32 results. TMA copies the code tiles (128-byte swizzle), plain loads the
scales: row-major, or any preshuffled layout read in place (defines SLA / SLB: the layout's index map in the fill
threads, so a preshuffled operand costs no unshuffle pass and no extra kernel argument). e2m1 operands are expanded
to e4m3 bytes first (kernels_src/gemm/e2m1_to_e4m3.hip; every e2m1 value is exact in e4m3), into a K padded to 16.

Split-K (grid z = split): split z covers ``p.k_ranges[z]`` (32-element boundaries); deterministic mode writes fp32
workspace slices reduced in split order, atomic mode adds with fp32 or packed bf16x2 / f16x2 atomics
(:mod:`mxrt.ops.gemm_splitk`, shared with the generic path).

CUDA graphs: the two CUtensorMaps travel BY VALUE as ``__grid_constant__`` kernel parameters (a 128-byte numpy
structured scalar, which CuPy passes by value), so a call does no host-to-device copy and can be captured on
fresh buffers. Pool allocations during a capture (deterministic split-K workspace, the expanded e2m1 codes) are
referred to by the graph after the call returns: see :mod:`mxrt.ops.gemm_splitk`.

Declines (the ``generic`` path serves these): an fp8 operand with ``k % 16 != 0`` or a
code base that is not 16-byte aligned (TMA strides), sizes of 2^31 or more, split_k > 65535, and float32 output
with an fp8 operand (measured: the fp8 wgmma partials give ~2-5e-5 relative error, over the 1e-5 bar).
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES, SCALE_LAYOUT_CODES, SCALE_LAYOUT_TURBO16X4_U32
from ..layouts import scale_layout_shape
from ..runtime import alloc
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch, prepare
from . import gemm_sm90_kernels
from .gemm_paths import DeviceGemm, GemmPath, PreparedGemm, register_gemm_path
from .gemm_splitk import F32, prepare_split_k, run_split_k

NAME = "sm90_wgmma"
TARGET = "sm_90a"
PRIORITY = 20


def stage_bytes(bm: int, bn: int) -> int:
    """Shared memory of one pipeline stage: A and B code tiles, fp32 scale factors of its 4 k32 steps."""
    return bm * 128 + bn * 128 + 4 * bm * 4 + 4 * 4 * (bn // 4 + 4) * 4


def smem_bytes(bm: int, bn: int, stages: int) -> int:
    return stages * stage_bytes(bm, bn) + 20 * stages + 1024  # + mbarriers, wide flags, 1024-byte alignment slack


_LIMIT = 2**31

# ---- tensor maps (driver API through ctypes: CuPy does not expose cuTensorMapEncodeTiled) -------------------
_CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0
_CU_TENSOR_MAP_INTERLEAVE_NONE = 0
_CU_TENSOR_MAP_SWIZZLE_NONE = 0
_CU_TENSOR_MAP_SWIZZLE_64B = 2
_CU_TENSOR_MAP_SWIZZLE_128B = 3
_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0  # out-of-bounds elements read as zero
_TMAP_BYTES = 128
#: one CUtensorMap as a numpy structured scalar: CuPy passes any numpy scalar by value as a kernel argument (its
#: bytes), which the kernel reads as ``const __grid_constant__ mxrt_tmap`` (128 bytes, 64-byte aligned there)
TMAP_DTYPE = np.dtype([("opaque", np.uint64, 16)])
_lock = threading.Lock()
_driver: Any = None
_maps: OrderedDict[tuple, Any] = OrderedDict()  # host bytes only: a map is encoded on the host per buffer
_MAPS_KEPT = 256


def _encode_tiled() -> Any:
    global _driver
    with _lock:
        if _driver is None:
            lib = ctypes.CDLL("libcuda.so.1")
            fn = lib.cuTensorMapEncodeTiled
            fn.restype = ctypes.c_int
            fn.argtypes = [
                ctypes.c_void_p,  # CUtensorMap* (64-byte aligned, 128 bytes)
                ctypes.c_int,  # CUtensorMapDataType
                ctypes.c_uint32,  # rank
                ctypes.c_void_p,  # global address
                ctypes.POINTER(ctypes.c_uint64),  # globalDim[rank]
                ctypes.POINTER(ctypes.c_uint64),  # globalStrides[rank - 1] (bytes)
                ctypes.POINTER(ctypes.c_uint32),  # boxDim[rank]
                ctypes.POINTER(ctypes.c_uint32),  # elementStrides[rank]
                ctypes.c_int,  # interleave
                ctypes.c_int,  # swizzle
                ctypes.c_int,  # l2 promotion
                ctypes.c_int,  # oob fill
            ]
            _driver = fn
    return _driver


def _encode_map(
    ptr: int, dims: tuple[int, ...], strides: tuple[int, ...], box: tuple[int, ...], swizzle: int, what: str
) -> np.ndarray:
    """The 128-byte uint8 CUtensorMap of ``dims`` (innermost first; ``strides`` in bytes of dims 1..), box ``box``,
    zero fill out of bounds; ``what`` names the tensor in the error."""
    buf = np.zeros(_TMAP_BYTES + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    rank = len(dims)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    res = _encode_tiled()(
        buf.ctypes.data + off,
        _CU_TENSOR_MAP_DATA_TYPE_UINT8,
        rank,
        ptr,
        (u64 * rank)(*dims),
        (u64 * (rank - 1))(*strides),
        (u32 * rank)(*box),
        (u32 * rank)(*([1] * rank)),
        _CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle,
        _CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        _CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if res != 0:
        raise RuntimeError(f"gemm_mx: cuTensorMapEncodeTiled failed with CUresult {res} for {what} at {ptr:#x}")
    return buf[off : off + _TMAP_BYTES].copy()


def tensor_map_2d(
    ptr: int, rows: int, cols: int, box_rows: int = 128, box_cols: int = 128, stride: int | None = None
) -> np.ndarray:
    """The 128-byte CUtensorMap of a row-major uint8 ``[rows, cols]`` matrix at device address ``ptr`` (rows
    ``stride`` bytes apart, default ``cols``), box ``box_rows`` x ``box_cols`` bytes (128: 128-byte swizzle; 64:
    64-byte swizzle), zero fill out of bounds (``cols % 16 == 0``, ``stride % 16 == 0``, ``ptr % 16 == 0``)."""
    swizzle = _CU_TENSOR_MAP_SWIZZLE_128B if box_cols == 128 else _CU_TENSOR_MAP_SWIZZLE_64B
    stride = cols if stride is None else stride
    return _encode_map(ptr, (cols, rows), (stride,), (box_cols, box_rows), swizzle, f"a uint8 [{rows}, {cols}] matrix")


def tensor_map_w16(ptr: int, np_: int, kk: int, box_bytes: int, box_tiles: int) -> np.ndarray:
    """The 3-D CUtensorMap of an aiter16x16 weight buffer ``[np_, kk]`` (MX_REFERENCE.md 3b': byte (n, c) at
    ``n0*16*kk + k0*512 + k1*256 + n1*16 + k2``, so chunk column ``c // 16`` of a 16-row tile is 256 contiguous
    bytes) as dims (256 B, kk/16 chunk columns, np_/16 row tiles), strides (256, 16*kk), box (256, box_bytes/16,
    box_tiles): one stage of ``box_bytes`` bytes per row for ``16*box_tiles`` rows, copied in the layout's own order
    (no swizzle), zero fill past the last row tile."""
    dims = (256, kk // 16, np_ // 16)
    return _encode_map(ptr, dims, (256, 16 * kk), (256, box_bytes // 16, box_tiles), _CU_TENSOR_MAP_SWIZZLE_NONE,
                       f"an aiter16x16 weight buffer [{np_}, {kk}]")  # fmt: skip


def tensor_map_w16_arg(ptr: int, np_: int, kk: int, box_bytes: int, box_tiles: int, device_id: int) -> np.void:
    """:func:`tensor_map_w16` as a kernel argument, cached with :func:`tensor_map_arg`'s maps."""
    return _cached_arg(("w16", device_id, ptr, np_, kk, box_bytes, box_tiles),
                       lambda: tensor_map_w16(ptr, np_, kk, box_bytes, box_tiles))  # fmt: skip


def _cached_arg(key: tuple, make: Callable[[], np.ndarray]) -> np.void:
    """The kernel argument of the map ``make()`` encodes, from the host-side cache of encoded maps (LRU, at most
    ``_MAPS_KEPT``; ``key`` names everything the map encodes)."""
    with _lock:
        hit = _maps.get(key)
        if hit is not None:
            _maps.move_to_end(key)
            return hit
    arg = make().view(TMAP_DTYPE)[0]
    with _lock:
        _maps[key] = arg
        while len(_maps) > _MAPS_KEPT:
            _maps.popitem(last=False)
    return arg


def tensor_map_arg(
    ptr: int,
    rows: int,
    cols: int,
    box_rows: int,
    device_id: int | None = None,
    box_cols: int = 128,
    stride: int | None = None,
) -> np.void:
    """:func:`tensor_map_2d` as a kernel argument (a 128-byte numpy scalar passed by value), cached on the host by
    what it encodes (a host-side cache of bytes: nothing is copied to the device). ``device_id``: the buffer's
    device (default: CuPy's current one)."""
    if device_id is None:
        import cupy

        device_id = cupy.cuda.Device().id
    key = (device_id, ptr, rows, cols, box_rows, box_cols, stride)
    return _cached_arg(key, lambda: tensor_map_2d(ptr, rows, cols, box_rows, box_cols, stride))


class TensorMapMemo:
    """One operand's tensor map as launch bytes, for a fixed shape, box and device (a prepared plan): the last
    pointer's bytes are kept (a weight is the same buffer on every call), any other pointer goes through
    :func:`tensor_map_arg`'s cache."""

    __slots__ = ("_args", "_last")

    def __init__(
        self, rows: int, cols: int, box_rows: int, device_id: int, box_cols: int = 128, stride: int | None = None
    ) -> None:
        self._args = (rows, cols, box_rows, device_id, box_cols, stride)
        self._last: tuple[int, bytes] = (-1, b"")

    def __call__(self, ptr: int) -> bytes:
        last = self._last
        if last[0] == ptr:
            return last[1]
        raw = tensor_map_arg(ptr, *self._args).tobytes()
        self._last = (ptr, raw)  # one tuple swap: safe across threads
        return raw


# ---- the path ------------------------------------------------------------------------------------------


def _padded_k(dg: DeviceGemm) -> int:
    """K extent of the codes the kernel reads: k, or k rounded up to 16 when every operand is expanded e2m1."""
    k = dg.p.k
    return -(-k // 16) * 16 if dg.p.a_fmt == dg.p.b_fmt == "e2m1" else k


def supports(dg: DeviceGemm) -> str | None:
    p = dg.p
    if p.split_k > MAX_GRID_YZ:
        return f"split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)"
    if dtype_name(p.out_dtype) not in GEMM_OUT_DTYPE_CODES:
        return f"out dtype {dtype_name(p.out_dtype)}"
    if dtype_name(p.out_dtype) == "float32" and not p.a_fmt == p.b_fmt == "e2m1":
        # measured on an H100: the fp8 tensor cores' k32 partials carry ~2-5e-5 relative error (NOTES.md);
        # e2m1 x e2m1 partials are exact (few significant bits), so fp32 output stays here for MXFP4
        return "float32 output with an fp8 operand (the fp8 wgmma partials miss the 1e-5 relative bar)"
    if p.a_fmt not in gemm_sm90_kernels.SM90_FMT_CODES or p.b_fmt not in gemm_sm90_kernels.SM90_FMT_CODES:
        return f"formats ({p.a_fmt}, {p.b_fmt})"
    if _padded_k(dg) % 16:
        return f"k = {p.k}: an fp8 operand needs k % 16 == 0 (TMA row strides are 16-byte multiples)"
    for name, fmt, codes in (("a", p.a_fmt, dg.a_codes), ("b", p.b_fmt, dg.b_codes)):
        if fmt != "e2m1" and codes.data.ptr % 16:
            return f"{name} codes start at {codes.data.ptr:#x}, not 16-byte aligned (TMA)"
    if max(p.m, p.n, _padded_k(dg)) >= _LIMIT or max(p.m, p.n) * max(p.k_blocks, 1) >= _LIMIT:
        return "sizes of 2^31 or more"
    for rows, layout in ((p.m, p.a_scale_layout), (p.n, p.b_scale_layout)):
        if layout is not None and np.prod(scale_layout_shape(layout, rows, p.k_blocks), dtype=np.int64) >= _LIMIT:
            return f"a {layout} scale storage of 2^31 bytes or more (32-bit scale offsets)"
    if "e2m1" in (p.a_fmt, p.b_fmt) and max(p.m, p.n) * _padded_k(dg) >= 16 * 2**31:
        return "an e2m1 operand of 2^35 elements or more (the expansion kernel's 32-bit chunk index)"
    return None


def scale_layout_code(layout: str | None, scales: Any) -> int:
    """Define SLA / SLB of a scale operand: its layout's code, turbo16x4 stored as uint32 words its own code."""
    if layout == "turbo16x4" and dtype_name(scales.dtype) == "uint32":
        return SCALE_LAYOUT_TURBO16X4_U32
    return SCALE_LAYOUT_CODES[layout]


def fp8_operands(dg: DeviceGemm, kp: int) -> tuple[Any, Any]:
    """The code matrices the fp8 kernels read: each e2m1 operand expanded exactly to e4m3 bytes ``[rows, kp]``
    (a pooled buffer on the current stream), fp8 operands as they are. Shared by ``sm90_wgmma`` and ``sm90_ws``."""
    p = dg.p
    a = _expand_e2m1(dg.a_codes, p.m, p.k, kp, dg.arch) if p.a_fmt == "e2m1" else dg.a_codes
    b = _expand_e2m1(dg.b_codes, p.n, p.k, kp, dg.arch) if p.b_fmt == "e2m1" else dg.b_codes
    return a, b


def _expand_e2m1(codes: Any, rows: int, k: int, kp: int, arch: Any) -> Any:
    out = alloc.empty((rows, kp), np.uint8)
    if rows == 0 or kp == 0:
        return out
    kernel = build(gemm_sm90_kernels.E2M1_TO_E4M3, defines(THREADS=gemm_sm90_kernels.E2M1_TO_E4M3_THREADS), arch)
    chunks = rows * kp // 16
    grid = max(1, min(-(-chunks // gemm_sm90_kernels.E2M1_TO_E4M3_THREADS), 65535))
    cfg = LaunchConfig((grid, 1, 1), (gemm_sm90_kernels.E2M1_TO_E4M3_THREADS, 1, 1))
    launch("gemm_mx", kernel, cfg, (codes, out, np.int32(rows), np.int32(k), np.int32(kp)))
    return out


@dataclass(frozen=True)
class Sm90Config:
    """Tuning defines of one gemm_mx_sm90 build (see the kernel header)."""

    stages: int
    dbuf: int
    bm: int
    bn: int

    @property
    def threads(self) -> int:
        return 256 if self.bm == 256 else 2 * self.bm  # BM 256: two warpgroups of 128 rows; else 64 rows each


#: 256 x 128, two warpgroups of two m64 row halves sharing the B factors: the fastest at large M (RESULTS.md)
LARGE = Sm90Config(
    gemm_sm90_kernels.SM90_STAGES, gemm_sm90_kernels.SM90_DBUF, gemm_sm90_kernels.SM90_BM, gemm_sm90_kernels.SM90_BN
)
#: 128 x 128, two partials in flight: fp32 results (the 256 x 128 fp32 epilogue spilled) and 64 < m <= 128
MEDIUM = Sm90Config(6, 1, 128, 128)
#: 64 x 128, one warpgroup, two partials in flight, two CTAs per SM: m <= 64 (decode), where the weight read
#: bounds the time and split-K fills the SMs
SMALL = Sm90Config(4, 1, 64, 128)


def plan(m: int, writes_f32: bool) -> Sm90Config:
    """The tile for a problem of ``m`` rows; ``writes_f32``: the kernel stores fp32 (fp32 out or a split-K
    workspace)."""
    if m <= 64:
        return SMALL
    if m <= 128 or writes_f32:
        return MEDIUM
    return LARGE


_KERNELS: dict = {}


def _kernel(d: Any, arch: Any, c: Sm90Config) -> tuple[Any, int]:
    """The built kernel and its dynamic shared memory, the attribute set once per build (reading it back is a
    driver query the small-problem path should not pay per call)."""
    key = (d, arch)
    hit = _KERNELS.get(key)
    if hit is None:
        kernel = build(gemm_sm90_kernels.GEMM_MX_SM90, d, arch)
        smem = smem_bytes(c.bm, c.bn, c.stages)
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        hit = _KERNELS[key] = (kernel, smem)
    return hit


_LAUNCHES: dict = {}  # (problem sizes, formats, out code, atomic, tune, arch) -> (kernel, LaunchConfig, Sm90Config)


def _launch_entry(dg: DeviceGemm, kp: int, out_code: int, atomic: bool, tune: dict) -> tuple[Any, LaunchConfig, Any]:
    p = dg.p
    sl = (scale_layout_code(p.a_scale_layout, dg.a_scales), scale_layout_code(p.b_scale_layout, dg.b_scales))
    key = (p.m, p.n, kp, p.split_k, p.a_fmt, p.b_fmt, out_code, atomic, sl, tuple(sorted(tune.items())), dg.arch)
    hit = _LAUNCHES.get(key)  # the small-problem dispatch: defines, build lookup and grid once per problem class
    if hit is None:
        if len(_LAUNCHES) >= 4096:
            _LAUNCHES.clear()
        hit = _LAUNCHES[key] = _launch_plan(dg, kp, out_code, atomic, tune, sl)
    return hit


def _launch(dg: DeviceGemm, a: Any, b: Any, kp: int, dst: Any, out_code: int, atomic: bool, tune: dict) -> None:
    p = dg.p
    kernel, cfg, c = _launch_entry(dg, kp, out_code, atomic, tune)
    dev = a.data.device_id
    tma = tensor_map_arg(a.data.ptr, p.m, kp, c.bm, dev)
    tmb = tensor_map_arg(b.data.ptr, p.n, kp, c.bn, dev)
    i32 = np.int32
    args = (tma, tmb, dg.a_scales, dg.b_scales, dst, i32(p.m), i32(p.n), i32(kp), i32(p.split_k))
    launch(p.op, kernel, cfg, args)


def _launch_plan(
    dg: DeviceGemm, kp: int, out_code: int, atomic: bool, tune: dict, sl: tuple[int, int]
) -> tuple[Any, LaunchConfig, Any]:
    p = dg.p
    c = plan(p.m, out_code == F32)
    c = Sm90Config(*(tune.get(f, getattr(c, f)) for f in ("stages", "dbuf", "bm", "bn")))
    d = defines(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.a_fmt],
        ATOMIC=int(atomic),
        B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.b_fmt],
        BM=c.bm,
        BN=c.bn,
        DBUF=c.dbuf,
        DIAG=tune.get("diag", 0),
        OUT_DTYPE=out_code,
        SLA=sl[0],
        SLB=sl[1],
        STAGES=c.stages,
    )
    kernel, smem = _kernel(d, dg.arch, c)
    tiles = -(-p.m // c.bm) * -(-p.n // c.bn)
    return kernel, LaunchConfig((tiles, 1, p.split_k), (c.threads, 1, 1), smem), c


def run(dg: DeviceGemm, **tune: int) -> None:
    """Launch on the current stream (the reduce / zeroing of split-K included). ``tune`` overrides the kernel's
    tuning defines (``stages``, ``dbuf``, ``bm``, ``bn``, ``diag``; benchmarks/gemm_sm90_dev.py); ``diag != 0``
    builds an inexact timing diagnostic."""
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    kp = _padded_k(dg)
    a, b = fp8_operands(dg, kp)
    run_split_k(dg, lambda dst, out_code, atomic: _launch(dg, a, b, kp, dst, out_code, atomic, tune))
    # the expanded e2m1 buffers must outlive the kernels: CuPy's pool reuses a freed block only for work queued
    # after the free on the same stream, so dropping them here is safe (outside a graph capture)


def prepare_run(dg: DeviceGemm) -> PreparedGemm | None:
    """:func:`run` for ``dg``'s plan with the launches prepared (fp8 operands; e2m1 ones are expanded per call
    and stay on :func:`run`)."""
    p = dg.p
    if p.is_empty or "e2m1" in (p.a_fmt, p.b_fmt):
        return None
    kp, dev = p.k, dg.a_codes.data.device_id

    def prepare_gemm(out_code: int, atomic: bool) -> tuple[Any, Any] | None:
        kernel, cfg, c = _launch_entry(dg, kp, out_code, atomic, {})
        i32 = np.int32
        tma = tensor_map_arg(dg.a_codes.data.ptr, p.m, kp, c.bm, dev)
        sample = (tma, tma, dg.a_scales, dg.b_scales, dg.out, i32(0), i32(0), i32(0), i32(0))
        pl = prepare(p.op, kernel, cfg, sample)
        if pl is None:
            return None
        map_a, map_b = TensorMapMemo(p.m, kp, c.bm, dev), TensorMapMemo(p.n, kp, c.bn, dev)
        m, n, split = p.m, p.n, p.split_k

        def g(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, dst_ptr: int) -> None:
            pl(map_a(a_ptr), map_b(b_ptr), sa_ptr, sb_ptr, dst_ptr, m, n, kp, split)

        return g, pl

    return prepare_split_k(dg, prepare_gemm)


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run, prepare_run))
