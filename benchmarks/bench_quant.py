"""Achieved bandwidth of the GPU quantizers against a device-to-device copy in the same run (not a test).

Bytes counted: input read once + codes and scales written once (the padded storage for a fused scale layout).
Each case is timed as CUDA-graph replays of launches with preallocated outputs, rotating over enough input and
output sets that the working set is several times the L2, so launch gaps and L2 hits stay out of the numbers.
Two copy references, bytes read + written: the peak, the fastest of cudaMemcpyAsync (plain stream, not a
graph: a graph memcpy node goes to the copy engines, ~20% slower on H100), CuPy's copyto of 16-byte elements
and a 16-byte vector copy kernel over 512 MiB; and a same-size copy, the vector copy kernel (the access
pattern of the FLAT quantizer: 4 x 16-byte loads in flight per lane) moving the case's own byte count, timed
the same way, so ramp-up and tail effects of small shapes appear on both sides.
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
import ml_dtypes
import numpy as np

import mxrt
from mxrt import codes
from mxrt.ops import kernels, quant_kernels
from mxrt.ops import quant as q_ops
from mxrt.runtime import kernel_spec
from mxrt.runtime.compiler import build, compile_options
from mxrt.runtime.source import stamped_source

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
    cupy.cuda.Device().synchronize()  # input generation on the null stream must not overlap the timing
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


COPY16 = r"""
extern "C" __global__ void __launch_bounds__(256) copy16(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                         unsigned long long n) {
  const unsigned long long base = ((unsigned long long)blockIdx.x * 8 + threadIdx.x / 32) * 128 + threadIdx.x % 32;
  uint4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (base + u * 32 < n) v[u] = src[base + u * 32];
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (base + u * 32 < n) dst[base + u * 32] = v[u];
}
"""


def copy_launches(nbytes: int):
    """Launch callables of the vector copy kernel moving nbytes/2 bytes in and out, over rotating buffers."""
    kernel = cupy.RawKernel(COPY16, "copy16")
    n16 = max(1, nbytes // 2 // 16)
    launches = []
    for _ in range(_sets(nbytes)):
        src, dst = cupy.ones(n16 * 16, cupy.uint8), cupy.empty(n16 * 16, cupy.uint8)
        grid = (-(-n16 // 1024),)
        launches.append(lambda src=src, dst=dst, grid=grid: kernel(grid, (256,), (src, dst, np.uint64(n16))))
    return launches, 2 * n16 * 16


def copy_bandwidth() -> dict[str, float]:
    """Peak device-to-device copy bandwidth over 512 MiB, bytes read + written, three ways."""
    n = 512 << 20
    src, dst = cupy.ones(n, cupy.uint8), cupy.empty(n, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:

        def memcpy():
            cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, 3, stream.ptr)

        def loop():
            for _ in range(8):
                memcpy()

        t_memcpy = _median_time(loop, 7) / 8
    s16, d16 = src.view(cupy.complex128), dst.view(cupy.complex128)
    launches, moved = copy_launches(2 * n)
    return {
        "cudaMemcpyAsync": 2 * n / t_memcpy,
        "copyto16": 2 * n / graph_time([lambda: cupy.copyto(d16, s16)], 8),
        "copy16 kernel": moved / graph_time(launches, 8),
    }


def _ndiff(a: np.ndarray, b: np.ndarray) -> int:
    """Differing bytes of two outputs compared flat (the benchmark keeps scale buffers 1-D); -1: sizes differ."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return int((a != b).sum()) if a.size == b.size else -1


def _sets(bytes_per_call: int) -> int:
    return max(1, -(-3 * L2_BYTES // bytes_per_call))


def _bf16_input(m: int, k: int, seed: int):
    """Random bf16 bits on the device (CuPy has no bfloat16 dtype: the kernel reads them as uint16)."""
    rng = cupy.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=cupy.float32).view(cupy.uint32) >> 16).astype(cupy.uint16)


def rowwise_case(m: int, k: int, fmt: str, layout: str | None):
    """(launch callables over rotating buffer sets, bytes per call) for quantize_mx on bf16 [m, k]."""
    arch = mxrt.runtime.get_arch()
    spec = kernels.select("quantize_mx", arch.target)
    d = kernel_spec.defines(
        FMT=codes.FMT_CODES[fmt],
        IN_DTYPE=codes.IN_DTYPE_CODES["bfloat16"],
        SCALE_LAYOUT=codes.SCALE_LAYOUT_CODES[layout],
        THREADS=quant_kernels.QUANT_ROWWISE_THREADS,
    )
    kernel = build(spec, d, arch)
    code_bytes = m * (-(-k // 2) if fmt == "e2m1" else k)
    nb = -(-k // 32)
    s_bytes = m * nb if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, m, nb)))
    nbytes = 2 * m * k + code_bytes + s_bytes
    launches, outputs = [], None
    for i in range(_sets(nbytes)):
        x = _bf16_input(m, k, i)
        qb = cupy.empty((m, code_bytes // m), cupy.uint8)
        sb = cupy.empty(s_bytes, cupy.uint8)
        flags, cfg = q_ops.rowwise_launch(m, k, "bfloat16", x.data.ptr, qb.data.ptr, fmt)
        args = (x, qb, sb, np.int32(m), np.int32(k), np.int32(codes.SCALE_MODE_CODES["rceil"]), np.int32(flags))
        launches.append(lambda cfg=cfg, args=args: kernel(cfg.grid, cfg.block, args))
        outputs = outputs or (qb, sb.reshape(m, nb) if layout is None else q_ops.scale_view(sb, layout, m, nb))
    return launches, nbytes, flags, outputs


def dual_case(m: int, k: int, fmt: str, layout: str | None, variant: tuple[int, int] | None = None):
    """variant (rows_fast, min_blocks): build with the kernel's tuning knobs set (defaults otherwise)."""
    arch = mxrt.runtime.get_arch()
    spec = kernels.select("quantize_mx_dual", arch.target)
    d = kernel_spec.defines(
        BLOCK_2D=0,
        FMT=codes.FMT_CODES[fmt],
        IN_DTYPE=codes.IN_DTYPE_CODES["bfloat16"],
        SCALE_LAYOUT=codes.SCALE_LAYOUT_CODES[layout],
        THREADS=quant_kernels.QUANT_DUAL_THREADS,
    )
    rows_fast = q_ops.DUAL_ROWS_FAST
    if variant is None:
        kernel = build(spec, d, arch)
    else:
        rows_fast, min_blocks = variant
        extra = (f"-DDUAL_ROWS_FAST={rows_fast}", f"-DDUAL_MIN_BLOCKS={min_blocks}")
        code = stamped_source(spec.file, arch.target)
        kernel = cupy.RawModule(code=code, options=compile_options(arch, d) + extra).get_function(spec.symbol)
    packed = fmt == "e2m1"
    rb, cb = (-(-k // 2), -(-m // 2)) if packed else (k, m)

    def sbytes(rows, cols):
        return rows * cols if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, rows, cols)))

    sr, sc = sbytes(m, -(-k // 32)), sbytes(k, -(-m // 32))
    nbytes = 2 * m * k + m * rb + k * cb + sr + sc
    launches, outputs = [], None
    for i in range(_sets(nbytes)):
        x = _bf16_input(m, k, i)
        q_row, q_col = cupy.empty((m, rb), cupy.uint8), cupy.empty((k, cb), cupy.uint8)
        s_row, s_col = cupy.empty(sr, cupy.uint8), cupy.empty(sc, cupy.uint8)
        flags, cfg = q_ops.dual_launch(m, k, "bfloat16", x.data.ptr, q_row.data.ptr, q_col.data.ptr, fmt, rows_fast)
        args = (x, q_row, s_row, q_col, s_col, np.int32(m), np.int32(k))
        args += (np.int32(codes.SCALE_MODE_CODES["rceil"]), np.int32(flags))
        launches.append(lambda cfg=cfg, args=args: kernel(cfg.grid, cfg.block, args))
        outputs = outputs or (q_row, s_row, q_col, s_col)
    return launches, nbytes, flags, outputs


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
        xs = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in range(max(1, int(-(-150e6 // nbytes))))]
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
    p.add_argument("--passes", type=int, default=2, help="time each case this often; the best median counts")
    p.add_argument("--verify", action="store_true", help="set-0 outputs vs the numpy twin (shapes < 2^25 elems)")
    p.add_argument(
        "--dual-variants",
        default="",
        help="extra dual builds 'rows_fast:min_blocks,...' (kernel knobs DUAL_ROWS_FAST, DUAL_MIN_BLOCKS)",
    )
    p.add_argument("--json", default="")
    args = p.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    peaks = copy_bandwidth()
    copy_bw = max(peaks.values())
    arch = mxrt.runtime.get_arch()
    print(f"device {arch.name} ({arch.target}), bf16 input -> {args.fmt}, RCEIL")
    print("d2d copy 512 MiB: " + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in peaks.items()))
    variants = [tuple(int(v) for v in s.split(":")) for s in args.dual_variants.split(",") if s]
    rows = []
    for m, k in [] if args.torch_only else shapes:
        cases = [
            ("quantize_mx", rowwise_case(m, k, args.fmt, None)),
            (f"quantize_mx+{args.layout}", rowwise_case(m, k, args.fmt, args.layout)),
            ("quantize_mx_dual", dual_case(m, k, args.fmt, None)),
        ]
        cases += [(f"quantize_mx_dual[rf{v[0]},mb{v[1]}]", dual_case(m, k, args.fmt, None, v)) for v in variants]
        reference = None
        want = None
        if args.verify and m * k < 2**25:
            x0 = cupy.asnumpy(_bf16_input(m, k, 0)).view(ml_dtypes.bfloat16)
            want = mxrt.quantize_mx_dual(x0, args.fmt, backend="numpy")
        for name, (launches, nbytes, flags, outputs) in cases:
            passes = [graph_time(launches, per_graph=max(20, 4 * len(launches))) for _ in range(args.passes)]
            t = min(passes)
            host = [cupy.asnumpy(o) for o in outputs]
            if not name.startswith("quantize_mx_dual") and want is not None:
                layout = name.split("+")[1] if "+" in name else None
                s_want = want.row.scales if layout is None else mxrt.preshuffle_scales(want.row.scales, layout)
                diffs = [_ndiff(a, b) for a, b in zip(host, (want.row.data, s_want), strict=True)]
                print(f"verify {name} {m}x{k} vs numpy: {'bit-exact' if not any(diffs) else diffs}")
            if name.startswith("quantize_mx_dual"):  # every variant must give the default build's bytes
                reference = reference or host
                same_bytes = all(np.array_equal(a, b) for a, b in zip(host, reference, strict=True))
                if not same_bytes:
                    diffs = [int((a != b).sum()) for a, b in zip(host, reference, strict=True)]
                    print(f"MISMATCH: {name} {m}x{k} differs from quantize_mx_dual: {diffs} bytes")
                if want is not None:
                    exp = (want.row.data, want.row.scales, want.col.data, want.col.scales)
                    diffs = [_ndiff(a, b) for a, b in zip(host, exp, strict=True)]
                    print(f"verify {name} {m}x{k} vs numpy: {'bit-exact' if not any(diffs) else diffs}")
            cl, moved = copy_launches(nbytes)
            same = moved / graph_time(cl, per_graph=max(20, 4 * len(cl)))
            rows.append(
                {"kernel": name, "shape": [m, k], "s": t, "passes": passes, "bytes": nbytes, "flags": flags}
                | {"copy_Bps": same}
            )
            if name.startswith("quantize_mx_dual"):
                rows[-1]["same_bytes_as_default"] = same_bytes
            del launches, cl
        cupy.get_default_memory_pool().free_all_blocks()
    status, peer = ("skipped: --no-torch", []) if args.no_torch else torch_peer(shapes, args.torch_timeout)
    for r in peer:
        if "shape" in r:
            rows.append({"kernel": "torch.compile rowwise", "shape": r["shape"], "s": r["s"], "bytes": r["bytes"]})
    compile_s = next((r["compile_s"] for r in peer if "compile_s" in r), None)
    print(f"torch.compile peer: {status}" + (f", first compile {compile_s:.1f} s" if compile_s is not None else ""))
    print(f"\n{'kernel':30s} {'shape':>10s} {'us':>7s} {'TB/s':>5s} {'%peak':>6s} {'%same-size copy':>15s}")
    for r in rows:
        bw = r["bytes"] / r["s"]
        r["tbps"], r["pct_copy"] = bw / 1e12, 100 * bw / copy_bw
        same = f"{100 * bw / r['copy_Bps']:14.1f}%" if "copy_Bps" in r else f"{'-':>15s}"
        shape = f"{r['shape'][0]}x{r['shape'][1]}"
        print(f"{r['kernel']:30s} {shape:>10s} {r['s'] * 1e6:7.1f} {bw / 1e12:5.2f} {100 * bw / copy_bw:5.1f}% {same}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": arch.name,
                    "fmt": args.fmt,
                    "copy_peak_Bps": peaks,
                    "torch_peer": status,
                    "rows": rows,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
