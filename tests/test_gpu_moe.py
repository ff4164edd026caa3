"""GPU moe_align_block_size against its numpy twin, bit for bit (marker ``gpu``; skips without cupy or a device).

Outputs (and the workspace) are poisoned with 0xA5A5A5A5 before the kernels write, every launch is synchronised,
both the one-CTA and the multi-CTA paths are covered, and a CUDA-graph capture proves the op never synchronises
with the host.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.ops import kernels
from mxrt.ops import moe as moe_ops

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

POISON = 0xA5


@pytest.fixture(autouse=True)
def poisoned_outputs():
    """Outputs and the workspace start as 0xA5 bytes and every launch is synchronised and checked (the runtime's
    test hook)."""
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True):
        yield


@pytest.fixture(autouse=True)
def _supported():
    target = mxrt.runtime.get_arch().target
    if not kernels.op_supports("moe_align_block_size", target):
        pytest.skip(f"moe_align_block_size: no kernel for {target} in the dispatch table")


def check(ids: np.ndarray, bs: int, e: int, emap=None, *, pad_sorted_ids=False, tag="", dtype=None) -> None:
    want = mxrt.moe_align_block_size(ids, bs, e, emap, pad_sorted_ids=pad_sorted_ids, backend="numpy")
    d_ids = cupy.asarray(ids if dtype is None else ids.astype(dtype))
    d_map = None if emap is None else cupy.asarray(emap)
    got = mxrt.moe_align_block_size(d_ids, bs, e, d_map, pad_sorted_ids=pad_sorted_ids)
    for name, g, w in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_padded"), got, want, strict=True):
        assert type(g).__module__.startswith("cupy") and g.dtype == cupy.int32, f"{tag} {name}: {type(g)} {g.dtype}"
        h = cupy.asnumpy(g)
        assert h.shape == w.shape, f"{tag} {name}: shape {h.shape} vs {w.shape}"
        bad = np.flatnonzero(h != w)
        assert bad.size == 0, (
            f"{tag} {name}: {bad.size} mismatches, first at {bad[0]}: got {h[bad[0]]}, want {w[bad[0]]} "
            f"(poison left: {int(np.count_nonzero(h == np.int32(-1515870811)))})"
        )


def test_mx_reference_4c_example() -> None:
    ids = np.array([[2, 3, 0], [1, 2, 0], [1, 3, 0], [1, 2, 3]], np.int32)
    s, e, n = mxrt.moe_align_block_size(cupy.asarray(ids), 4, 4)
    assert cupy.asnumpy(s)[:16].tolist() == [2, 5, 8, 12, 3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12]
    assert (cupy.asnumpy(s)[16:] == 12).all()
    assert cupy.asnumpy(e).tolist() == [0, 1, 2, 3, 0, 0] and int(n[0]) == 16
    check(ids, 4, 4, tag="4c")


@pytest.mark.parametrize("num_experts", [4, 64, 256])
@pytest.mark.parametrize("tokens", [1, 7, 1000, 40000])
def test_random_topk_ids(tokens: int, num_experts: int) -> None:
    rng = np.random.default_rng(tokens * 1000 + num_experts)
    for topk in range(1, 9):
        ids = rng.integers(0, num_experts, (tokens, topk)).astype(np.int32)
        if topk % 3 == 0:  # some ids >= num_experts: skipped
            ids.ravel()[rng.integers(0, ids.size, max(1, ids.size // 10))] = num_experts + 3
        for bs in (16, 64, 128):
            emap = None
            if (topk + bs) % 2:
                emap = rng.integers(-1, num_experts, num_experts).astype(np.int32)
            check(ids, bs, num_experts, emap, tag=f"T={tokens} topk={topk} E={num_experts} bs={bs}")


@pytest.mark.parametrize("numel", [0, 1, 4095, 4096, 4097, 8192, 100_003])
def test_both_paths_around_the_threshold(numel: int) -> None:
    rng = np.random.default_rng(numel)
    ids = rng.integers(0, 33, numel).astype(np.int32)
    for e in (32, 3000):  # 3000 > SMALL_MAX_EXPERTS: the multi-CTA path even for small numel
        check(ids, 16, e, tag=f"numel={numel} E={e}")
        check(ids.reshape(-1, 1), 7, e, pad_sorted_ids=True, tag=f"numel={numel} E={e} pad_sorted_ids")


def test_skewed_and_int64_and_unsigned() -> None:
    rng = np.random.default_rng(5)
    skew = np.where(rng.random((20000, 8)) < 0.9, 5, rng.integers(0, 256, (20000, 8))).astype(np.int64)
    check(skew, 128, 256, tag="skewed int64")
    check(skew, 64, 256, tag="skewed int32", dtype=np.int32)
    big = skew.astype(np.uint32)
    big[0, :3] = np.uint32(2**31 + 5)  # ids >= num_experts as unsigned: skipped
    check(big, 32, 256, tag="uint32")
    check(big.astype(np.uint64), 32, 256, tag="uint64")
    emap64 = rng.integers(-1, 256, 256).astype(np.int64)
    check(skew, 16, 256, emap64, tag="int64 expert_map")


def test_many_experts() -> None:
    rng = np.random.default_rng(9)
    e = moe_ops.MAX_EXPERTS
    ids = rng.integers(0, e, (30000, 8)).astype(np.int32)
    check(ids, 16, e, tag=f"E={e}")
    with pytest.raises(mxrt.ShapeError, match="num_experts"):
        mxrt.moe_align_block_size(cupy.asarray(ids), 16, e + 1)
    with pytest.raises(mxrt.UnsupportedArchError, match="num_experts"):
        mxrt.moe_align_block_size(ids, 16, e + 1, backend="gpu")
    want = mxrt.moe_align_block_size(ids[:10], 16, e + 1, backend="numpy")  # auto falls back to numpy
    got = mxrt.moe_align_block_size(ids[:10], 16, e + 1)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_numpy_in_numpy_out() -> None:
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 64, (513, 6)).astype(np.int16)
    emap = rng.integers(-1, 64, 64)
    want = mxrt.moe_align_block_size(ids, 32, 64, emap, backend="numpy")
    got = mxrt.moe_align_block_size(ids, 32, 64, emap, backend="gpu")
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, np.ndarray) and g.dtype == np.int32
        np.testing.assert_array_equal(g, w)


def test_device_errors() -> None:
    ids = cupy.asarray(np.zeros((8, 4), np.int32))
    with pytest.raises(mxrt.DtypeError, match="int32"):
        mxrt.moe_align_block_size(ids.astype(cupy.float32), 16, 4)
    with pytest.raises(mxrt.DtypeError, match="int32"):
        mxrt.moe_align_block_size(ids.astype(cupy.int16), 16, 4)
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.moe_align_block_size(ids[:, ::2], 16, 4)
    with pytest.raises(mxrt.ShapeError, match="block_size"):
        mxrt.moe_align_block_size(ids, 0, 4)
    with pytest.raises(mxrt.ShapeError, match="2\\^31"):
        mxrt.moe_align_block_size(ids, 2**28, 16)
    with pytest.raises(mxrt.DtypeError, match=r"cupy\.asarray"):
        mxrt.moe_align_block_size(ids, 16, 4, np.arange(4))
    with pytest.raises(mxrt.ShapeError, match="expert_map"):
        mxrt.moe_align_block_size(ids, 16, 4, cupy.arange(5, dtype=cupy.int32))
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.moe_align_block_size(ids, 16, 4, backend="numpy")


@pytest.mark.parametrize("tokens", [64, 9000])  # the one-CTA and the multi-CTA path
def test_cuda_graph_capture(tokens: int) -> None:
    if not hasattr(cupy.cuda.Stream, "begin_capture"):
        pytest.skip("this CuPy has no stream capture")
    with mxrt.runtime.debug():  # real allocations, no per-launch synchronisation: it would invalidate the capture
        _capture_and_replay(tokens)


def _capture_and_replay(tokens: int) -> None:
    rng = np.random.default_rng(tokens)
    ids_h = rng.integers(0, 128, (tokens, 8)).astype(np.int32)
    emap_h = rng.integers(-1, 128, 128).astype(np.int32)
    want = mxrt.moe_align_block_size(ids_h, 64, 128, emap_h, backend="numpy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        ids, emap = cupy.asarray(ids_h), cupy.asarray(emap_h)
        for _ in range(2):  # compile, and leave pool blocks of every size on this stream
            mxrt.moe_align_block_size(ids, 64, 128, emap)
        stream.synchronize()
        stream.begin_capture()
        out = mxrt.moe_align_block_size(ids, 64, 128, emap)
        graph = stream.end_capture()
        for a in out:
            a.fill(-7)  # the replay, not the capture, must write the results
        graph.launch(stream)
        stream.synchronize()
    for g, w in zip(out, want, strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(g), w)
