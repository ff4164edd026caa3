"""The quant kernels themselves, run on the host by a SIMT emulator, against their numpy twins bit for bit.

tests/support/simt_host.cpp compiles kernels_src/quant/*.hip for the CPU (each GPU thread a fiber, barriers and
warp shuffles switch fibers, divergent shuffles and missed barriers are errors) and launches them with the
flags and grid that mxrt/ops/quant.py computes. This pins lane maps, guards, fused scale layouts and the fast
encoder without a GPU; ``MXRT_HOST_FTZ`` builds flush fp32 subnormals the way NVRTC's -ftz=true does. The
hardware fp8 conversion of sm_89+ is the one path this cannot reach (tests/test_gpu_quant.py covers it).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import build_simt_lib
from support.inputs import layout_storage, make_input
from test_device_codecs import _compiler

import mxrt
from mxrt import codes
from mxrt.ops import quant as ops_quant
from mxrt.ops import quant_kernels

# host SIMT emulation of the quant kernels (tests/support/simt_host.cpp): ~40 s on 2 cores; CI still runs it
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
POISON = 0xA5
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
_LIBS: dict[tuple, ctypes.CDLL] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if _compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt")


def _lib(build_dir: Path, kernel: int, ftz: bool = False, **defines: int) -> ctypes.CDLL:
    key = (kernel, ftz, tuple(sorted(defines.items())))
    if key not in _LIBS:
        tag = "_".join(f"{k}{v}" for k, v in sorted(defines.items())) + ("_ftz" if ftz else "")
        flags = [f"-D{k}={v}" for k, v in defines.items()] + [f"-DSIMT_KERNEL={kernel}"]
        flags += ["-DMXRT_HOST_FTZ"] if ftz else []
        _LIBS[key] = build_simt_lib(build_dir / f"simt_{kernel}_{tag}.so", "simt_host.cpp", flags)
    return _LIBS[key]


def _p(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _poisoned(shape) -> np.ndarray:
    return np.full(shape, POISON, np.uint8)


def _aligned_copy(x: np.ndarray, offset: int = 0) -> np.ndarray:
    """x's bits in a fresh buffer starting ``offset`` bytes past a 64-byte boundary (to test unaligned views)."""
    raw = np.ascontiguousarray(x).view(np.uint8).ravel()
    buf = np.zeros(raw.size + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    buf[start : start + raw.size] = raw
    return buf[start : start + raw.size]


def _aligned_poisoned(shape) -> np.ndarray:
    """A poisoned byte array starting on a 64-byte boundary (the kernels' 16-byte accesses)."""
    n = int(np.prod(shape))
    buf = np.full(n + 64, POISON, np.uint8)
    start = (-buf.ctypes.data) % 64
    return buf[start : start + n].reshape(shape)


def run_transpose(build_dir, src0, dst0, src1, dst1, order=0) -> None:
    """kernels_src/quant/transpose_u8.hip on the host: dst0 = src0.T, dst1 = src1.T, launched as mxrt/ops/quant.py."""
    lib = _lib(build_dir, 2, THREADS=quant_kernels.TRANSPOSE_U8_THREADS)
    cfg, args = ops_quant.transpose_launch(src0, dst0, src1, dst1)
    (r0, c0), (r1, c1) = src0.shape, src1.shape
    rc = lib.simt_transpose(
        _p(src0), _p(dst0), r0, c0, _p(src1), _p(dst1), r1, c1, int(args[-1]), cfg.grid[0], order
    )  # fmt: skip
    assert rc == 0, lib.simt_error().decode()


def _scale_buf(layout: str | None, rows: int, cols: int) -> np.ndarray:
    if layout is None:
        return _poisoned((rows, cols))
    sm, sn = mxrt.scale_layout_shape(layout, rows, cols)
    return _poisoned((sm * sn,))


def _same(what: str, got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.shape}"
    bad = np.argwhere(got != want)
    assert bad.size == 0, (
        f"{what}: {len(bad)} mismatches, first at {tuple(bad[0])}: got {got[tuple(bad[0])]:#x}, "
        f"want {want[tuple(bad[0])]:#x}; poison left {int(np.count_nonzero(got == POISON))}"
    )


def run_rowwise(build_dir, x, fmt, mode, layout=None, ftz=False, order=0, x_offset=0):
    m, k = x.shape
    name = str(x.dtype)
    lib = _lib(
        build_dir,
        0,
        ftz,
        FMT=codes.FMT_CODES[fmt],
        IN_DTYPE=codes.IN_DTYPE_CODES[name],
        SCALE_LAYOUT=codes.SCALE_LAYOUT_CODES[layout],
        THREADS=quant_kernels.QUANT_ROWWISE_THREADS,
    )
    xb = _aligned_copy(x, x_offset)
    q = _poisoned((m, -(-k // 2) if fmt == "e2m1" else k))
    nb = -(-k // 32)
    s = _scale_buf(layout, m, nb)
    flags, cfg = ops_quant.rowwise_launch(m, k, name, xb.ctypes.data, q.ctypes.data, fmt)
    mode_code = codes.SCALE_MODE_CODES[mode]
    rc = lib.simt_run(_p(xb), _p(q), _p(s), None, None, m, k, mode_code, flags, cfg.grid[0], 1, order)
    assert rc == 0, lib.simt_error().decode()
    return q, ops_quant.scale_view(s, layout, m, nb), flags


def run_dual(
    build_dir, x, fmt, mode, block_2d=False, layout=None, ftz=False, order=0, x_offset=0, rows_fast=None, scales_t=False
):
    m, k = x.shape
    name = str(x.dtype)
    knobs = {} if rows_fast is None else {"DUAL_ROWS_FAST": rows_fast}
    rows_fast = ops_quant.DUAL_ROWS_FAST if rows_fast is None else rows_fast
    lib = _lib(
        build_dir,
        1,
        ftz,
        **knobs,
        BLOCK_2D=int(block_2d),
        FMT=codes.FMT_CODES[fmt],
        IN_DTYPE=codes.IN_DTYPE_CODES[name],
        SCALE_LAYOUT=codes.SCALE_LAYOUT_CODES[layout],
        THREADS=quant_kernels.QUANT_DUAL_THREADS,
    )
    xb = _aligned_copy(x, x_offset)
    packed = fmt == "e2m1"
    q_row = _poisoned((m, -(-k // 2) if packed else k))
    q_col = _poisoned((k, -(-m // 2) if packed else m))
    s_row, s_col = _scale_buf(layout, m, -(-k // 32)), _scale_buf(layout, k, -(-m // 32))
    flags, cfg = ops_quant.dual_launch(m, k, name, xb.ctypes.data, q_row.ctypes.data, q_col.ctypes.data, fmt, rows_fast)
    if scales_t:  # as mxrt/ops/quant.py under FLAG_SCALES_T: transposed scales, then the transpose kernel
        assert layout is None and not (m | k) % 16, "the kernel's condition for FLAG_SCALES_T"
        st_row, st_col = _aligned_poisoned((-(-k // 32), m)), _aligned_poisoned((-(-m // 32), k))
        flags |= codes.FLAG_SCALES_T
    else:
        st_row, st_col = s_row, s_col
    rc = lib.simt_run(
        _p(xb), _p(q_row), _p(st_row), _p(q_col), _p(st_col), m, k, codes.SCALE_MODE_CODES[mode], flags,
        cfg.grid[0], cfg.grid[1], order,
    )  # fmt: skip
    assert rc == 0, lib.simt_error().decode()
    if scales_t:
        run_transpose(build_dir, st_row, s_row, st_col, s_col, order)
    return (
        q_row,
        ops_quant.scale_view(s_row, layout, m, -(-k // 32)),
        q_col,
        ops_quant.scale_view(s_col, layout, k, -(-m // 32)),
    )


ROW_CASES = [(7, 31), (7, 33), (3, 4096), (64, 256), (5, 96), (130, 64)]
# (96, 320): whole 64-row interior tiles with every 16-byte flag set (e2m1 included) beside edge tiles
DUAL_CASES = [(7, 33), (33, 7), (64, 256), (100, 130), (65, 129), (128, 64), (96, 320)]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
def test_rowwise_kernel_bitexact(build_dir, fmt, dtype):
    for si, shape in enumerate(ROW_CASES):
        for ki, kind in enumerate(("random", "wide", "edge")):
            mode = ("rceil", "floor", "even", "ceil")[(si + ki) % 4]
            x = make_input(shape, kind, DTYPES[dtype], seed=10 * si + ki)
            want = mxrt.quantize_mx(x, fmt, scale_mode=mode, backend="numpy")
            q, s, flags = run_rowwise(build_dir, x, fmt, mode)
            tag = f"rowwise {fmt}/{mode}/{dtype} {shape} {kind} flags {flags}"
            _same(f"scales {tag}", s, want.scales)
            _same(f"data {tag}", q, want.data)


def test_rowwise_paths_both_taken(build_dir):
    x = make_input((4, 64), "random", np.float32, 0)
    assert run_rowwise(build_dir, x, "e4m3", "rceil")[2] & codes.FLAG_FLAT
    assert not run_rowwise(build_dir, x, "e4m3", "rceil", x_offset=4)[2] & codes.FLAG_FLAT


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1", "e3m2"])
def test_dual_kernel_bitexact(build_dir, fmt, dtype, ftz):
    for si, shape in enumerate(DUAL_CASES):
        for ki, kind in enumerate(("random", "wide", "edge")):
            for block_2d in (False, True):
                mode = ("rceil", "floor", "even", "ceil")[(si + ki + block_2d) % 4]
                x = make_input(shape, kind, DTYPES[dtype], seed=100 + 10 * si + ki)
                want = mxrt.quantize_mx_dual(x, fmt, scale_mode=mode, block_2d=block_2d, backend="numpy")
                q_row, s_row, q_col, s_col = run_dual(
                    build_dir, x, fmt, mode, block_2d, ftz=ftz, order=(si + ki) % 3, x_offset=4 * (si == 3)
                )
                tag = f"dual {fmt}/{mode}/{dtype}/{'2d' if block_2d else '1d'} {shape} {kind}"
                _same(f"row scales {tag}", s_row, want.row.scales)
                _same(f"row data {tag}", q_row, want.row.data)
                _same(f"col scales {tag}", s_col, want.col.scales)
                _same(f"col data {tag}", q_col, want.col.data)


# m and k multiples of 16 (the launcher's condition for the transposed scales): whole tiles, edge tiles of 16 or 48
# rows / columns, k with a last block of 16 columns, a single row block
T_CASES = [(64, 256), (96, 320), (128, 64), (48, 16), (16, 48), (80, 144)]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_dual_kernel_scales_transposed_bitexact(build_dir, fmt, dtype):
    """Flag SCALES_T: both scale sets stored transposed in 16-byte chunks, then transpose_u8 puts them in place;
    the poisoned final buffers must come out as the numpy twin's (every byte written once, by the transpose)."""
    for si, shape in enumerate(T_CASES):
        for block_2d in (False, True):
            kind = ("random", "wide", "edge")[si % 3]
            mode = ("rceil", "floor", "even", "ceil")[(si + block_2d) % 4]
            x = make_input(shape, kind, DTYPES[dtype], seed=300 + si)
            want = mxrt.quantize_mx_dual(x, fmt, scale_mode=mode, block_2d=block_2d, backend="numpy")
            q_row, s_row, q_col, s_col = run_dual(build_dir, x, fmt, mode, block_2d, order=si % 3, scales_t=True)
            tag = f"dual T {fmt}/{mode}/{dtype}/{'2d' if block_2d else '1d'} {shape} {kind}"
            _same(f"row scales {tag}", s_row, want.row.scales)
            _same(f"col scales {tag}", s_col, want.col.scales)
            _same(f"row data {tag}", q_row, want.row.data)
            _same(f"col data {tag}", q_col, want.col.data)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_dual_launcher_runs_the_transposed_path(build_dir, monkeypatch, dtype):
    """mxrt.quantize_mx_dual on a (fake) device array, each launch's parameter block run on the SIMT emulator: with
    the size threshold lifted, a 512 x 1024 call launches the dual kernel with flag SCALES_T into workspaces and
    transpose_u8 into the results, early (cuLaunchKernelEx with programmatic stream serialization; mxrt/ops/quant.py's
    wiring, bitwise against the numpy twin); a 496-row call
    (not a multiple of 512) launches the dual kernel alone with the scales in place."""
    import importlib
    import struct

    from support import fake_cupy

    monkeypatch.setattr(ops_quant, "DUAL_SCALES_T_MIN_ELEMS", 0)
    with fake_cupy.install(record=True) as state:

        def driver(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> int:
            k = next(b for b in state["builds"] if b.kernel.ptr == func)
            fmt = fake_cupy.PARAM_FORMATS[k.name]
            base = ctypes.c_void_p.from_address(params).value  # the first argument sits at the block's start
            vals = struct.unpack(fmt, ctypes.string_at(base, struct.calcsize(fmt)))
            state["launches"].append((k.name, vals))
            ptrs = [ctypes.c_void_p(v) for v in vals]
            if k.name == "quantize_mx_dual":
                lib = _lib(build_dir, 1, **k.defines)
                rc = lib.simt_run(*ptrs[:5], *vals[5:], gx, gy, 0)
            else:
                lib = _lib(build_dir, 2, **k.defines)
                rc = lib.simt_transpose(ptrs[0], ptrs[1], vals[2], vals[3], ptrs[4], ptrs[5], *vals[6:], gx, 0)
            assert rc == 0, lib.simt_error().decode()
            return 0

        launch_mod = importlib.import_module("mxrt.runtime.launch")
        launch_mod._DRIVER = driver  # install() restores its own on exit
        early: list = []

        def driver_ex(conf_ref, func, params, extra) -> int:  # cuLaunchKernelEx: the transpose's early launch
            conf = conf_ref._obj
            attr = conf.attrs[0]
            early.append((conf.num_attrs, attr.id, attr.value[0]))
            return driver(func, *conf.grid, *conf.block, conf.shared_mem, conf.stream, params, extra)

        launch_mod._LAUNCH_EX = driver_ex  # install() restores its own on exit
        cp = __import__("sys").modules["cupy"]
        for shape, names in (((512, 1024), ["quantize_mx_dual", "transpose_u8"]), ((496, 1024), ["quantize_mx_dual"])):
            state["launches"].clear()
            x = make_input(shape, "wide" if dtype == "f32" else "edge", DTYPES[dtype], seed=shape[0])  # varied scales
            want = mxrt.quantize_mx_dual(x, "e4m3", backend="numpy")
            got = mxrt.quantize_mx_dual(cp.asarray(x), "e4m3")
            assert [n for n, _ in state["launches"]] == names
            t_flag = state["launches"][0][1][-1] & codes.FLAG_SCALES_T
            assert bool(t_flag) == (len(names) == 2)
            # the transpose goes through cuLaunchKernelEx with programmatic stream serialization (attribute 6) on
            assert early == ([(1, 6, 1)] if t_flag else []), early
            early.clear()
            for part in ("row", "col"):
                g, w = getattr(got, part), getattr(want, part)
                _same(f"launcher {part} scales {shape} {dtype}", np.asarray(g.scales), w.scales)
                _same(f"launcher {part} data {shape} {dtype}", np.asarray(g.data), w.data)


def test_dual_scale_path_choice(monkeypatch):
    """quantize_mx_dual's scale store: "auto" is SCALES_T exactly where dual_scales_transposed holds, a forced path
    applies only where the call allows it, and an unknown one is a clear error (mxrt bench quant --dual-scales)."""
    for m, k, layout in [(4096, 4096, None), (4096, 2880, None), (4096, 2048, None), (4096, 4096, "cublas128x4")]:
        want = "t" if ops_quant.dual_scales_transposed(m, k, layout) else "inplace"
        assert ops_quant.dual_scale_path(m, k, layout) == want
        assert ops_quant.dual_scale_path(m, k, layout, "t") == want
        assert ops_quant.dual_scale_path(m, k, layout, "inplace") == "inplace"
    monkeypatch.setattr(ops_quant, "DUAL_SCALES", "inplace")
    assert ops_quant.dual_scale_path(4096, 4096, None) == "inplace"
    with pytest.raises(ValueError, match="scale path 'fold'"):
        ops_quant.dual_scale_path(4096, 4096, None, "fold")


def test_transpose_u8_one_matrix(build_dir):
    """transpose_launch with one matrix (the row+col grouped quantizer's s_col): its second pair has no tiles, so the
    launch writes dst0 only, each byte once (poisoned, 16-byte and byte-stored destination rows)."""
    lib = _lib(build_dir, 2, THREADS=quant_kernels.TRANSPOSE_U8_THREADS)
    rng = np.random.default_rng(7)
    for r0, c0 in [(90, 160), (64, 2880 // 45)]:
        src0 = _aligned_poisoned((r0, c0))
        src0[...] = rng.integers(0, 256, (r0, c0), dtype=np.uint8)
        dst0 = _aligned_poisoned((c0, r0))
        cfg, args = ops_quant.transpose_launch(src0, dst0)
        assert args[2:4] == (r0, c0) and args[6:8] == (0, c0) and int(args[-1]) == cfg.grid[0]
        rc = lib.simt_transpose(_p(args[0]), _p(args[1]), r0, c0, _p(args[4]), _p(args[5]), 0, c0, int(args[-1]),
                                cfg.grid[0], 0)  # fmt: skip
        assert rc == 0, lib.simt_error().decode()
        _same(f"transpose one matrix {(r0, c0)}", dst0, src0.T)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_transpose_u8(build_dir, order):
    """Both matrices of one launch, destination rows of any length (16-byte stores where aligned, else 4-byte words
    where aligned, else bytes)."""
    rng = np.random.default_rng(order)
    cases = [((90, 160), (7, 48)), ((64, 64), (65, 16)), ((1, 16), (256, 128))]
    # several 128 x 128 tiles with partial last ones; destination rows of 300 / 136 bytes (4- and 8-byte aligned
    # runs: word stores) and 288 (16-byte stores past one tile)
    cases += [((300, 272), (136, 400)), ((288, 144), (129, 32))]
    for (r0, c0), (r1, c1) in cases:
        src0 = _aligned_poisoned((r0, c0))
        src1 = _aligned_poisoned((r1, c1))
        src0[...] = rng.integers(0, 256, (r0, c0), dtype=np.uint8)
        src1[...] = rng.integers(0, 256, (r1, c1), dtype=np.uint8)
        dst0, dst1 = _aligned_poisoned((c0, r0)), _aligned_poisoned((c1, r1))
        run_transpose(build_dir, src0, dst0, src1, dst1, order)
        _same(f"transpose {(r0, c0)}", dst0, src0.T)
        _same(f"transpose {(r1, c1)}", dst1, src1.T)


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
def test_rowwise_kernel_ftz_and_orders(build_dir, fmt, ftz):
    for order in (0, 1, 2):
        for kind in ("wide", "edge"):
            x = make_input((9, 512), kind, np.float32, seed=order)
            want = mxrt.quantize_mx(x, fmt, backend="numpy")
            q, s, _ = run_rowwise(build_dir, x, fmt, "rceil", ftz=ftz, order=order)
            _same(f"scales {fmt} {kind} order {order}", s, want.scales)
            _same(f"data {fmt} {kind} order {order}", q, want.data)


@pytest.mark.parametrize("layout", ["aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0"])
def test_fused_layouts_bitexact(build_dir, layout):
    for shape in [(1, 32), (7, 33), (33, 7), (64, 256), (300, 96), (257, 288)]:
        for fmt in ("e4m3", "e2m1"):
            for dtype in ("bf16", "f32"):
                x = make_input(shape, "random", DTYPES[dtype], seed=shape[0])
                want = mxrt.quantize_mx(x, fmt, scale_layout=layout, backend="numpy")
                q, s, _ = run_rowwise(build_dir, x, fmt, "rceil", layout=layout)
                tag = f"{layout} {fmt} {dtype} {shape}"
                _same(f"rowwise scales {tag}", s, want.scales)
                _same(f"rowwise data {tag}", q, want.data)
                _same(f"rowwise storage {tag}", layout_storage(s, layout), layout_storage(want.scales, layout))
                d = mxrt.quantize_mx_dual(x, fmt, scale_layout=layout, backend="numpy")
                q_row, s_row, q_col, s_col = run_dual(build_dir, x, fmt, "rceil", layout=layout)
                _same(f"dual row scales {tag}", s_row, d.row.scales)
                _same(f"dual col scales {tag}", s_col, d.col.scales)
                _same(f"dual row storage {tag}", layout_storage(s_row, layout), layout_storage(d.row.scales, layout))
                _same(f"dual col storage {tag}", layout_storage(s_col, layout), layout_storage(d.col.scales, layout))
                _same(f"dual row data {tag}", q_row, d.row.data)
                _same(f"dual col data {tag}", q_col, d.col.data)


@pytest.mark.parametrize("rows_fast", [0, 1])
def test_dual_grid_orders(build_dir, rows_fast):
    """Both values of the kernel's DUAL_ROWS_FAST knob, launched with the matching grid."""
    for shape in [(100, 130), (200, 300)]:
        x = make_input(shape, "random", ml_dtypes.bfloat16, seed=shape[0])
        want = mxrt.quantize_mx_dual(x, "e4m3", backend="numpy")
        q_row, s_row, q_col, s_col = run_dual(build_dir, x, "e4m3", "rceil", rows_fast=rows_fast)
        _same(f"row data rf{rows_fast} {shape}", q_row, want.row.data)
        _same(f"col data rf{rows_fast} {shape}", q_col, want.col.data)
        _same(f"col scales rf{rows_fast} {shape}", s_col, want.col.scales)
        _same(f"row scales rf{rows_fast} {shape}", s_row, want.row.scales)
