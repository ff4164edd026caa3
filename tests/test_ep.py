"""mxrt.ep: dispatch / combine / the MoE layer over torch.distributed.

CPU: a world of one in this process (gloo) and ``torchrun --nproc-per-node 2`` (gloo, two processes) against
mxrt.layouts.ep's simulated world (bitwise) and the float64 layer reference (calc_diff <= 1e-5). GPU: the same
on a one-rank NCCL group, with torch's sync debug mode proving that a dispatch syncs the host exactly once (the
all-to-all-v split sizes) and a combine never; W = 2 over NCCL when two GPUs exist (skips otherwise).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import mxrt  # noqa: E402
from mxrt.ep import _transport, combine, dispatch, grouped_to_recv, moe_forward, recv_to_grouped  # noqa: E402
from mxrt.errors import DtypeError, ShapeError  # noqa: E402
from mxrt.formats.mx import quantize_mx as quantize_np  # noqa: E402
from mxrt.layouts import ep as ep_np  # noqa: E402
from mxrt.reference.metrics import calc_diff  # noqa: E402
from mxrt.reference.moe_layer import BF16, moe_layer_f64  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _cuda_nccl() -> bool:
    return torch.cuda.is_available() and dist.is_nccl_available()


@pytest.fixture(scope="module")
def world1():
    """A one-rank default group in this process: gloo for CPU tensors, NCCL for CUDA ones where present."""
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    _transport.multicast_off()
    backend = "cpu:gloo,cuda:nccl" if _cuda_nccl() else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _problem(seed, t, h, i, e, k, fmt="e4m3"):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((t, h)) * 2).astype(BF16)
    x[:, :32][: min(t, 2)] = 0  # all-zero blocks (scale 0)
    if t > 3:
        x[3, 32:64] *= 2.0**60  # extreme scales
    ids = np.argsort(rng.random((t, e)), axis=1)[:, :k].astype(np.int64)
    wts = rng.random((t, k)).astype(np.float32)
    wgu = quantize_np((rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32), fmt, axis=2)
    wd = quantize_np((rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32), fmt, axis=2)
    return x, ids, wts, wgu, wd


def _torch_mx(q, dev):
    return mxrt.formats.mx.MXArray(
        data=torch.from_numpy(q.data).to(dev),
        scales=torch.from_numpy(q.scales).to(dev),
        fmt=q.fmt,
        block_size=q.block_size,
        axis=q.axis,
        shape=q.shape,
        scale_mode=q.scale_mode,
    )


def _bf16(x, dev):
    return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16).to(dev)


def _run_layer(dev, t=40, h=128, i=64, e=4, k=2):
    x, ids, wts, wgu, wd = _problem(t + e, t, h, i, e, k)
    tx, tids, twts = _bf16(x, dev), torch.from_numpy(ids).to(dev), torch.from_numpy(wts).to(dev)
    # the dispatch alone: bitwise against the simulated world of one
    g, hd = dispatch(mxrt.quantize_mx(tx), tids, twts, num_experts=e)
    q = quantize_np(x)
    codes, lens, _ = ep_np.simulate_dispatch([q.data], [ids], e)
    scales, _, _ = ep_np.simulate_dispatch([q.scales], [ids], e)
    np.testing.assert_array_equal(g.data.view(torch.uint8).cpu().numpy(), codes[0])
    np.testing.assert_array_equal(g.scales.view(torch.uint8).cpu().numpy(), scales[0])
    np.testing.assert_array_equal(hd.group_lens.cpu().numpy(), lens[0])
    assert hd.group_lens.device == tids.device
    out = moe_forward(tx, tids, twts, _torch_mx(wgu, dev), _torch_mx(wd, dev), num_experts=e)
    assert out.dtype == torch.bfloat16 and out.shape == (t, h) and out.device == tids.device
    ref = moe_layer_f64(x, ids, wts, wgu, wd).astype(np.float32)
    got = out.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert calc_diff(got, ref) <= 1e-5


# ---- CPU ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("w", [1, 2, 4, 8])
def test_device_permutation_matches_numpy(w):
    rng = np.random.default_rng(w)
    c = rng.integers(0, 4, (w, 3))
    got = recv_to_grouped(torch.from_numpy(c), int(c.sum()))
    np.testing.assert_array_equal(got.numpy(), ep_np.recv_to_grouped(c))
    inv = grouped_to_recv(torch.from_numpy(c), int(c.sum()))
    np.testing.assert_array_equal(inv.numpy(), ep_np.grouped_to_recv(c))


@pytest.fixture(params=["torch", "fused"])
def layout(request, monkeypatch):
    """Each dispatch layout in turn (MXRT_EP_DISPATCH; CPU tensors run the fused one on the kernels' twins)."""
    monkeypatch.setenv("MXRT_EP_DISPATCH", request.param)
    return request.param


def test_world1_cpu_layer(world1, layout):
    _run_layer(torch.device("cpu"))


def _layouts_agree(dev, monkeypatch, payload, ids, wts, e):
    """Dispatch ``payload`` with both layouts: rows, maps and the combine bit for bit the same."""
    got = {}
    for lay in ("torch", "fused"):
        monkeypatch.setenv("MXRT_EP_DISPATCH", lay)
        got[lay] = dispatch(payload, ids, wts, num_experts=e)
    (gt, ht), (gf, hf) = got["torch"], got["fused"]
    if isinstance(payload, mxrt.formats.mx.MXArray):
        assert torch.equal(gt.data, gf.data) and torch.equal(gt.scales, gf.scales) and gt.shape == gf.shape
    else:
        assert torch.equal(gt.view(torch.uint8), gf.view(torch.uint8)) and gt.dtype == gf.dtype
    for name in ("order", "recv_to_grouped", "group_lens", "recv_counts"):
        a, b = getattr(ht, name), getattr(hf, name)
        assert a.dtype == b.dtype == torch.int64 and a.device == b.device == ids.device, name
        assert torch.equal(a, b), name
    assert (ht.send_splits, ht.recv_splits) == (hf.send_splits, hf.recv_splits)
    assert ht.pair_rows is None and torch.equal(hf.pair_rows[hf.order], torch.arange(ids.numel(), device=ids.device))
    y = (torch.arange(hf.num_recv * 16, device=ids.device) % 251).reshape(-1, 16).to(torch.bfloat16)
    assert torch.equal(combine(y, ht), combine(y, hf))
    return hf


@pytest.mark.parametrize(("t", "h", "e", "k"), [(37, 128, 8, 3), (20, 96, 4, 2), (0, 64, 4, 2), (9, 64, 6, 6)])
def test_world1_cpu_layouts_agree_bitwise(world1, monkeypatch, t, h, e, k):
    """The fused layout (here on its numpy twins) and the torch layout: the same rows and maps, MX (hidden 96:
    3-byte scale rows, packed rows of 99 bytes) and bf16 payloads, int32 and int64 ids."""
    g = torch.Generator().manual_seed(t + h)
    x = torch.randn(t, h, generator=g).to(torch.bfloat16)
    ids = torch.argsort(torch.rand(t, e, generator=g), 1)[:, :k].contiguous()
    w = torch.rand(t, k, generator=g)
    _layouts_agree(torch.device("cpu"), monkeypatch, mxrt.quantize_mx(x), ids, w, e)
    _layouts_agree(torch.device("cpu"), monkeypatch, x, ids.to(torch.int32), w, e)


def test_world1_cpu_fused_bad_ids_and_mode(world1, monkeypatch):
    monkeypatch.setenv("MXRT_EP_DISPATCH", "fused")
    x = mxrt.quantize_mx(torch.randn(4, 64))
    w = torch.ones(4, 2)
    for bad in (4, -1, 2**40):
        ids = torch.tensor([[0, 1], [2, bad], [0, 1], [bad, 1]])
        with pytest.raises(ShapeError, match=r"2 id\(s\) outside \[0, 4\)"):
            dispatch(x, ids, w, num_experts=4)
    monkeypatch.setenv("MXRT_EP_DISPATCH", "nccl")
    with pytest.raises(mxrt.errors.UnsupportedArchError, match="MXRT_EP_DISPATCH is 'nccl'"):
        dispatch(x, torch.zeros(4, 2, dtype=torch.int64), w, num_experts=4)


def test_world1_cpu_empty_and_bf16_payload(world1):
    t = torch.zeros(0, 64, dtype=torch.bfloat16)
    ids, wts = torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0, 2)
    g, hd = dispatch(mxrt.quantize_mx(t), ids, wts, num_experts=4)
    assert g.shape == (0, 64) and hd.group_lens.tolist() == [0, 0, 0, 0]
    assert combine(torch.zeros(0, 16, dtype=torch.bfloat16), hd).shape == (0, 16)
    # a plain tensor travels as it is (the bf16 baseline) and the combine inverts the dispatch exactly
    x = torch.randn(9, 16).to(torch.bfloat16)
    ids = torch.tensor([[0, 3], [1, 1], [2, 0], [3, 2], [0, 1], [2, 3], [1, 0], [3, 3], [0, 0]])
    w = torch.ones(9, 2) * 0.5
    xg, hd = dispatch(x, ids, w, num_experts=4)
    assert torch.equal(xg, x[ids.reshape(-1).argsort(stable=True) // 2])
    assert torch.equal(combine(xg, hd), x)


def _combine_twin(y, hd, ftz=False):
    """What combine must return for a world of one: the returned rows are y in received order (send order)."""
    back = y.cpu().view(torch.int16).numpy().view(BF16)[hd.recv_to_grouped.cpu().numpy()]
    src = ep_np.pair_rows(hd.order.cpu().numpy()).reshape(hd.num_tokens, hd.topk)
    w = hd.topk_weights.float().cpu().numpy()
    return ep_np.moe_combine(back, src, w, ftz=ftz).view(np.uint16)


def _combine_case(dev, t=37, k=3, e=4, n=24):
    g = torch.Generator().manual_seed(t * k)
    x = torch.randn(t, 64, generator=g).to(torch.bfloat16).to(dev)
    ids = torch.argsort(torch.rand(t, e, generator=g), 1)[:, :k].contiguous().to(dev)
    w = torch.rand(t, k, generator=g).to(dev)
    _, hd = dispatch(x, ids, w, num_experts=e)
    y = (torch.randn(hd.num_recv, n, generator=g) * 3).to(torch.bfloat16).to(dev)
    return y, hd


def test_world1_cpu_combine_is_the_twin_bitwise(world1):
    """The CPU path (torch, gloo) does the kernel's arithmetic: products in fp32, summed in slot order."""
    y, hd = _combine_case(torch.device("cpu"))
    got = combine(y, hd).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, _combine_twin(y, hd))


def test_world1_bad_input_is_typed(world1):
    x = mxrt.quantize_mx(torch.randn(4, 64))
    ids, w = torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2)
    with pytest.raises(ShapeError, match=r"1 id\(s\) outside \[0, 4\)"):
        dispatch(x, torch.tensor([[0, 1], [2, 4], [0, 1], [0, 1]]), w, num_experts=4)
    with pytest.raises(ShapeError, match=r"outside \[0, 4\)"):
        dispatch(x, torch.tensor([[0, -1], [2, 3], [0, 1], [0, 1]]), w, num_experts=4)
    with pytest.raises(DtypeError, match=r"'topk_ids' is a torch\.float32 tensor"):
        dispatch(x, w, w, num_experts=4)
    with pytest.raises(DtypeError, match="'topk_weights'"):
        dispatch(x, ids, ids, num_experts=4)
    with pytest.raises(ShapeError, match=r"'topk_ids' has shape \(3, 2\)"):
        dispatch(x, ids[:3], w[:3], num_experts=4)
    with pytest.raises(ShapeError, match="'topk_weights' has shape"):
        dispatch(x, ids, w[:, :1], num_experts=4)
    with pytest.raises(ShapeError, match="axis 0"):
        dispatch(mxrt.quantize_mx(torch.randn(64, 4), axis=0), ids, w, num_experts=4)
    with pytest.raises(DtypeError, match="expected an MXArray"):
        dispatch(np.zeros((4, 64)), ids, w, num_experts=4)
    with pytest.raises(DtypeError, match=r"num_experts|integer"):
        dispatch(x, ids, w, num_experts=2.0)
    _, hd = dispatch(x, ids, w, num_experts=4)
    with pytest.raises(ShapeError, match=r"expected \[8, n\]"):
        combine(torch.zeros(7, 3, dtype=torch.bfloat16), hd)
    with pytest.raises(DtypeError, match="bfloat16"):
        combine(torch.zeros(8, 3), hd)


def _torchrun(w, *args, env=None):
    e = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **(env or {})}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={w}",
        "-m",
        "mxrt.ep.launch",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=300, check=False)


#: every dispatch layout, and the two mixed in one world (torch on even ranks, fused on odd ones: one wire format)
LAYOUTS = ("torch", "fused", "mixed")


def test_torchrun_gloo_w2():
    """Two CPU processes (gloo): uneven routing, every rank bitwise on the dispatch and within 1e-5 on the layer,
    with each layout and the two mixed."""
    r = _torchrun(2, "--tokens", "37", "--topk", "3", "--layout", *LAYOUTS, env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0 and "mxrt.ep check W=2: PASS" in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("dispatch bitwise ok") == 2 * len(LAYOUTS), r.stdout


def test_torchrun_gloo_w3_uneven():
    """Three CPU processes: rank 0 holds no tokens, rank 1 int32 ids and bf16 weights, hidden 96 (3-byte scale
    rows travel as bytes, codes as 8-byte words)."""
    args = ["--tokens", "30", "--hidden", "96", "--inter", "64", "--experts", "6", "--topk", "4", "--uneven"]
    args += ["--layout", *LAYOUTS]
    r = _torchrun(3, *args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0 and "mxrt.ep check W=3: PASS" in r.stdout, r.stdout + r.stderr
    assert "rank 0/3 cpu layout fused: tokens 0 " in r.stdout and r.stdout.count("dispatch bitwise ok") == 3 * 3


def test_import_mxrt_does_not_import_ep():
    code = "import sys, mxrt; assert 'mxrt.ep' not in sys.modules and 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr


# ---- GPU ------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_world1_nccl_layer(world1):
    if not _cuda_nccl():
        pytest.skip("torch has no CUDA device or no NCCL")
    _run_layer(torch.device("cuda"), t=300, h=256, i=128, e=8, k=4)


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:Synchronization debug mode is a prototype feature:UserWarning")
def test_gpu_dispatch_syncs_once_combine_never(world1, monkeypatch, layout):
    """torch's sync debug mode raises on any synchronising torch call; the one wait of the dispatch is counted (it
    waits on the counts' copy event, not the stream) and let through."""
    if not _cuda_nccl():
        pytest.skip("torch has no CUDA device or no NCCL")
    calls = []
    real = _transport.PendingInts.wait

    def counted(self):
        calls.append(self._buf.numel())
        torch.cuda.set_sync_debug_mode(0)
        try:
            return real(self)
        finally:
            torch.cuda.set_sync_debug_mode(2)

    monkeypatch.setattr(_transport.PendingInts, "wait", counted)
    x = mxrt.quantize_mx(torch.randn(256, 128, device="cuda"))
    ids = torch.argsort(torch.rand(256, 8, device="cuda"), 1)[:, :4].contiguous()
    w = torch.rand(256, 4, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode(2)
    try:
        _, hd = dispatch(x, ids, w, num_experts=8)
        n_dispatch = len(calls)
        y = combine(torch.ones(hd.num_recv, 64, device="cuda", dtype=torch.bfloat16), hd)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    # the torch layout copies the 2W + 1 sizes, the fused one both [W, E_l + 1] count matrices
    assert n_dispatch == 1 and calls == ([2 * 1 + 1] if layout == "torch" else [2 * 1 * (8 + 1)])
    assert torch.allclose(y.float(), w.sum(1, keepdim=True).expand(-1, 64).bfloat16().float(), rtol=1e-2)


def _u8(codes: torch.Tensor) -> np.ndarray:
    """Element codes as a uint8 numpy array (torch fp8 dtypes have no numpy twin: viewed as bytes)."""
    if codes.dtype != torch.uint8 and codes.element_size() == 1:
        codes = codes.view(torch.uint8)
    return codes.cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("t", "h", "e", "k"),
    [(64, 7168, 256, 8), (300, 896, 16, 8), (257, 256, 8, 4), (33, 96, 6, 3), (0, 128, 4, 2), (1, 64, 4, 4)],
)
def test_gpu_world1_layouts_agree_bitwise(world1, monkeypatch, t, h, e, k):
    """CUDA: the fused layout's kernels (16-byte rows at hidden 7168 / 896, 8-byte at 256, bytes at 96) and the torch
    layout give the same rows, maps and combine bit for bit; both bitwise the numpy simulation."""
    if not _cuda_nccl():
        pytest.skip("torch has no CUDA device or no NCCL")
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(t + h)
    x = torch.randn(t, h, device=dev, generator=g).to(torch.bfloat16)
    ids = torch.argsort(torch.rand(t, e, device=dev, generator=g), 1)[:, :k].contiguous()
    w = torch.rand(t, k, device=dev, generator=g)
    xq = mxrt.quantize_mx(x)
    hf = _layouts_agree(dev, monkeypatch, xq, ids, w, e)
    _layouts_agree(dev, monkeypatch, x, ids.to(torch.int32), w, e)
    codes, lens, _ = ep_np.simulate_dispatch([_u8(xq.data)], [ids.cpu().numpy()], e)
    monkeypatch.setenv("MXRT_EP_DISPATCH", "fused")
    g2, _ = dispatch(xq, ids, w, num_experts=e)
    np.testing.assert_array_equal(_u8(g2.data), codes[0])
    np.testing.assert_array_equal(hf.group_lens.cpu().numpy(), lens[0])
    bad = ids.clone()
    if t:
        bad[t // 2, 0] = e
        with pytest.raises(ShapeError, match=r"1 id\(s\) outside"):
            dispatch(xq, bad, w, num_experts=e)


@pytest.mark.gpu
def test_gpu_world1_combine_is_the_kernel_bitwise(world1):
    """CUDA tensors take the fused kernel (mxrt.moe_combine): bitwise the twin with NVRTC's flush-to-zero."""
    if not _cuda_nccl():
        pytest.skip("torch has no CUDA device or no NCCL")
    for t, k, n in ((37, 3, 24), (300, 8, 7168 // 16), (5, 1, 13)):
        y, hd = _combine_case(torch.device("cuda"), t, k, 8, n)
        out = combine(y, hd)
        assert out.is_cuda and out.dtype == torch.bfloat16 and out.shape == (t, n)
        np.testing.assert_array_equal(out.view(torch.int16).cpu().numpy().view(np.uint16), _combine_twin(y, hd, True))


@pytest.mark.gpu
def test_gpu_torchrun_nccl_w2():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs for W = 2 over NCCL, this machine has {torch.cuda.device_count()}")
    for extra in ([], ["--uneven"]):
        r = _torchrun(
            2, "--tokens", "200", "--hidden", "512", "--inter", "256", "--experts", "16", "--topk", "8", *extra,
            "--layout", *LAYOUTS,
        )  # fmt: skip
        assert r.returncode == 0 and "mxrt.ep check W=2: PASS" in r.stdout, r.stdout + r.stderr
