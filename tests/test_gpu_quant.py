"""GPU quantizers against their numpy twins, bit for bit (marker ``gpu``; skips without cupy or a device).

Every output buffer is poisoned with 0xA5 before the kernel writes, every launch is followed by a device
synchronisation (so a fault fails the test that caused it), and skips come from the dispatch tables.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.inputs import layout_storage as np_layout_storage
from support.inputs import make_input

import mxrt
from mxrt.ops import kernels
from mxrt.runtime import kernel_spec

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

FMTS = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
MODES = ("floor", "ceil", "even", "rceil")
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
ROW_SHAPES = [(1, 1), (7, 31), (7, 33), (1, 4095), (3, 4096), (64, 256), (2, 3, 96)]
DUAL_SHAPES = [(1, 1), (7, 33), (33, 7), (31, 4095), (64, 256), (100, 130)]
KINDS = ("random", "wide", "edge")
POISON = 0xA5


@pytest.fixture(autouse=True)
def poisoned_outputs():
    """Outputs start as 0xA5 and every launch is synchronised and checked (the runtime's test hook)."""
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True):
        yield


def _skip_unless_supported(op: str) -> None:
    target = mxrt.runtime.get_arch().target
    if not kernels.op_supports(op, target):
        pytest.skip(f"{op}: no kernel for {target} in the dispatch table")


def to_device(x: np.ndarray):
    """A CuPy copy of x, or None when this CuPy has no such dtype (bfloat16 then goes through numpy-in)."""
    try:
        return cupy.asarray(x)
    except (TypeError, ValueError):
        return None


def assert_same(op: str, what: str, got, want) -> None:
    got = cupy.asnumpy(got) if not isinstance(got, np.ndarray) else got
    assert got.shape == want.shape and got.dtype == want.dtype, f"{op} {what}: {got.dtype}{got.shape} vs {want.shape}"
    bad = np.argwhere(got != want)
    assert bad.size == 0, (
        f"{op} {what}: {len(bad)} mismatches, first at {tuple(bad[0])}: got {got[tuple(bad[0])]:#04x}, "
        f"want {want[tuple(bad[0])]:#04x}; poison 0xA5 left: {int(np.count_nonzero(got == POISON))}"
    )


def assert_dual_same(got, want, tag: str) -> None:
    """Both halves of a quantize_mx_dual result (shape, scales, codes) against the numpy twin's."""
    for part in ("row", "col"):
        g, w = getattr(got, part), getattr(want, part)
        assert g.shape == w.shape, f"quantize_mx_dual {part} {tag}: shape {g.shape} vs {w.shape}"
        assert_same("quantize_mx_dual", f"{part} scales {tag}", g.scales, w.scales)
        assert_same("quantize_mx_dual", f"{part} data {tag}", g.data, w.data)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_mx_bitexact(fmt: str, mode: str, dtype: str) -> None:
    _skip_unless_supported("quantize_mx")
    for si, shape in enumerate(ROW_SHAPES):
        for ki, kind in enumerate(KINDS):
            x = make_input(shape, kind, DTYPES[dtype], seed=100 * si + ki)
            want = mxrt.quantize_mx(x, fmt, scale_mode=mode, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx(xd if xd is not None else x, fmt, scale_mode=mode, backend="gpu")
            tag = f"{fmt}/{mode}/{dtype} {shape} {kind}"
            assert_same("quantize_mx", f"scales {tag}", got.scales, want.scales)
            assert_same("quantize_mx", f"data {tag}", got.data, want.data)
            assert isinstance(got.data, np.ndarray) == (xd is None)


@pytest.mark.parametrize("block_2d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_mx_dual_bitexact(fmt: str, mode: str, dtype: str, block_2d: bool) -> None:
    _skip_unless_supported("quantize_mx_dual")
    for si, shape in enumerate(DUAL_SHAPES):
        for ki, kind in enumerate(KINDS):
            x = make_input(shape, kind, DTYPES[dtype], seed=1000 + 100 * si + ki)
            want = mxrt.quantize_mx_dual(x, fmt, scale_mode=mode, block_2d=block_2d, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx_dual(
                xd if xd is not None else x, fmt, scale_mode=mode, block_2d=block_2d, backend="gpu"
            )
            assert_dual_same(got, want, f"{fmt}/{mode}/{dtype}/{'2d' if block_2d else '1d'} {shape} {kind}")


def test_numpy_in_numpy_out_any_axis() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((40, 3, 70), "random", np.float32, seed=7)
    for axis in (0, 1, 2):
        want = mxrt.quantize_mx(x, "e2m1", axis=axis, backend="numpy")
        got = mxrt.quantize_mx(x, "e2m1", axis=axis, backend="gpu")
        assert isinstance(got.data, np.ndarray)
        assert_same("quantize_mx", f"scales axis {axis}", got.scales, want.scales)
        assert_same("quantize_mx", f"data axis {axis}", got.data, want.data)


def test_float64_numpy_rounds_to_float32_first() -> None:
    _skip_unless_supported("quantize_mx")
    x = np.random.default_rng(3).standard_normal((5, 64))
    want = mxrt.quantize_mx(x, backend="numpy")
    got = mxrt.quantize_mx(x, backend="gpu")
    assert_same("quantize_mx", "data f64", got.data, want.data)


def test_cupy_runs_on_the_current_stream() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((64, 256), "random", np.float32, seed=9)
    want = mxrt.quantize_mx(x, backend="numpy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        xd = cupy.asarray(x)
        got = mxrt.quantize_mx(xd)  # auto: a CuPy array runs on the GPU
        stream.synchronize()
    assert_same("quantize_mx", "data on a side stream", got.data, want.data)


def test_cupy_layout_errors() -> None:
    _skip_unless_supported("quantize_mx")
    xd = cupy.asarray(make_input((64, 64), "random", np.float32, seed=1))
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.quantize_mx(xd[:, ::2])
    with pytest.raises(mxrt.LayoutError, match="last axis"):
        mxrt.quantize_mx(xd, axis=0)
    with pytest.raises(mxrt.DtypeError, match="float64"):
        mxrt.quantize_mx(xd.astype(cupy.float64))
    with pytest.raises(mxrt.UnsupportedArchError, match="block_size"):
        mxrt.quantize_mx(xd, block_size=16)
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.quantize_mx(xd, backend="numpy")


def test_unaligned_cupy_views_take_the_scalar_path() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((9, 4097), "random", np.float32, seed=4)
    xd = cupy.asarray(x).reshape(-1)[1:].reshape(4, 9218)  # 4 bytes past an aligned address, odd row bytes
    want = mxrt.quantize_mx(cupy.asnumpy(xd), "e4m3", backend="numpy")
    got = mxrt.quantize_mx(xd, "e4m3")
    assert_same("quantize_mx", "unaligned data", got.data, want.data)


@pytest.mark.parametrize("shape", [(0, 32), (4, 0)])
def test_empty(shape: tuple[int, int]) -> None:
    _skip_unless_supported("quantize_mx")
    x = np.zeros(shape, np.float32)
    want = mxrt.quantize_mx(x, backend="numpy")
    got = mxrt.quantize_mx(cupy.asarray(x))
    assert got.data.shape == want.data.shape and got.scales.shape == want.scales.shape
    dual = mxrt.quantize_mx_dual(cupy.asarray(x))
    ref = mxrt.quantize_mx_dual(x, backend="numpy")
    assert dual.col.data.shape == ref.col.data.shape and dual.col.scales.shape == ref.col.scales.shape


def test_compile_cache_and_arch() -> None:
    arch = mxrt.runtime.get_arch()
    assert arch is mxrt.runtime.get_arch()
    assert arch.target in kernel_spec.KNOWN_TARGETS or arch.target.startswith(("sm_", "gfx"))
    spec = kernels.select("quantize_mx", arch.target)
    k1 = mxrt.runtime.build(spec, spec.variants[0], arch)
    assert mxrt.runtime.build(spec, spec.variants[0], arch) is k1


# ---- fused scale preshuffle (scale_layout=) ------------------------------------------------------------------

LAYOUTS = ("aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0")
LAYOUT_SHAPES = [(1, 32), (7, 33), (33, 7), (64, 256), (300, 96), (257, 4128)]


def layout_storage(scales, layout: str) -> np.ndarray:
    """Every byte of the layout's storage, padding included (behind the int32 view for deepgemm_ue8m0)."""
    if isinstance(scales, np.ndarray):
        return np_layout_storage(scales, layout)
    if layout != "deepgemm_ue8m0":
        return cupy.asnumpy(scales).ravel()
    t, sm = scales.shape[1], scales.strides[1] // 4
    return cupy.asnumpy(cupy.ndarray((t * sm,), cupy.int32, memptr=scales.data)).view(np.uint8)


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fused_scale_layout_bitexact(layout: str, fmt: str) -> None:
    _skip_unless_supported("quantize_mx")
    for si, shape in enumerate(LAYOUT_SHAPES):
        for dtype in ("f32", "bf16", "f16"):
            x = make_input(shape, ("random", "wide", "edge")[si % 3], DTYPES[dtype], seed=500 + si)
            want = mxrt.quantize_mx(x, fmt, scale_layout=layout, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx(xd if xd is not None else x, fmt, scale_layout=layout, backend="gpu")
            tag = f"{layout}/{fmt}/{dtype} {shape}"
            assert got.scale_layout == layout
            assert_same("quantize_mx", f"scales {tag}", got.scales, want.scales)
            assert_same("quantize_mx", f"scale storage {tag}", layout_storage(got.scales, layout),
                        layout_storage(want.scales, layout))  # fmt: skip
            assert_same("quantize_mx", f"data {tag}", got.data, want.data)
            dual_want = mxrt.quantize_mx_dual(x, fmt, scale_layout=layout, backend="numpy")
            dual = mxrt.quantize_mx_dual(xd if xd is not None else x, fmt, scale_layout=layout, backend="gpu")
            for part in ("row", "col"):
                g, w = getattr(dual, part), getattr(dual_want, part)
                assert_same("quantize_mx_dual", f"{part} scales {tag}", g.scales, w.scales)
                assert_same("quantize_mx_dual", f"{part} scale storage {tag}", layout_storage(g.scales, layout),
                            layout_storage(w.scales, layout))  # fmt: skip
                assert_same("quantize_mx_dual", f"{part} data {tag}", g.data, w.data)
            back = mxrt.dequantize_mx(
                mxrt.MXArray(cupy.asnumpy(got.data) if xd is not None else got.data,
                             cupy.asnumpy(got.scales) if xd is not None else got.scales,
                             got.fmt, 32, 1, got.shape, got.scale_mode, layout)
            )  # fmt: skip
            plain = mxrt.dequantize_mx(mxrt.quantize_mx(x, fmt, backend="numpy"))
            assert np.array_equal(back, plain, equal_nan=True)


def test_fused_scale_layout_2d_dual_and_large_rows() -> None:
    _skip_unless_supported("quantize_mx_dual")
    x = make_input((520, 1056), "random", np.float16, seed=77)
    xd = cupy.asarray(x)
    for layout in LAYOUTS:
        want = mxrt.quantize_mx_dual(x, "e4m3", block_2d=True, scale_layout=layout, backend="numpy")
        got = mxrt.quantize_mx_dual(xd, "e4m3", block_2d=True, scale_layout=layout)
        assert_dual_same(got, want, f"2d {layout}")


def test_flat_and_block_paths_on_moe_shapes() -> None:
    """k % 32 == 0 takes the FLAT rowwise path; a 2-byte offset view (not 16-byte aligned) the per-block one."""
    _skip_unless_supported("quantize_mx")
    for shape in [(96, 2880), (40, 7168)]:
        x = make_input(shape, "random", np.float16, seed=shape[1])
        want = mxrt.quantize_mx(x, "e4m3", backend="numpy")
        got = mxrt.quantize_mx(cupy.asarray(x), "e4m3")
        assert_same("quantize_mx", f"flat {shape}", got.data, want.data)
        big = cupy.asarray(np.concatenate([np.zeros(1, np.float16), x.ravel()]))
        view = big[1:].reshape(shape)
        got = mxrt.quantize_mx(view, "e4m3")
        assert_same("quantize_mx", f"unaligned {shape}", got.data, want.data)
        assert_same("quantize_mx", f"unaligned scales {shape}", got.scales, want.scales)
        dual = mxrt.quantize_mx_dual(view, "e4m3")
        dual_want = mxrt.quantize_mx_dual(x, "e4m3", backend="numpy")
        assert_same("quantize_mx_dual", f"unaligned col {shape}", dual.col.data, dual_want.col.data)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_quantize_plans_bitexact_on_fresh_inputs(dtype: str) -> None:
    """Planned quantize_mx calls (same key, fresh inputs and poisoned outputs) stay bit-exact against the twin."""
    from mxrt.api import quant as api_quant

    api_quant.clear_plans()
    for seed in range(3):
        x = (np.random.default_rng(seed).standard_normal((3, 1024)) * 2.0 ** (seed * 6 - 6)).astype(DTYPES[dtype])
        xd = to_device(x)
        if xd is None:
            pytest.skip(f"this CuPy has no {dtype}")
        q = mxrt.quantize_mx(xd)
        ref = mxrt.quantize_mx(x, backend="numpy")
        assert_same("quantize_mx", "codes", q.data, ref.data)
        assert_same("quantize_mx", "scales", q.scales, ref.scales)
    assert len(api_quant._QPLANS) == 1


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_dual_scales_transposed_path(monkeypatch, fmt: str, dtype: str) -> None:
    """Flag SCALES_T and the transpose launch (kernels_src/quant/transpose_u8.hip) on every shape the kernel takes
    it (plain scales, m and k multiples of 16: the launcher's size and alignment choice lifted), edge tiles and
    destination rows that are not whole 16-byte chunks included; 1-D and 2-D."""
    from mxrt.ops import quant as quant_ops

    _skip_unless_supported("quantize_mx_dual")
    monkeypatch.setattr(quant_ops, "dual_scales_transposed", lambda m, k, layout: layout is None and not (m | k) % 16)
    for si, shape in enumerate([(64, 256), (48, 16), (16, 48), (80, 144), (96, 320), (1024, 1536)]):
        for block_2d in (False, True):
            x = make_input(shape, KINDS[si % len(KINDS)], DTYPES[dtype], seed=4000 + si)
            want = mxrt.quantize_mx_dual(x, fmt, block_2d=block_2d, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx_dual(xd if xd is not None else x, fmt, block_2d=block_2d, backend="gpu")
            assert_dual_same(got, want, f"{fmt}/{dtype}/{'2d' if block_2d else '1d'} {shape}")


def test_transpose_u8_store_widths() -> None:
    """transpose_u8 alone (kernels_src/quant/transpose_u8.hip) on shapes whose destination rows take each store it
    has: 16-byte chunks (rows % 16 == 0), 4-byte words (rows % 4 == 0, not 16: the row+col quantizer's s_col of
    m_col_ub / 32 rows), bytes (odd rows), over several 128 x 128 tiles with partial last ones; one and two
    matrices; destinations poisoned, so a byte not written or written twice elsewhere shows."""
    from mxrt.ops import quant as quant_ops
    from mxrt.runtime import launch

    _skip_unless_supported("quantize_mx_dual")
    arch = mxrt.runtime.get_arch()
    rng = np.random.default_rng(4200)
    for (r0, c0), (r1, c1) in [((300, 272), (136, 400)), ((288, 144), (129, 32)), ((1032, 224), (7, 48))]:
        srcs = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((r0, c0), (r1, c1))]
        d_src = [cupy.asarray(a) for a in srcs]
        d_dst = [cupy.full(a.shape[::-1], POISON, cupy.uint8) for a in srcs]
        kernel = quant_ops.transpose_kernel(arch)
        launch("transpose_u8", kernel, *quant_ops.transpose_launch(d_src[0], d_dst[0], d_src[1], d_dst[1]))
        for a, d in zip(srcs, d_dst, strict=True):
            assert_same("transpose_u8", f"{a.shape}", d, a.T)
        one = cupy.full((c0, r0), POISON, cupy.uint8)
        launch("transpose_u8", kernel, *quant_ops.transpose_launch(d_src[0], one))
        assert_same("transpose_u8", f"one matrix {(r0, c0)}", one, srcs[0].T)


def test_dual_scales_transposed_at_its_size() -> None:
    """The path as the launcher takes it: a 4096 x 4096 bf16 call (2^24 elements, m and k multiples of 512)."""
    from mxrt.ops import quant as quant_ops

    _skip_unless_supported("quantize_mx_dual")
    assert quant_ops.dual_scales_transposed(4096, 4096, None)
    x = make_input((4096, 4096), "wide", ml_dtypes.bfloat16, seed=4100)
    want = mxrt.quantize_mx_dual(x, "e4m3", backend="numpy")
    xd = to_device(x)
    got = mxrt.quantize_mx_dual(xd if xd is not None else x, "e4m3", backend="gpu")
    assert_dual_same(got, want, "4096^2")


def test_dual_scales_transposed_early_launch_in_graphs() -> None:
    """SCALES_T's transpose is a programmatic dependent launch (it may start before the quantizer has finished and
    waits for it in the kernel): eager calls and CUDA-graph replays with fresh inputs copied into the captured
    buffer give the numpy twin's bytes, and so does the ordinary launch (DUAL_T_EARLY off)."""
    from mxrt.ops import quant as quant_ops

    _skip_unless_supported("quantize_mx_dual")
    if mxrt.runtime.get_arch().vendor != "nvidia":
        pytest.skip("CUDA stream capture")
    shape = (4096, 4096)
    assert quant_ops.dual_scale_path(*shape, None) == "t" and quant_ops.DUAL_T_EARLY
    xs = [make_input(shape, KINDS[i], np.float32, seed=4500 + i) for i in range(3)]
    wants = [mxrt.quantize_mx_dual(x, "e4m3", backend="numpy") for x in xs]

    assert_dual_same(mxrt.quantize_mx_dual(cupy.asarray(xs[1]), "e4m3"), wants[1], "eager")
    with mxrt.runtime.debug():  # no poisoning or synchronisation inside the capture
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            xd = cupy.asarray(xs[0])
            mxrt.quantize_mx_dual(xd, "e4m3")  # builds and warms this stream's pool
            stream.synchronize()
            stream.begin_capture()
            got = mxrt.quantize_mx_dual(xd, "e4m3")
            graph = stream.end_capture()
            for i in (1, 2, 0):
                xd.set(xs[i], stream=stream)
                graph.launch(stream=stream)
                stream.synchronize()
                assert_dual_same(got, wants[i], f"replay {i}")
            del graph
    mxrt.runtime.release_graph_memory()
    try:
        quant_ops.DUAL_T_EARLY = False
        assert_dual_same(mxrt.quantize_mx_dual(cupy.asarray(xs[2]), "e4m3"), wants[2], "ordinary launch")
    finally:
        quant_ops.DUAL_T_EARLY = True
