"""The torch route of the grouped MX GEMMs without a GPU (mxrt/ops/grouped_gemm_torch.py,
mxrt/runtime/torch_grouped.py): what it takes and declines, and its device offset math (run with CPU torch) against
an independent loop over the generic kernel's rules (kernels_src/gemm/gemm_grouped_tiles.h ``gg_offsets``). The
route itself runs in tests/test_gpu_grouped_torch.py."""

from __future__ import annotations

import sys
import types

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.ops import grouped_gemm_torch
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.runtime import torch_grouped


def _kernel_starts(lens, cap: int, pad: int, total: int) -> np.ndarray:
    """gg_offsets, one group at a time: starts[g + 1] = min(sum_{j <= g} pad(clamp(lens[j], 0, cap)), total)."""
    run, ends = 0, []
    for v in lens:
        v = min(max(int(v), 0), cap)
        run += -(-v // pad) * pad
        ends.append(min(run, total))
    return np.array(ends, np.int64)


LENS = [[3, 0, 5], [10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2], [2**40, 0, 0, 0], [0, 0], [8], [-(2**62), 2]]


@pytest.mark.parametrize("lens", LENS, ids=str)
def test_offsets_twin_follows_the_kernels(lens):
    """grouped_offsets' numpy twin: the rows (pad 1, cut at m) and the wgrad columns (pad = align, cut at Mc) of
    gg_offsets, and the split check; for valid lengths, mxrt.group_offsets / pad_group_layout."""
    m, mc, align = 8, 96, 32
    ends, bad = grouped_gemm_torch.offsets_numpy(lens, m, 1, m)
    assert ends.dtype == np.int32
    np.testing.assert_array_equal(ends, _kernel_starts(lens, m, 1, m))
    valid = all(0 <= v <= m for v in lens) and sum(lens) == m
    assert bad is not valid
    if valid:
        np.testing.assert_array_equal(ends, mxrt.group_offsets(np.array(lens))[1:])
    cols, _ = grouped_gemm_torch.offsets_numpy(lens, mc, align, mc)
    np.testing.assert_array_equal(cols, _kernel_starts(lens, mc, align, mc))
    if all(v >= 0 for v in lens) and sum(lens) <= mc:
        want = np.minimum(mxrt.pad_group_layout(np.array(lens), align)[1][1:], mc)
        np.testing.assert_array_equal(cols, want)


def _x(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def torch_present(monkeypatch):
    monkeypatch.setattr(torch_grouped, "unavailable", lambda: None)


def _lens_problem(out_dtype="bfloat16", k=64, pad=32, fa="e4m3"):
    rng = np.random.default_rng(0)
    lens = np.array([5, 0, 11])
    qa = mxrt.quantize_mx(_x(rng, (16, k)), fa)
    qw = mxrt.quantize_mx_dual_grouped(_x(rng, (3, 24, k)), pad=pad)
    return grouped_gemm_problem(qa, qw.row, lens, out_dtype=out_dtype)


def test_takes_bf16_forward_and_wgrad(torch_present):
    assert grouped_gemm_torch.unsupported("sm_90a", _lens_problem()) is None
    rng = np.random.default_rng(3)
    qa, qb = mxrt.quantize_mx(_x(rng, (16, 40)), "e2m1"), mxrt.quantize_mx(_x(rng, (3, 24, 40)), "e4m3", axis=2)
    assert grouped_gemm_torch.unsupported("sm_90a", grouped_gemm_problem(qa, qb, np.array([5, 0, 11]))) is None
    rng = np.random.default_rng(1)
    lens = np.array([40, 0, 24])
    qg = mxrt.quantize_mx_grouped(_x(rng, (64, 48)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(_x(rng, (64, 40)), lens, colwise=True, col_align=32)
    p = wgrad_problem(qg, qx, lens, out_dtype="bfloat16")
    assert grouped_gemm_torch.unsupported("sm_90a", p) is None
    assert "out dtype float32" in grouped_gemm_torch.unsupported("sm_90a", wgrad_problem(qg, qx, lens))
    out = np.zeros((3, 48, 40), ml_dtypes.bfloat16)
    acc = wgrad_problem(qg, qx, lens, out_dtype="bfloat16", out=out, accumulate=True)
    assert "accumulate" in grouped_gemm_torch.unsupported("sm_90a", acc)


@pytest.mark.parametrize(
    "make,target,reason",
    [
        (lambda: _lens_problem("float32"), "sm_90a", "out dtype float32"),
        (lambda: _lens_problem("float16"), "sm_90a", "out dtype float16"),
        (lambda: _lens_problem(k=40), "sm_90a", "padded past k"),
        (lambda: _lens_problem(), "gfx950", "runs on sm_90a"),
        (lambda: _lens_problem(), "generic", "runs on sm_90a"),
    ],
)
def test_declines_with_a_reason(torch_present, make, target, reason):
    assert reason in grouped_gemm_torch.unsupported(target, make())


def test_deepgemm_layouts_declined(torch_present):
    rng = np.random.default_rng(2)
    qa = mxrt.quantize_mx(_x(rng, (16, 64)))
    qb = mxrt.quantize_mx(_x(rng, (2, 24, 64)), axis=2)
    ids = np.array([0] * 8 + [-1] * 3 + [1] * 5, np.int32)
    p = grouped_gemm_problem(qa, qb, ids, kind="indices", out=np.zeros((16, 24), np.float32), out_dtype="float32")
    assert "'indices' layout" in grouped_gemm_torch.unsupported("sm_90a", p)


def test_unavailable_says_why_without_a_cuda_torch():
    torch_grouped.unavailable.cache_clear()
    try:
        why = torch_grouped.unavailable()
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            assert why is not None and "CUDA" in why
    finally:
        torch_grouped.unavailable.cache_clear()


def test_padded_rows():
    assert [grouped_gemm_torch.padded(k) for k in (1, 8, 9, 33, 7168)] == [8, 8, 16, 40, 7168]


class _Tensor:
    """The CUDA torch tensor surface view_torch_cuda reads, over a numpy array (strides in elements)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x, self.shape, self.device = x, x.shape, types.SimpleNamespace(index=0)

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.x.itemsize for s in self.x.strides)

    def element_size(self) -> int:
        return self.x.itemsize

    def numel(self) -> int:
        return self.x.size

    def data_ptr(self) -> int:
        return self.x.__array_interface__["data"][0]


def test_torch_views_span_every_element(monkeypatch):
    """mxrt.runtime.arrays.view_torch_cuda (the route's workspaces and result, from_torch_cuda's views): the CuPy
    memory it wraps spans from the first element to the last of any strided tensor (sum of (size - 1) * stride,
    plus one), never less (a padded-row result of torch._grouped_mm, a transposed view, an empty tensor)."""
    from mxrt.runtime import arrays

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(
        UnownedMemory=lambda ptr, nbytes, owner, dev: (ptr, nbytes, owner),
        MemoryPointer=lambda mem, off: (mem, off),
    )
    fake.ndarray = lambda shape, dtype, memptr, strides: dict(shape=shape, dtype=dtype, mem=memptr, strides=strides)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    cases = [
        (np.empty((3, 72), np.uint16)[:, :65], (2 * 72 + 64 + 1) * 2),
        (np.empty((4, 5), np.float32), 80),
        (np.empty((2, 3, 4), np.float32).transpose(2, 1, 0), 96),
        (np.empty((0, 3), np.float32), 0),
    ]
    for x, nbytes in cases:
        t = _Tensor(x)
        v = arrays.view_torch_cuda(t, "uint16")
        (ptr, got, owner), off = v["mem"]
        assert (ptr, got, owner, off) == (t.data_ptr(), nbytes, t, 0), x.shape
        assert v["shape"] == x.shape and v["dtype"] == "uint16" and v["strides"] == x.strides
