"""Achieved bandwidth of the GPU quantizers against a device-to-device copy in the same run (not a test).

Bytes counted: input read once + codes and scales written once (the padded storage for a fused scale layout).
Each case is timed as CUDA-graph replays of launches with preallocated outputs, rotating over enough input and
output sets that the working set is several times the L2, so launch gaps and L2 hits stay out of the numbers.
The copy reference is the faster of cudaMemcpyAsync device-to-device and CuPy's elementwise copy of 512 MiB.
A ``torch.compile`` of an equivalent torch rowwise quantizer runs as a peer in a subprocess when torch is
present (skipped cleanly when it is missing, fails, or does not compile within ``--torch-timeout`` seconds).

``python benchmarks/bench_quant.py [--fmt e4m3] [--shapes 8192x8192,4096x7168] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time

import cupy
import numpy as np

import mxrt
from mxrt.ops import quant as q_ops
from mxrt.runtime import specs
from mxrt.runtime.compiler import build

# bf16 [8192, 8192] and the seeds' MoE shapes: activations M = 4096 tokens x K = 7168 / 2048 / 2880 (hidden sizes
# of DeepSeek-V3, Qwen-MoE-style and gpt-oss experts), weights [N, K] = [7168, 4096], [2880, 4096].
SHAPES = [(8192, 8192), (4096, 7168), (4096, 2048), (4096, 2880), (7168, 4096), (2880, 4096)]
L2_BYTES = 50 << 20


def _median_time(run, reps: int) -> float:
    """Median seconds of ``run()`` (one graph replay) over ``reps`` timings, CUDA events, after a warm-up."""
    run()
    cupy.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / 1e3)
    return statistics.median(times)


def graph_time(launches, per_graph: int, reps: int = 7) -> float:
    """Seconds per launch: ``launches`` is a list of callables (one per rotating buffer set), captured
    ``per_graph`` times round-robin into one CUDA graph."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for f in launches:  # compile and warm outside the capture
            f()
        stream.synchronize()
        stream.begin_capture()
        for i in range(per_graph):
            launches[i % len(launches)]()
        graph = stream.end_capture()
        t = _median_time(lambda: graph.launch(stream), reps)
    return t / per_graph


def copy_bandwidth() -> tuple[float, float]:
    """(cudaMemcpyAsync, CuPy elementwise) device-to-device copy bandwidth of 512 MiB, bytes read + written."""
    n = 512 << 20
    src, dst = cupy.empty(n, cupy.uint8), cupy.empty(n, cupy.uint8)
    src[:] = 1

    def memcpy():
        cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, 3, cupy.cuda.get_current_stream().ptr)

    def elementwise():
        cupy.copyto(dst, src)

    return 2 * n / graph_time([memcpy], 8), 2 * n / graph_time([elementwise], 8)


def _sets(bytes_per_call: int) -> int:
    return max(1, -(-3 * L2_BYTES // bytes_per_call))


def _bf16_input(m: int, k: int, seed: int):
    """Random bf16 bits on the device (CuPy has no bfloat16 dtype: the kernel reads them as uint16)."""
    rng = cupy.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=cupy.float32).view(cupy.uint32) >> 16).astype(cupy.uint16)


def rowwise_case(m: int, k: int, fmt: str, layout: str | None):
    """(launch callables over rotating buffer sets, bytes per call) for quantize_mx on bf16 [m, k]."""
    arch = mxrt.runtime.get_arch()
    spec = specs.select("quantize_mx", arch.target)
    d = specs.defines(
        FMT=specs.FMT_CODES[fmt],
        IN_DTYPE=specs.IN_DTYPE_CODES["bfloat16"],
        SCALE_LAYOUT=specs.SCALE_LAYOUT_CODES[layout],
        THREADS=specs.QUANT_ROWWISE_THREADS,
    )
    kernel = build(spec, d, arch)
    code_bytes = m * (-(-k // 2) if fmt == "e2m1" else k)
    nb = -(-k // 32)
    s_bytes = m * nb if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, m, nb)))
    nbytes = 2 * m * k + code_bytes + s_bytes
    launches = []
    for i in range(_sets(nbytes)):
        x = _bf16_input(m, k, i)
        qb = cupy.empty((m, code_bytes // m), cupy.uint8)
        sb = cupy.empty(s_bytes, cupy.uint8)
        flags, cfg = q_ops.rowwise_launch(m, k, "bfloat16", x.data.ptr, qb.data.ptr, fmt)
        args = (x, qb, sb, np.int32(m), np.int32(k), np.int32(specs.SCALE_MODE_CODES["rceil"]), np.int32(flags))
        launches.append(lambda cfg=cfg, args=args: kernel(cfg.grid, cfg.block, args))
    return launches, nbytes, flags


def dual_case(m: int, k: int, fmt: str, layout: str | None):
    arch = mxrt.runtime.get_arch()
    spec = specs.select("quantize_mx_dual", arch.target)
    d = specs.defines(
        BLOCK_2D=0,
        FMT=specs.FMT_CODES[fmt],
        IN_DTYPE=specs.IN_DTYPE_CODES["bfloat16"],
        SCALE_LAYOUT=specs.SCALE_LAYOUT_CODES[layout],
        THREADS=specs.QUANT_DUAL_THREADS,
    )
    kernel = build(spec, d, arch)
    packed = fmt == "e2m1"
    rb, cb = (-(-k // 2), -(-m // 2)) if packed else (k, m)

    def sbytes(rows, cols):
        return rows * cols if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, rows, cols)))

    sr, sc = sbytes(m, -(-k // 32)), sbytes(k, -(-m // 32))
    nbytes = 2 * m * k + m * rb + k * cb + sr + sc
    launches = []
    for i in range(_sets(nbytes)):
        x = _bf16_input(m, k, i)
        q_row, q_col = cupy.empty((m, rb), cupy.uint8), cupy.empty((k, cb), cupy.uint8)
        s_row, s_col = cupy.empty(sr, cupy.uint8), cupy.empty(sc, cupy.uint8)
        flags, cfg = q_ops.dual_launch(m, k, "bfloat16", x.data.ptr, q_row.data.ptr, q_col.data.ptr, fmt)
        args = (x, q_row, s_row, q_col, s_col, np.int32(m), np.int32(k))
        args += (np.int32(specs.SCALE_MODE_CODES["rceil"]), np.int32(flags))
        launches.append(lambda cfg=cfg, args=args: kernel(cfg.grid, cfg.block, args))
    return launches, nbytes, flags


TORCH_PEER = textwrap.dedent(
    """
    import json, sys, time
    import torch

    def quant(x):  # bf16 [m, k] -> e4m3 codes [m, k], E8M0 bytes [m, k/32]; RCEIL scale (torchao style)
        m, k = x.shape
        xf = x.float().view(m, k // 32, 32)
        amax = xf.abs().amax(-1)
        bits = (amax / 448.0).view(torch.int32)
        e = (((bits + 0x7FFFFF) >> 23) - 127).clamp(-127, 127)
        e = torch.where(amax == 0, torch.full_like(e, -127), e)
        y = (xf * torch.exp2(-e.float()).unsqueeze(-1)).clamp(-448.0, 448.0)
        return y.to(torch.float8_e4m3fn).view(m, k), (e + 127).to(torch.uint8)

    shapes = json.loads(sys.argv[1])
    t0 = time.time()
    fn = torch.compile(quant)
    x = torch.randn(256, 256, device="cuda").to(torch.bfloat16)
    fn(x)
    torch.cuda.synchronize()
    print(json.dumps({"compile_s": time.time() - t0}), flush=True)
    for m, k in shapes:
        nbytes = 2 * m * k + m * k + m * k // 32
        xs = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in range(max(1, -(-150e6 // nbytes)))]
        for x in xs:
            fn(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        per = 20
        with torch.cuda.graph(g):
            for i in range(per):
                fn(xs[i % len(xs)])
        times = []
        for _ in range(7):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); g.replay(); b.record(); b.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / per)
        times.sort()
        print(json.dumps({"shape": [m, k], "s": times[len(times) // 2], "bytes": nbytes}), flush=True)
    """
)


def torch_peer(shapes, timeout: float) -> tuple[str, list[dict]]:
    """Run the torch.compile peer in a subprocess; (status, rows)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "skipped: torch is not installed", []
    t0 = time.time()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", TORCH_PEER, json.dumps(shapes)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return f"stopped after {timeout:.0f} s (compile or timing too slow)", rows
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        return f"failed (rc {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", rows
    return f"ok in {time.time() - t0:.0f} s", rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--fmt", default="e4m3")
    p.add_argument("--shapes", default=",".join(f"{m}x{k}" for m, k in SHAPES))
    p.add_argument("--layout", default="cublas128x4", help="scale layout of the fused-preshuffle rows")
    p.add_argument("--torch-timeout", type=float, default=150.0)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--torch-only", action="store_true", help="only the copy reference and the torch peer")
    p.add_argument("--json", default="")
    args = p.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    memcpy_bw, elementwise_bw = copy_bandwidth()
    copy_bw = max(memcpy_bw, elementwise_bw)
    arch = mxrt.runtime.get_arch()
    print(f"device {arch.name} ({arch.target}), bf16 input -> {args.fmt}, RCEIL")
    print(f"d2d copy 512 MiB: cudaMemcpyAsync {memcpy_bw / 1e12:.2f} TB/s, copyto {elementwise_bw / 1e12:.2f} TB/s")
    rows = []
    for m, k in [] if args.torch_only else shapes:
        cases = [
            ("quantize_mx", rowwise_case(m, k, args.fmt, None)),
            (f"quantize_mx+{args.layout}", rowwise_case(m, k, args.fmt, args.layout)),
            ("quantize_mx_dual", dual_case(m, k, args.fmt, None)),
        ]
        for name, (launches, nbytes, flags) in cases:
            t = graph_time(launches, per_graph=max(20, 4 * len(launches)))
            rows.append({"kernel": name, "shape": [m, k], "s": t, "bytes": nbytes, "flags": flags})
            del launches
        cupy.get_default_memory_pool().free_all_blocks()
    status, peer = ("skipped: --no-torch", []) if args.no_torch else torch_peer(shapes, args.torch_timeout)
    for r in peer:
        if "shape" in r:
            rows.append({"kernel": "torch.compile rowwise", "shape": r["shape"], "s": r["s"], "bytes": r["bytes"]})
    compile_s = next((r["compile_s"] for r in peer if "compile_s" in r), None)
    print(f"torch.compile peer: {status}" + (f", first compile {compile_s:.1f} s" if compile_s is not None else ""))
    print(f"\n{'kernel':30s} {'shape':>12s} {'time us':>9s} {'TB/s':>6s} {'% copy':>7s}")
    for r in rows:
        bw = r["bytes"] / r["s"]
        r["tbps"], r["pct_copy"] = bw / 1e12, 100 * bw / copy_bw
        shape = f"{r['shape'][0]}x{r['shape'][1]}"
        print(f"{r['kernel']:30s} {shape:>12s} {r['s'] * 1e6:9.1f} {bw / 1e12:6.2f} {100 * bw / copy_bw:6.1f}%")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": arch.name,
                    "fmt": args.fmt,
                    "copy_memcpy_Bps": memcpy_bw,
                    "copy_elementwise_Bps": elementwise_bw,
                    "torch_peer": status,
                    "rows": rows,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
