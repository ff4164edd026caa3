"""The GPU layout and MoE ops without a GPU: registration, routing, launch plans, and the typed errors raised
before any launch (driven with a stand-in for a CuPy array, so no cupy is needed)."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt import codes
from mxrt.checks import all_cases
from mxrt.checks import gpu as gpu_checks
from mxrt.ops import kernels, layout_kernels, moe_kernels
from mxrt.ops import layouts as layout_ops
from mxrt.ops import moe as moe_ops


class FakeDeviceArray:
    """Looks like a CuPy array to mxrt (module name ``cupy...``) and carries a numpy array's metadata."""

    __module__ = "cupy._fake"

    def __init__(self, a: np.ndarray) -> None:
        self.dtype, self.shape, self.ndim, self.size = a.dtype, a.shape, a.ndim, a.size
        self.strides, self.flags = a.strides, a.flags


def test_ops_register_and_dispatch() -> None:
    assert {"preshuffle_scales", "unshuffle_scales", "moe_align_block_size"} <= set(mxrt.GPU_OPS)
    for op in ("preshuffle_scales", "unshuffle_scales", "moe_align_block_size"):
        assert kernels.op_supports(op, "gfx942") and kernels.op_supports(op, "sm_90a")
    assert {s.symbol for s in kernels.ALL_SPECS} >= {
        "preshuffle_scales",
        "unshuffle_scales",
        "moe_align_block_size",
        "moe_align_block_size_count",
        "moe_align_block_size_scan",
        "moe_align_block_size_scatter",
    }
    wide = {dict(d)["LAYOUT"] for d in layout_kernels.PRESHUFFLE_SCALES.variants if dict(d)["WIDE"]}
    assert wide == {codes.SCALE_LAYOUT_CODES["turbo16x4"]}
    assert set(codes.SCALE_LAYOUT_CODES) - {None} == set(mxrt.SCALE_LAYOUTS)


def test_auto_stays_on_numpy_without_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mxrt.runtime.device_available", lambda: False)
    s = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert isinstance(mxrt.preshuffle_scales(s, "cublas128x4"), np.ndarray)
    ids = np.array([[0, 1], [1, 1]])
    assert isinstance(mxrt.moe_align_block_size(ids, 4, 2)[0], np.ndarray)
    for call in (
        lambda: mxrt.preshuffle_scales(s, "cublas128x4", backend="gpu"),
        lambda: mxrt.unshuffle_scales(mxrt.preshuffle_scales(s, "aiter32x8"), "aiter32x8", (3, 4), backend="gpu"),
        lambda: mxrt.moe_align_block_size(ids, 4, 2, backend="gpu"),
    ):
        with pytest.raises(mxrt.UnsupportedArchError, match="backend 'gpu'"):
            call()


@pytest.mark.parametrize("numel", [0, 1, 4095, 4096, 4097, 40_000, 320_000, 2**31 - 1])
@pytest.mark.parametrize("num_experts", [1, 4, 256, 2048, 2049, 8192])
def test_moe_plan(numel: int, num_experts: int) -> None:
    p = moe_ops.plan_moe_align(numel, num_experts)
    small = numel <= moe_ops.SMALL_NUMEL and num_experts <= moe_ops.SMALL_MAX_EXPERTS
    assert p.small == small
    for cfg in p.configs:
        assert cfg.block == (moe_kernels.MOE_THREADS, 1, 1)
        assert cfg.shared_mem + 2 * moe_kernels.MOE_THREADS * 4 <= 48 * 1024  # CUDA's default dynamic limit
        cfg.check("moe_align_block_size")
    if small:
        assert p.configs[0].grid == (1, 1, 1) and p.configs[0].shared_mem == (3 * num_experts + 1) * 4
        return
    assert 1 <= p.num_ctas <= moe_ops.MAX_CTAS and p.chunk % moe_kernels.MOE_THREADS == 0
    assert p.num_ctas * p.chunk >= numel and (p.num_ctas - 1) * p.chunk < max(numel, 1)
    assert numel + p.chunk < 2**32  # the kernels' u32 chunk bounds
    assert p.num_ctas * num_experts <= moe_ops.MAX_HIST_WORDS
    assert p.workspace_words == p.num_ctas * num_experts + 2 * num_experts + 1
    assert p.configs[0].grid[0] == p.configs[2].grid[0] == p.num_ctas and p.configs[1].grid == (1, 1, 1)


def test_moe_device_errors_before_launch() -> None:
    op = moe_ops.moe_align_block_size_gpu
    ids = FakeDeviceArray(np.zeros((8, 4), np.int32))
    with pytest.raises(mxrt.DtypeError, match="int32, int64"):
        op(FakeDeviceArray(np.zeros((8, 4), np.float32)), 16, 4)
    with pytest.raises(mxrt.DtypeError, match="int32, int64"):
        op(FakeDeviceArray(np.zeros((8, 4), np.int8)), 16, 4)
    with pytest.raises(mxrt.ShapeError, match=r"shape \(\)"):
        op(FakeDeviceArray(np.zeros((), np.int32)), 16, 4)
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        op(FakeDeviceArray(np.zeros((8, 4), np.int32)[:, ::2]), 16, 4)
    with pytest.raises(mxrt.ShapeError, match="block_size"):
        op(ids, 0, 4)
    with pytest.raises(mxrt.DtypeError, match="block_size"):
        op(ids, 16.0, 4)
    with pytest.raises(mxrt.ShapeError, match="num_experts"):
        op(ids, 16, 0)
    with pytest.raises(mxrt.DtypeError, match="pad_sorted_ids"):
        op(ids, 16, 4, pad_sorted_ids=1)
    with pytest.raises(mxrt.ShapeError, match="capacity"):
        op(ids, 2**28, 16)
    with pytest.raises(mxrt.DtypeError, match="CuPy array"):
        op(ids, 16, 4, np.arange(4))
    with pytest.raises(mxrt.DtypeError, match="int32 or int64"):
        op(ids, 16, 4, FakeDeviceArray(np.zeros(4, np.int16)))
    with pytest.raises(mxrt.ShapeError, match=r"\(4,\)"):
        op(ids, 16, 4, FakeDeviceArray(np.zeros(5, np.int32)))
    with pytest.raises(mxrt.LayoutError, match="contiguous"):
        op(ids, 16, 4, FakeDeviceArray(np.zeros(8, np.int32)[::2]))
    with pytest.raises(mxrt.ShapeError, match="at most 8192"):
        op(ids, 16, moe_ops.MAX_EXPERTS + 1)
    assert moe_ops.moe_align_unsupported(np.zeros(4, np.int32), 16, moe_ops.MAX_EXPERTS + 1) is not None
    assert moe_ops.moe_align_unsupported(ids, 16, moe_ops.MAX_EXPERTS + 1) is None  # the op raises ShapeError


def test_preshuffle_device_errors_before_launch() -> None:
    op = layout_ops.preshuffle_scales_gpu
    s = FakeDeviceArray(np.zeros((8, 8), np.uint8))
    with pytest.raises(mxrt.DtypeError, match="uint8"):
        op(FakeDeviceArray(np.zeros((8, 8), np.int16)), "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="2-D"):
        op(FakeDeviceArray(np.zeros(8, np.uint8)), "aiter32x8")
    with pytest.raises(mxrt.LayoutError, match="layout"):
        op(s, "aiter")
    with pytest.raises(mxrt.ShapeError, match="pad_value"):
        op(s, "aiter32x8", pad_value=-1)
    with pytest.raises(mxrt.DtypeError, match="dtype"):
        op(s, "cublas128x4", dtype=np.uint32)
    with pytest.raises(mxrt.ShapeError, match="2\\^31"):
        op(FakeDeviceArray(np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (2**20, 2**12), (0, 0))), "turbo16x4")
    assert layout_ops.preshuffle_unsupported(np.zeros((4, 4), np.uint8), "turbo16x4") is None


def test_unshuffle_device_errors_before_launch() -> None:
    op = layout_ops.unshuffle_scales_gpu
    with pytest.raises(mxrt.DtypeError, match="uint8"):
        op(FakeDeviceArray(np.zeros((256, 8), np.int32)), "aiter32x8", (4, 4))
    with pytest.raises(mxrt.ShapeError, match=r"\(256, 8\)"):
        op(FakeDeviceArray(np.zeros((128, 8), np.uint8)), "aiter32x8", (4, 4))
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        op(FakeDeviceArray(np.zeros((8, 256), np.uint8).T), "aiter32x8", (4, 4))
    with pytest.raises(mxrt.DtypeError, match="int32"):
        op(FakeDeviceArray(np.zeros((4, 1), np.uint8)), "deepgemm_ue8m0", (4, 4))
    with pytest.raises(mxrt.ShapeError, match=r"\(4, 1\)"):
        op(FakeDeviceArray(np.zeros((4, 2), np.int32)), "deepgemm_ue8m0", (4, 4))
    with pytest.raises(mxrt.ShapeError, match="rows, cols"):
        op(FakeDeviceArray(np.zeros((4, 1), np.int32)), "deepgemm_ue8m0", 4)


def test_gpu_checks_are_registered_and_silent_on_numpy() -> None:
    assert gpu_checks.check_gpu_ops in all_cases()
    assert list(gpu_checks.check_gpu_ops("numpy")) == []
    for op, cases in gpu_checks.GPU_CASES.items():
        listed = list(cases())
        assert listed, op
        for case, run_gpu, run_numpy in listed:
            assert isinstance(case, str) and callable(run_gpu)
            assert gpu_checks._arrays(run_numpy())  # the numpy side runs here
