"""Time sm90_decode with preshuffled weight scales against row-major ones (issue 12; session 9).

    python benchmarks/decode_layouts_time.py

N = 7168, K = 4096, MXFP8 weights and tokens, bf16 out, M in {1, 8, 16, 64}: `gemm_mx` with the weight scales
row-major, then preshuffled into each layout (read in place by the decode kernel). CUDA events, median of 30
replays of a CUDA graph of 20 calls over 3 input sets (kernel time, no host overhead); GB/s over the weight bytes
(codes + scales)."""

import itertools
import statistics

import cupy

import mxrt

N, K = 7168, 4096
LAYOUTS = (None, "cublas128x4", "deepgemm_ue8m0", "aiter32x8", "turbo16x4")


def median_us(fns, samples=30, reps=20):
    """Kernel time: `reps` calls (cycling the input sets) captured in one CUDA graph, replayed `samples` times."""
    for f in fns:
        f()
    cupy.cuda.runtime.deviceSynchronize()
    turn = itertools.count()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        for _ in range(reps):
            fns[next(turn) % len(fns)]()
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    t = []
    for _ in range(samples):
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(stream)
        graph.launch(stream)
        e1.record(stream)
        e1.synchronize()
        t.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / reps)
    return statistics.median(t)


rng = cupy.random.default_rng(0)
ws = [mxrt.quantize_mx(rng.standard_normal((N, K), dtype=cupy.float32), "e4m3") for _ in range(3)]
wbytes = N * K + N * K // 32
print(f"{'M':>3} {'layout':16s} {'kernel':24s} {'us':>8s} {'GB/s':>7s} {'vs row-major':>12s}")
for m in (1, 8, 16, 64):
    xs = [mxrt.quantize_mx(rng.standard_normal((m, K), dtype=cupy.float32), "e4m3") for _ in range(3)]
    base = None
    for layout in LAYOUTS:
        b_scales = [w.scales if layout is None else mxrt.preshuffle_scales(w.scales, layout) for w in ws]
        fns = [
            lambda x=x, w=w, s=s, lay=layout: mxrt.gemm_mx(x, (w.data, s, "e4m3", K), b_scale_layout=lay)
            for x, w, s in zip(xs, ws, b_scales, strict=True)
        ]
        with mxrt.runtime.debug() as session:
            fns[0]()
        kernel = session.launches[-1][1] if session.launches else "?"
        us = median_us(fns)
        base = base or us
        name = layout or "row-major"
        print(f"{m:>3} {name:16s} {kernel[:24]:24s} {us:8.2f} {wbytes / us / 1e3:7.0f} {base / us:11.2f}x", flush=True)
