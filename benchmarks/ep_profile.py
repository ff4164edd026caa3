"""Where a W-rank ``mxrt.ep.dispatch`` / ``combine`` spends its time (``torchrun --nproc-per-node W
benchmarks/ep_profile.py [T ...]``): per step wall times with a device sync after each step (rank 0 prints), then
torch.profiler's CPU / CUDA table of one dispatch and one combine (``EP_TRACE_DIR``: chrome traces of the largest T
per rank there). DeepSeek-V3 shapes: H 7168, top-8, E 256."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

import mxrt
from mxrt.ep import combine, dispatch
from mxrt.ep.launch import init


def main() -> None:
    rank, _w, dev = init()
    h, k, e = 7168, 8, 256
    ts = [int(a) for a in sys.argv[1:]] or [4096, 16384]
    for t in ts:
        g = torch.Generator(device=dev).manual_seed(rank)
        x = torch.randn(t, h, device=dev, generator=g).to(torch.bfloat16)
        ids = torch.argsort(torch.rand(t, e, device=dev, generator=g), 1)[:, :k].contiguous()
        wts = torch.softmax(torch.randn(t, k, device=dev, generator=g), 1)
        xq = mxrt.quantize_mx(x, "e4m3")
        for name, p in (("mx", xq), ("bf16", x)):
            for _ in range(3):
                _, hd = dispatch(p, ids, wts, num_experts=e)
            y = torch.ones(hd.num_recv, h, device=dev, dtype=torch.bfloat16)
            combine(y, hd)
            dist.barrier(device_ids=[dev.index])
            torch.cuda.synchronize()
            # host-side cost: launch a dispatch with the device already idle, time to return and to finish
            t0 = time.perf_counter()
            _, hd = dispatch(p, ids, wts, num_experts=e)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            combine(y, hd)
            t3 = time.perf_counter()
            torch.cuda.synchronize()
            t4 = time.perf_counter()
            if rank == 0:
                print(
                    f"T={t} {name}: dispatch host {1e3 * (t1 - t0):.3f} ms, +device tail {1e3 * (t2 - t1):.3f} ms; "
                    f"combine host {1e3 * (t3 - t2):.3f} ms, +device tail {1e3 * (t4 - t3):.3f} ms",
                    flush=True,
                )
            dist.barrier(device_ids=[dev.index])
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=acts) as prof:
                _, hd = dispatch(p, ids, wts, num_experts=e)
                combine(y, hd)
                torch.cuda.synchronize()
            trace = os.environ.get("EP_TRACE_DIR")
            if trace and t == max(ts):
                prof.export_chrome_trace(f"{trace}/trace_{name}_T{t}_rank{rank}.json")
            if rank == 0:
                print(f"--- T={t} {name}: one dispatch + one combine, by CUDA time")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))
                print(f"--- T={t} {name}: by self CPU time")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
