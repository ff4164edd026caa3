"""The MoE combine alone on one GPU: the fused kernel (mxrt.moe_combine, as mxrt.ep.combine runs it) against the old
torch expression of mxrt.ep.combine and a device copy of the same rows, CUDA events, median of --iters.

    python benchmarks/bench_moe_combine.py --tokens 4096 16384 --topk 8 --hidden 7168

Rows: ``back`` bf16 [T * k, n] in a random send order (what the reverse all-to-all returns), weights float32 [T, k].
Bytes: fused = read T*k*n*2 + write T*n*2 (+ src / weights); copy = read + write of ``back``. GB/s counts read +
write. The fused result is checked bit for bit against torch's slot-order loop (products in fp32, added in slot
order, rounded once: no subnormals here, so CUDA's flush-to-zero does not matter) and against the old expression
(torch's own reduction order) within one bf16 ulp.
"""

from __future__ import annotations

import argparse

import torch

import mxrt
from mxrt.bench import core as bench_core


def timed(fn, iters: int) -> float:
    """Median ms of ``iters`` CUDA-event-timed calls after 3 warm-ups (mxrt.bench's torch timer)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return 1e3 * bench_core.torch_median_time(fn, iters)


def run_one(t: int, k: int, n: int, iters: int, g: torch.Generator) -> str:
    dev = torch.device("cuda")
    r = t * k
    back = torch.randn(r, n, device=dev, generator=g).to(torch.bfloat16)
    order = torch.randperm(r, device=dev, generator=g)
    wts = torch.softmax(torch.randn(t, k, device=dev, generator=g), 1)
    dst = torch.empty_like(back)

    def old() -> torch.Tensor:  # mxrt.ep.combine before the fused kernel
        pairs = torch.empty_like(back).index_copy_(0, order, back)
        return (pairs.view(t, k, n).to(torch.float32) * wts.view(t, k, 1)).sum(1).to(torch.bfloat16)

    def src_of() -> torch.Tensor:
        return torch.empty_like(order).index_copy_(0, order, torch.arange(r, device=dev)).view(t, k)

    src = src_of()

    def fused() -> torch.Tensor:  # what mxrt.ep.combine runs now: the scatter of src, then the kernel
        return mxrt.moe_combine(back, src_of(), wts)

    def kernel() -> torch.Tensor:
        return mxrt.moe_combine(back, src, wts)

    def copy() -> torch.Tensor:
        return dst.copy_(back)

    got = fused()
    pairs = torch.empty_like(back).index_copy_(0, order, back).view(t, k, n)
    acc = pairs[:, 0].float() * wts[:, :1]
    for j in range(1, k):
        acc = acc + pairs[:, j].float() * wts[:, j : j + 1]
    exact = bool(torch.equal(got.view(torch.int16), acc.to(torch.bfloat16).view(torch.int16)))
    ulps = (got.view(torch.int16).int() - old().view(torch.int16).int()).abs().max().item()
    pairs = acc = None
    t_old, t_fused, t_kernel, t_copy = (timed(f, iters) for f in (old, fused, kernel, copy))
    fused_bytes = r * n * 2 + t * n * 2 + r * (8 + 4)
    copy_bytes = 2 * r * n * 2
    bw_k, bw_c = fused_bytes / t_kernel / 1e6, copy_bytes / t_copy / 1e6
    return (
        f"T={t:6d} k={k} n={n}: old torch {t_old:7.3f} ms | fused (scatter + kernel) {t_fused:7.3f} ms "
        f"({t_old / t_fused:5.1f}x) | kernel {t_kernel:7.3f} ms = {fused_bytes / 1e9:.2f} GB at {bw_k:6.0f} GB/s | "
        f"copy of back {t_copy:7.3f} ms = {copy_bytes / 1e9:.2f} GB at {bw_c:6.0f} GB/s -> kernel at "
        f"{bw_k / bw_c:.0%} of copy | bitwise = slot-order torch loop: {exact}; max |fused - old| {ulps} bf16 ulp(s)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    print(f"device {torch.cuda.get_device_name()}; median of {a.iters} (CUDA events)", flush=True)
    for t in a.tokens:
        print(run_one(t, a.topk, a.hidden, a.iters, g), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
