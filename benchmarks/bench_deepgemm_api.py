"""mxrt.deep_gemm's m-grouped calls with DeepGEMM's Hopper recipe (e4m3 codes, float32 scales: activations 1x128,
weights 128x128) on a GPU, against ``torch._grouped_mm`` in bf16 on the dequantised operands (what a Hopper user
without DeepGEMM runs), same run, same GPU (run from the repository root).

    python benchmarks/bench_deepgemm_api.py [--json FILE] [--reps 5] [--kernel auto|generic|sm90_ws|sm90_bf16]
        [--quick] [--layouts contiguous,masked,k-grouped] [--timing events|graph]

Shapes: DeepGEMM's own grouped benchmarks (tests/test_core.py of deepseek-ai/DeepGEMM): contiguous (groups, rows per
group, n, k) = (4, 8192, 4096, 7168), (4, 8192, 7168, 2048), (8, 4096, 4096, 7168), (8, 4096, 7168, 2048); masked
(groups, max_m = expected_m, n, k) = (1, 1024, 4096, 7168), (2, 512, 7168, 2048), (4, 256, 4096, 7168), (16, 256, 7168,
2048) with every group full; k-grouped wgrad (groups, m, n, K per group) = (4, 4096, 7168, 8192), (4, 7168, 2048, 8192),
(8, 4096, 7168, 4096), (8, 7168, 2048, 4096), float32 out accumulated into ``d`` (the peer writes bf16: its only out
dtype). Timing: CUDA events around eager calls (both sides on the legacy stream), median of --reps; ``--timing graph``:
CUDA-graph replays on both sides (kernel time only). Columns: mxrt us / TFLOP/s, torch bf16 us, ratio (torch time / mxrt
time), calc_diff of mxrt's output against torch's (a sanity column). ``--kernel`` sets MXRT_GROUPED_GEMM_KERNEL
(``generic``: the portable kernel these calls ran on before session 16; ``--quick`` runs the first shape of each layout
only).
"""

from __future__ import annotations

import argparse
import os
import sys

import cupy
import numpy as np

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt.bench import core

CONTIGUOUS = [(4, 8192, 4096, 7168), (4, 8192, 7168, 2048), (8, 4096, 4096, 7168), (8, 4096, 7168, 2048)]
MASKED = [(1, 1024, 4096, 7168), (2, 512, 7168, 2048), (4, 256, 4096, 7168), (16, 256, 7168, 2048)]
#: k-grouped wgrad (groups, m, n, K per group): DeepGEMM's test_k_grouped_gemm_contiguous shapes
K_GROUPED = [(4, 4096, 7168, 8192), (4, 7168, 2048, 8192), (8, 4096, 7168, 4096), (8, 7168, 2048, 4096)]
E4M3_MAX = 448.0


RECIPE = "f32"


def _sf(amax: cupy.ndarray) -> cupy.ndarray:
    """amax / 448 (float32), or with ``--recipe ue8m0`` rounded up to a power of two (DeepGEMM's ceil_to_ue8m0)."""
    sf = (cupy.maximum(amax, 1e-4) / E4M3_MAX).astype(cupy.float32)
    return cupy.exp2(cupy.ceil(cupy.log2(sf))).astype(cupy.float32) if RECIPE == "ue8m0" else sf


def as_recipe(sf: cupy.ndarray) -> cupy.ndarray:
    """The scales as the call takes them: float32, or UE8M0 bytes (the exponents of the powers of two)."""
    return (sf.view(cupy.uint32) >> 23).astype(cupy.uint8) if RECIPE == "ue8m0" else sf


def cast_rows(x: cupy.ndarray) -> tuple[cupy.ndarray, cupy.ndarray]:
    """DeepGEMM's per_token_cast_to_fp8 on the device: ``x [..., mn, k]`` -> e4m3 codes, float32 scales per 1 x 128."""
    *lead, mn, k = x.shape
    blocks = x.reshape(*lead, mn, k // 128, 128)
    sf = _sf(cupy.abs(blocks).max(axis=-1))
    codes = _e4m3((blocks / sf[..., None]).reshape(x.shape))
    return codes, sf


def cast_blocks(w: cupy.ndarray) -> tuple[cupy.ndarray, cupy.ndarray]:
    """DeepGEMM's per_block_cast_to_fp8 on the device: ``w [G, n, k]`` -> codes, float32 scales per 128 x 128."""
    g, n, k = w.shape
    blocks = w.reshape(g, n // 128, 128, k // 128, 128)
    sf = _sf(cupy.abs(blocks).max(axis=(2, 4)))
    codes = _e4m3((blocks / sf[:, :, None, :, None]).reshape(w.shape))
    return codes, sf


def _e4m3(v: cupy.ndarray) -> cupy.ndarray:
    import torch

    return cupy.from_dlpack(torch.from_dlpack(v.astype(cupy.float32)).to(torch.float8_e4m3fn).view(torch.uint8))


def dequant(codes: cupy.ndarray, sf: cupy.ndarray, gmn: int):
    """bf16 torch tensor of ``codes * sf`` (the peer's operand)."""
    import torch

    v = torch.from_dlpack(codes).view(torch.float8_e4m3fn).float()
    s = torch.from_dlpack(sf).repeat_interleave(128, dim=-1)
    if gmn > 1:
        s = s.repeat_interleave(gmn, dim=-2)
    return (v * s).to(torch.bfloat16)


def run(layout: str, g: int, m: int, n: int, k: int, reps: int, rng: np.random.Generator) -> dict:
    import torch

    if layout == "k-grouped":
        return run_k_grouped(g, m, n, k, reps, rng)
    dev_rng = cupy.random.default_rng(int(rng.integers(1 << 30)))
    w = dev_rng.standard_normal((g, n, k), dtype=cupy.float32)
    cb, sb = cast_blocks(w)
    del w
    tb = dequant(cb, sb, 128)
    rows = g * m
    if layout == "contiguous":
        x = dev_rng.standard_normal((rows, k), dtype=cupy.float32)
        ca, sa = cast_rows(x)
        del x
        ids = cupy.asarray(np.repeat(np.arange(g, dtype=np.int32), m))
        d = cupy.empty((rows, n), cupy.uint16)
        offs = torch.arange(1, g + 1, device="cuda", dtype=torch.int32) * m
        ta = dequant(ca, sa, 1)

        ra, rb = as_recipe(sa), as_recipe(sb)

        def mx():
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous((ca, ra), (cb, rb), d, ids)

        def peer():
            return torch._grouped_mm(ta, tb.transpose(-2, -1), offs=offs)
    else:
        x = dev_rng.standard_normal((g, m, k), dtype=cupy.float32)
        ca, sa = cast_rows(x)
        del x
        mm = cupy.full(g, m, cupy.int32)
        d = cupy.empty((g, m, n), cupy.uint16)
        ta = dequant(ca, sa, 1)

        ra, rb = as_recipe(sa), as_recipe(sb)

        def mx():
            deep_gemm.m_grouped_fp8_gemm_nt_masked((ca, ra), (cb, rb), d, mm, m)

        def peer():
            return torch._grouped_mm(ta, tb.transpose(-2, -1))

    t_mx, t_pt = _time(mx, peer, reps)
    ref = peer().double().reshape(d.shape)
    got = torch.from_dlpack(d).view(torch.bfloat16).double()
    diff = float(1 - 2 * (got * ref).sum() / (got * got + ref * ref).sum())  # calc_diff, on the device
    flops = 2 * rows * n * k
    return {
        "layout": layout, "groups": g, "m": m, "n": n, "k": k,
        "mxrt_us": t_mx * 1e6, "mxrt_tflops": flops / t_mx / 1e12, "torch_bf16_us": t_pt * 1e6,
        "torch_tflops": flops / t_pt / 1e12, "speedup": t_pt / t_mx, "calc_diff": diff,
    }  # fmt: skip


def run_k_grouped(g: int, m: int, n: int, kg: int, reps: int, rng: np.random.Generator) -> dict:
    """``k_grouped_fp8_gemm_nt_contiguous`` (float32 out, ``c = d``: accumulate) against ``torch._grouped_mm`` bf16 on
    the dequantised ``[m, sum(ks)]`` x ``[sum(ks), n]`` with the groups' column offsets (bf16 out: its only dtype)."""
    import torch

    dev_rng = cupy.random.default_rng(int(rng.integers(1 << 30)))
    total = g * kg
    flat, sfs, cats = [], [], []
    for rows in (m, n):
        v = dev_rng.standard_normal((rows, total), dtype=cupy.float32)
        codes, sf = cast_rows(v)  # per 1 x 128 along K
        del v
        cats.append(dequant(codes, sf, 1))
        flat.append(cupy.concatenate([codes[:, i * kg : (i + 1) * kg].reshape(-1) for i in range(g)]))
        sfs.append(sf)
        del codes
    ks = [kg] * g
    ks_d = cupy.asarray(np.array(ks, np.int32))
    d = cupy.zeros((g, m, n), cupy.float32)
    offs = torch.arange(1, g + 1, device="cuda", dtype=torch.int32) * kg
    ta, tb = cats[0], cats[1].t()  # [m, total] row-major, [total, n] column-major (a view)

    def mx():
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((flat[0], sfs[0]), (flat[1], sfs[1]), d, ks, ks_d, c=d)

    def peer():
        return torch._grouped_mm(ta, tb, offs=offs)

    t_mx, t_pt = _time(mx, peer, reps)
    d.fill(0)
    mx()
    ref = peer().double()
    got = torch.from_dlpack(d).double()
    diff = float(1 - 2 * (got * ref).sum() / (got * got + ref * ref).sum())
    flops = 2 * m * n * total
    return {
        "layout": "k-grouped", "groups": g, "m": m, "n": n, "k": kg,
        "mxrt_us": t_mx * 1e6, "mxrt_tflops": flops / t_mx / 1e12, "torch_bf16_us": t_pt * 1e6,
        "torch_tflops": flops / t_pt / 1e12, "speedup": t_pt / t_mx, "calc_diff": diff,
    }  # fmt: skip


TIMING = "events"


def _time(mx, peer, reps: int) -> tuple[float, float]:
    """Seconds per call of mxrt's and the peer's: CUDA events around 5 eager calls on the legacy stream (median of
    ``reps``), or with ``--timing graph`` CUDA-graph replays on both sides (kernel time only: no host time)."""
    if TIMING == "graph":
        with mxrt.runtime.debug():  # real allocations inside the capture (the k-grouped route's workspaces)
            t_mx, how = core.time_cupy([mx], reps)
        t_pt, how_pt = core.time_torch([peer], reps)
        if how != "graph" or how_pt != "graph":
            print(f"    timing fell back to events (mxrt {how}, torch {how_pt})")
        return t_mx, t_pt
    mx()
    peer()
    cupy.cuda.Device().synchronize()
    t_mx = core.cupy_median_time(lambda: [mx() for _ in range(5)], reps) / 5
    t_pt = core.cupy_median_time(lambda: [peer() for _ in range(5)], reps) / 5
    return t_mx, t_pt


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--kernel", default="auto", choices=("auto", "generic", "sm90_ws", "sm90_bf16"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timing", default="events", choices=("events", "graph"))
    ap.add_argument("--recipe", default="f32", choices=("f32", "ue8m0"), help="contiguous / masked scales")
    ap.add_argument("--layouts", default="", help="comma-separated: contiguous, masked, k-grouped (default all)")
    args = ap.parse_args(argv)
    global TIMING, RECIPE
    TIMING, RECIPE = args.timing, args.recipe
    if args.kernel != "auto":
        os.environ["MXRT_GROUPED_GEMM_KERNEL"] = args.kernel
    rng = np.random.default_rng(0)
    rows = []
    cases = [("contiguous", s) for s in CONTIGUOUS[: 1 if args.quick else None]]
    cases += [("masked", s) for s in MASKED[: 1 if args.quick else None]]
    cases += [("k-grouped", s) for s in K_GROUPED[: 1 if args.quick else None]]
    if args.layouts:
        cases = [c for c in cases if c[0] in args.layouts.split(",")]
    print(f"device {core.device_name()}, kernel {args.kernel}, timing {args.timing}", flush=True)
    for layout, shape in cases:
        r = run(layout, *shape, args.reps, rng)
        rows.append(r)
        print(
            f"{layout:10s} G={r['groups']:2d} m={r['m']:5d} n={r['n']} k={r['k']}: mxrt {r['mxrt_us']:8.1f} us "
            f"({r['mxrt_tflops']:5.0f} TFLOP/s)  torch bf16 {r['torch_bf16_us']:8.1f} us ({r['torch_tflops']:5.0f})  "
            f"{r['speedup']:.2f}x  calc_diff {r['calc_diff']:.1e}",
            flush=True,
        )
        cupy.get_default_memory_pool().free_all_blocks()
    if args.json:
        core.write_json(args.json, {"device": core.device_name(), "kernel": args.kernel, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
