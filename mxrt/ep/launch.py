"""``torchrun --nproc-per-node W -m mxrt.ep.launch [--check] [--bench ...]``: check and time :mod:`mxrt.ep`.

One process per GPU (``LOCAL_RANK`` picks it); NCCL for CUDA, gloo when no GPU is present (the CPU runs the
numpy twins of the grouped GEMMs: slow, for small shapes only). NVLink multicast is switched off before the process
group is created (:data:`mxrt.ep.NVLS_OFF`). ``python -m mxrt.ep.launch`` without torchrun runs a world of one.

``--check`` (default): every rank builds the same global problem from ``--seed`` (tokens of all ranks, all experts'
weights quantized once with the numpy quantizer), runs :func:`mxrt.ep.moe_forward` on its tokens and experts, and
compares (1) its dispatched codes / scales / group_lens bit for bit with :func:`mxrt.layouts.ep.simulate_dispatch`
of the whole world and (2) its output with :func:`mxrt.reference.moe_layer.moe_layer_f64` (bf16 calc_diff
<= 1e-5). Exit status 1 when any rank fails.

``--bench``: dispatch + combine time of MXFP8 tokens vs bfloat16 tokens (CUDA events, median), and the whole layer
vs the same layer with bf16 tokens and ``torch._grouped_mm`` (``--experts`` experts; weights random on the device).

``--layout L [L ...]``: run the check / the dispatch timings once per dispatch layout (``MXRT_EP_DISPATCH``:
``auto``, ``torch``, ``fused``; ``mixed``: torch on even ranks, fused on odd ones, check only), interleaved per token
count so both are timed on the same machine state; the layer bench runs with the last one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .. import config
from ..api.quant import quantize_mx
from ..formats.mx import MXArray
from ..formats.mx import quantize_mx as quantize_np
from ..layouts.ep import experts_per_rank, simulate_dispatch
from ..reference.metrics import calc_diff
from ..reference.moe_layer import BF16, moe_layer_f64
from . import _transport as tp
from . import combine, dispatch, moe_forward, multicast_off


def init() -> tuple[int, int, torch.device]:
    """Create the default process group from torchrun's environment (a world of one without it)."""
    multicast_off()
    for k, v in config.EP_WORLD_OF_ONE.items():
        os.environ.setdefault(k, v)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(config.local_rank())
    dist.init_process_group("nccl" if cuda else "gloo")
    dev = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), dev


def routing(rng: np.random.Generator, t: int, e: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``topk`` distinct experts per token (uniform) and softmax weights (float32)."""
    ids = np.argsort(rng.random((t, e)), axis=1)[:, :k].astype(np.int64)
    s = rng.standard_normal((t, k)).astype(np.float32)
    wts = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    return ids, wts.astype(np.float32)


def _local(q: MXArray, lo: int, hi: int, dev: torch.device) -> MXArray:
    return MXArray(
        data=torch.from_numpy(np.ascontiguousarray(q.data[lo:hi])).to(dev),
        scales=torch.from_numpy(np.ascontiguousarray(q.scales[lo:hi])).to(dev),
        fmt=q.fmt,
        block_size=q.block_size,
        axis=q.axis,
        shape=(hi - lo, *q.shape[1:]),
        scale_mode=q.scale_mode,
    )


def set_layout(layout: str | None, rank: int) -> str:
    """Set ``MXRT_EP_DISPATCH`` for this rank (``mixed``: torch on even ranks, fused on odd ones); its value."""
    if layout is not None:
        os.environ[config.ENV_EP_DISPATCH] = ("torch" if rank % 2 == 0 else "fused") if layout == "mixed" else layout
    return config.ep_dispatch_mode()


def check(a: argparse.Namespace, rank: int, w: int, dev: torch.device) -> bool:
    rng = np.random.default_rng(a.seed)
    el = experts_per_rank(a.experts, w, "mxrt.ep.launch")
    h, i, e, k = a.hidden, a.inter, a.experts, a.topk
    ts = [a.tokens * r // max(w - 1, 1) if a.uneven else a.tokens for r in range(w)]  # --uneven: rank 0 empty
    t = ts[rank]
    xs = [(rng.standard_normal((tr, h)) * rng.uniform(0.1, 4.0)).astype(BF16) for tr in ts]
    routes = [routing(rng, tr, e, k) for tr in ts]
    wgu = quantize_np((rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32), a.fmt, axis=2)
    wd = quantize_np((rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32), a.fmt, axis=2)
    x, (ids, wts) = xs[rank], routes[rank]
    tx = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).to(dev)
    tids, twts = torch.from_numpy(ids).to(dev), torch.from_numpy(wts).to(dev)
    if a.uneven and rank % 2:
        tids, twts = tids.to(torch.int32), twts.to(torch.bfloat16)  # the other id / weight dtypes
        wts = twts.float().cpu().numpy()
    out = moe_forward(
        tx,
        tids,
        twts,
        _local(wgu, rank * el, (rank + 1) * el, dev),
        _local(wd, rank * el, (rank + 1) * el, dev),
        num_experts=e,
        fmt=a.fmt,
    )
    got = out.float().cpu().numpy()
    ref = moe_layer_f64(x, ids, wts, wgu, wd, a.fmt).astype(np.float32)
    cd = calc_diff(got, ref) if t else 0.0
    # the dispatch alone, bit for bit against the simulated world
    xq = [quantize_np(xx, a.fmt) for xx in xs]
    codes, lens, _ = simulate_dispatch([q.data for q in xq], [r[0] for r in routes], e)
    scales, _, _ = simulate_dispatch([q.scales for q in xq], [r[0] for r in routes], e)
    g, hd = dispatch(quantize_mx(tx, a.fmt), tids, twts, num_experts=e)
    same = (
        np.array_equal(g.data.view(torch.uint8).cpu().numpy(), codes[rank])
        and np.array_equal(g.scales.view(torch.uint8).cpu().numpy(), scales[rank])
        and np.array_equal(hd.group_lens.cpu().numpy(), lens[rank])
    )
    ok = bool(cd <= 1e-5 and same and np.isfinite(got).all())
    print(
        f"rank {rank}/{w} {dev} layout {config.ep_dispatch_mode()}: tokens {t} "
        f"hidden {h} inter {i} experts {e} top{k} {a.fmt}: received rows "
        f"{hd.num_recv} group_lens {hd.group_lens.tolist()[:8]}{'...' if el > 8 else ''}; dispatch bitwise "
        f"{'ok' if same else 'MISMATCH'}; layer calc_diff {cd:.3e} (bar 1e-5): {'PASS' if ok else 'FAIL'}",
        flush=True,
    )
    return ok


def _median_ms(fn: Any, iters: int, dev: torch.device) -> float:
    """Median of ``iters`` calls after 3 warm-ups, each started after a barrier: CUDA events on a GPU (the host
    sync inside a dispatch is part of it), the wall clock on the CPU."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        if dev.type == "cuda":
            dist.barrier(device_ids=[dev.index])
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        else:
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench(a: argparse.Namespace, rank: int, w: int, dev: torch.device) -> None:
    g = torch.Generator(device=dev).manual_seed(a.seed + rank)
    h, k = a.hidden, a.topk
    for t in a.bench_tokens:
        x = torch.randn(t, h, device=dev, generator=g).to(torch.bfloat16)
        ids = torch.argsort(torch.rand(t, a.experts, device=dev, generator=g), 1)[:, :k].contiguous()
        wts = torch.softmax(torch.randn(t, k, device=dev, generator=g), 1)
        xq = quantize_mx(x, a.fmt)
        for layout in a.layout or [None]:
            tag = set_layout(layout, rank)
            rows = {}
            for name, payload in (("mx", xq), ("bf16", x)):
                _, hd = dispatch(payload, ids, wts, num_experts=a.experts)
                y = torch.randn(hd.num_recv, h, device=dev, generator=g).to(torch.bfloat16)
                td = _median_ms(lambda p=payload, i=ids, w=wts: dispatch(p, i, w, num_experts=a.experts), a.iters, dev)
                tc = _median_ms(lambda y=y, hd=hd: combine(y, hd), a.iters, dev)
                per_row = h + h // 32 if name == "mx" else 2 * h
                sent = sum(hd.send_splits) - hd.send_splits[rank]
                rows[name] = (td, tc)
                # combine bytes on this rank's HBM: the gather to received order (read + write R rows), the NCCL
                # copy out and in, and the fused sum (read T*k rows, write T rows); the link carries the off-rank rows
                local = (2 * hd.num_recv + hd.num_recv + t * k + t * k + t) * 2 * h
                if rank == 0:
                    print(
                        f"bench W={w} T={t} H={h} top{k} E={a.experts} {name:4s} [{tag}]: dispatch {td:.3f} ms combine "
                        f"{tc:.3f} ms sum {td + tc:.3f} ms; rank 0 sends {sent} rows off-rank = "
                        f"{sent * per_row / 1e6:.1f} MB dispatch, {sent * 2 * h / 1e6:.1f} MB combine "
                        f"({sent * 2 * h / tc / 1e6:.0f} GB/s over the link, {local / tc / 1e6:.0f} GB/s of "
                        f"{local / 1e9:.2f} GB local HBM traffic)",
                        flush=True,
                    )
            if rank == 0:
                (dm, cm), (db, cb) = rows["mx"], rows["bf16"]
                print(
                    f"bench W={w} T={t} [{tag}]: dispatch bf16/mx {db / dm:.2f}x, dispatch+combine "
                    f"{(db + cb) / (dm + cm):.2f}x",
                    flush=True,
                )
        if a.layer_experts:
            layer_bench(a, rank, w, dev, g, t)


def layer_bench(a: argparse.Namespace, rank: int, w: int, dev: torch.device, g: torch.Generator, t: int) -> None:
    e, h, i, k = a.layer_experts, a.hidden, a.inter, a.topk
    el = experts_per_rank(e, w, "mxrt.ep.launch")
    x = torch.randn(t, h, device=dev, generator=g).to(torch.bfloat16)
    ids = torch.argsort(torch.rand(t, e, device=dev, generator=g), 1)[:, :k].contiguous()
    wts = torch.softmax(torch.randn(t, k, device=dev, generator=g), 1)
    wgu = (torch.randn(el, 2 * i, h, device=dev, generator=g) / h**0.5).to(torch.bfloat16)
    wd = (torch.randn(el, h, i, device=dev, generator=g) / i**0.5).to(torch.bfloat16)
    qgu, qd = quantize_mx(wgu, a.fmt, axis=2), quantize_mx(wd, a.fmt, axis=2)

    def bf16_layer() -> torch.Tensor:
        xg, hd = dispatch(x, ids, wts, num_experts=e)
        offs = torch.cumsum(hd.group_lens, 0).to(torch.int32)
        gu = torch._grouped_mm(xg, wgu.transpose(-2, -1), offs=offs)
        act = (torch.nn.functional.silu(gu[:, :i].float()) * gu[:, i:].float()).to(torch.bfloat16)
        return combine(torch._grouped_mm(act, wd.transpose(-2, -1), offs=offs), hd)

    def mx_layer() -> torch.Tensor:
        return moe_forward(x, ids, wts, qgu, qd, num_experts=e, fmt=a.fmt)

    ref, got = bf16_layer().float(), mx_layer().float()
    cd = calc_diff(got.cpu().numpy(), ref.cpu().numpy())
    tm = _median_ms(mx_layer, a.iters, dev)
    tb = _median_ms(bf16_layer, a.iters, dev)
    if rank == 0:
        print(
            f"layer W={w} T={t} H={h} I={i} E={e} top{k}: mxrt MX layer {tm:.3f} ms, bf16 tokens + "
            f"torch._grouped_mm {tb:.3f} ms ({tb / tm:.2f}x); calc_diff vs bf16 layer {cd:.2e}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mxrt.ep.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=96, help="tokens per rank (--check)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--inter", type=int, default=128, help="expert intermediate size I (gate_up is 2I)")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--fmt", default="e4m3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--uneven", action="store_true", help="--check: rank r holds tokens * r / (W - 1) (rank 0 none)")
    p.add_argument("--bench", action="store_true", help="time dispatch/combine (and the layer) instead")
    p.add_argument("--bench-tokens", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--layer-experts", type=int, default=0, help="--bench: also time the layer with E experts")
    p.add_argument("--iters", type=int, default=20)
    layouts = ["auto", "torch", "fused", "mixed"]
    help_layout = "dispatch layouts (MXRT_EP_DISPATCH) to check / time in turn (default: the environment's)"
    p.add_argument("--layout", nargs="+", choices=layouts, help=help_layout)
    a = p.parse_args(argv)
    rank, w, dev = init()
    try:
        if a.bench:
            bench(a, rank, w, dev)
            return 0
        ok = True
        for layout in a.layout or [None]:
            set_layout(layout, rank)
            ok = check(a, rank, w, dev) and ok
        flag = torch.tensor([0 if ok else 1], device=dev)
        dist.all_reduce(flag)
        if rank == 0:
            print(f"mxrt.ep check W={w}: {'PASS' if int(flag.item()) == 0 else 'FAIL'} ({tp.backend(None)})")
        return 0 if int(flag.item()) == 0 else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
