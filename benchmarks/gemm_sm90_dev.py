"""Development check + timing of the ``sm90_wgmma`` GEMM path on an H100 (run from the repository root).

A kernel-development diagnostic (tile variants, accuracy by K, ncu profile launches), not a suite of
``mxrt bench``: the numbers of record come from ``mxrt bench gemm``. Timing uses mxrt.bench.core.

    python benchmarks/gemm_sm90_dev.py [--quick] [--json OUT.json] [--sections check,accuracy,time]

check:    every format pair x out dtype x shape (aligned, odd, tiny, K tails) against the float64 reference of the
          dequantized inputs (fp32 out: relative Frobenius <= 1e-5; bf16/fp16: calc_diff <= 1e-5) and the
          unquantized inputs (calc_diff <= 1e-3 fp8, 2e-2 with an fp4 operand); poisoned outputs; 2 runs bitwise.
accuracy: relative error of fp32 output for growing K (how far the fp8 wgmma partials are from exact).
time:     kernel variants (STAGES, DBUF) and torch peers (cuBLAS bf16, cuBLAS fp8 per-tensor, dequantize MX ->
          bf16 + cuBLAS under torch.compile) at 8192^3 and the MoE shapes; CUDA events, median, 3 input sets.
"""

# ruff: noqa: B023  (the timed lambdas run inside the loop iteration that defines them)
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import traceback
from types import SimpleNamespace

import cupy
import ml_dtypes
import numpy as np

import mxrt
from mxrt.bench import core as bench_core
from mxrt.ops import gemm_sm90
from mxrt.ops.gemm_paths import DeviceGemm
from mxrt.problems import gemm_problem
from mxrt.reference import calc_diff, gemm_mx
from mxrt.runtime import get_arch

PAIRS = list(mxrt.GEMM_FORMAT_PAIRS)
OUTS = ["float32", "bfloat16", "float16"]
SHAPES = [(512, 512, 1024), (300, 200, 272), (1, 1, 32), (129, 257, 4080), (64, 1000, 160), (7, 130, 48)]
NP_OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
CP_OUT = {"float32": cupy.float32, "bfloat16": cupy.uint16, "float16": cupy.float16}
ARCH = get_arch()
LOG: dict = {
    "device": bench_core.device_name(),
    "check": [],
    "accuracy": [],
    "time": [],
}


def host_q(x: np.ndarray, fmt: str):
    return mxrt.quantize_mx(x, fmt, backend="numpy")


def device_gemm(p, qa, qb, out_dtype: str) -> DeviceGemm:
    out = cupy.empty((p.m, p.n), dtype=CP_OUT[out_dtype])
    return DeviceGemm(
        p, cupy.asarray(qa.data), cupy.asarray(qb.data), cupy.asarray(qa.scales), cupy.asarray(qb.scales), out, ARCH
    )


def to_f64(out: cupy.ndarray, out_dtype: str) -> np.ndarray:
    h = cupy.asnumpy(out)
    return (h.view(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else h).astype(np.float64)


def run_path(dg: DeviceGemm, **kw) -> np.ndarray:
    dg.out.view(cupy.uint8).fill(0xFF)  # poison: NaN in every out dtype
    gemm_sm90.run(dg, **kw)
    cupy.cuda.get_current_stream().synchronize()
    return to_f64(dg.out, str(dg.p.out_dtype))


def check(quick: bool, kw: dict) -> int:
    fails = 0
    rng = np.random.default_rng(1234)
    shapes = SHAPES[:3] if quick else SHAPES
    for m, n, k in shapes:
        xa = rng.standard_normal((m, k)).astype(np.float32)
        xb = rng.standard_normal((n, k)).astype(np.float32)
        x64 = xa.astype(np.float64) @ xb.astype(np.float64).T
        for fa, fb in PAIRS:
            qa, qb = host_q(xa, fa), host_q(xb, fb)
            ref = gemm_mx(qa, qb, out_dtype="float64")
            for od in OUTS:
                p = gemm_problem(qa, qb, out_dtype=od)
                dg = device_gemm(p, qa, qb, od)
                why = gemm_sm90.supports(dg)
                row = {"m": m, "n": n, "k": k, "a": fa, "b": fb, "out": od, "kw": kw}
                if why is not None:
                    row["declined"] = why
                    LOG["check"].append(row)
                    continue
                try:
                    got = run_path(dg, **kw)
                    again = run_path(dg, **kw)
                except Exception as exc:  # report and go on with the other cases
                    row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
                    LOG["check"].append(row)
                    fails += 1
                    print("ERROR", row, flush=True)
                    continue
                finite = bool(np.isfinite(got).all())
                denom = np.linalg.norm(ref)
                rel = float(np.linalg.norm(got - ref) / denom) if denom else float(np.abs(got).max())
                cd = calc_diff(got, ref)
                cdx = calc_diff(got, x64)
                # the issue's bars (1e-3 fp8, 2e-2 with fp4); e5m2's own quantization error is ~1.7e-3 and tiny
                # outputs are noisy, so a result as close as the float64 reference of the same codes also passes
                bar_x = max(2e-2 if "e2m1" in (fa, fb) else 1e-3, 1.05 * calc_diff(ref, x64))
                ok_ref = rel <= 1e-5 if od == "float32" else cd <= 1e-5
                ok = finite and ok_ref and cdx <= bar_x and np.array_equal(got, again, equal_nan=True)
                row.update(
                    rel=rel,
                    calc_diff=cd,
                    calc_diff_x=cdx,
                    finite=finite,
                    bitwise_rerun=bool(np.array_equal(got, again, equal_nan=True)),
                    ok=bool(ok),
                )
                LOG["check"].append(row)
                if not ok:
                    fails += 1
                    print("FAIL", row, flush=True)
    n_ok = sum(1 for r in LOG["check"] if r.get("ok"))
    n_dec = sum(1 for r in LOG["check"] if "declined" in r)
    print(f"check: {n_ok} ok, {fails} failed, {n_dec} declined of {len(LOG['check'])}", flush=True)
    return fails


def accuracy() -> None:
    """fp32 out relative error vs the float64 dequantized reference, by K (fp8 partial accuracy)."""
    rng = np.random.default_rng(7)
    for fa, fb in [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e2m1", "e2m1"), ("e4m3", "e2m1")]:
        for k in (32, 256, 2048, 8192):
            m = n = 256
            xa = rng.standard_normal((m, k)).astype(np.float32)
            xb = rng.standard_normal((n, k)).astype(np.float32)
            qa, qb = host_q(xa, fa), host_q(xb, fb)
            ref = gemm_mx(qa, qb, out_dtype="float64")
            p = gemm_problem(qa, qb, out_dtype="float32")
            got = run_path(device_gemm(p, qa, qb, "float32"))
            rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            # exact per-k32 partials accumulated in fp32 in the kernel's order: the error floor of the promotion
            A, B = mxrt.dequantize_mx(qa, np.float64), mxrt.dequantize_mx(qb, np.float64)
            acc = np.zeros((m, n), np.float32)
            for kb in range(0, k, 32):
                acc = (acc + (A[:, kb : kb + 32] @ B[:, kb : kb + 32].T).astype(np.float32)).astype(np.float32)
            rel_floor = float(np.linalg.norm(acc - ref) / np.linalg.norm(ref))
            row = {
                "a": fa,
                "b": fb,
                "m": m,
                "n": n,
                "k": k,
                "rel_fp32": rel,
                "rel_exact_partials_fp32": rel_floor,
                "max_abs": float(np.abs(got - ref).max()),
            }
            LOG["accuracy"].append(row)
            print("accuracy", row, flush=True)


# ---- timing -----------------------------------------------------------------------------------------------


def median_ms(fns, iters: int = 20, reps: int = 5) -> float:
    """Median per-call time in ms (CUDA events around ``reps`` back-to-back calls, so host launch overhead overlaps
    the GPU work, median of ``iters``; mxrt.bench.core), cycling through ``fns`` (one per input set)."""
    for f in fns:
        f()
    cupy.cuda.runtime.deviceSynchronize()
    turn = itertools.count()

    def run() -> None:
        for _ in range(reps):
            fns[next(turn) % len(fns)]()

    return bench_core.cupy_median_time(run, iters) / reps * 1e3


def gpu_inputs(m, n, k, fa, fb, sets, seed=0):
    out = []
    for i in range(sets):
        cupy.random.seed(seed + i)
        xa = cupy.random.standard_normal((m, k), dtype=cupy.float32).astype(cupy.float32)
        xb = cupy.random.standard_normal((n, k), dtype=cupy.float32).astype(cupy.float32)
        qa, qb = mxrt.quantize_mx(xa, fa), mxrt.quantize_mx(xb, fb)
        out.append((qa, qb))
        del xa, xb
    return out


def fake_problem(m, n, k, fa, fb, od):
    return SimpleNamespace(
        op="gemm_mx",
        m=m,
        n=n,
        k=k,
        a_fmt=fa,
        b_fmt=fb,
        out_dtype=np.dtype(NP_OUT[od]),
        split_k=1,
        a_scale_layout=None,
        b_scale_layout=None,
        is_empty=False,
        k_blocks=-(-k // 32),
    )


#: kernel variants timed: (label, run() keyword arguments); DIAG builds are inexact timing diagnostics
VARIANTS = [
    ("256x128 S4 (default)", {}),
    ("256x128 S3", {"stages": 3, "dbuf": 0, "bm": 256, "bn": 128}),
    ("128x256 S4", {"stages": 4, "dbuf": 0, "bm": 128, "bn": 256}),
    ("128x128 S6 D1 (v1)", {"stages": 6, "dbuf": 1, "bm": 128, "bn": 128}),
    ("192x128 S4 D0", {"stages": 4, "dbuf": 0, "bm": 192, "bn": 128}),
    ("256x128 S4 (default, again)", {}),
]


def time_shapes(quick: bool, peers: bool = True) -> None:
    import torch

    shapes = [(8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
    variants = VARIANTS
    if quick:
        shapes, variants = shapes[:2], variants
    for m, n, k in shapes:
        flop = 2.0 * m * n * k
        fmt_pairs = [("e4m3", "e4m3")] + ([("e2m1", "e2m1")] if (m, n, k) == (8192, 8192, 8192) else [])
        for fa, fb in fmt_pairs:
            sets = gpu_inputs(m, n, k, fa, fb, 3)
            p = fake_problem(m, n, k, fa, fb, "bfloat16")
            dgs = [
                DeviceGemm(p, qa.data, qb.data, qa.scales, qb.scales, cupy.empty((m, n), cupy.uint16), ARCH)
                for qa, qb in sets
            ]
            for label, kw in variants if fa == "e4m3" else variants[:1]:
                try:
                    ms = median_ms([lambda d=d: gemm_sm90.run(d, **kw) for d in dgs])
                    row = {
                        "shape": [m, n, k],
                        "fmt": f"{fa}x{fb}",
                        "impl": f"mxrt sm90 {label}",
                        "ms": ms,
                        "tflops": flop / ms / 1e9,
                    }
                except Exception as exc:
                    row = {
                        "shape": [m, n, k],
                        "fmt": f"{fa}x{fb}",
                        "impl": f"mxrt sm90 {label}",
                        "error": f"{type(exc).__name__}: {exc}"[:1500],
                    }
                LOG["time"].append(row)
                print("time", row, flush=True)
            if peers and fa == fb == "e4m3":
                time_peers(torch, sets, m, n, k, flop)
            del dgs, sets
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()


def time_peers(torch, sets, m, n, k, flop) -> None:
    """Compiled dequantize MX -> bf16 + cuBLAS bf16 on the same quantized inputs; cuBLAS bf16 and fp8."""

    def deq(q, s, rows):
        v = q.view(torch.float8_e4m3fn).to(torch.bfloat16).view(rows, k // 32, 32)
        f = torch.exp2(s.to(torch.float32) - 127.0).to(torch.bfloat16)
        return (v * f[..., None]).view(rows, k)

    def deq_mm(qa, sa, qb, sb):
        return deq(qa, sa, m) @ deq(qb, sb, n).T

    cdeq = torch.compile(deq_mm)
    tsets = [
        (
            torch.from_dlpack(qa.data),
            torch.from_dlpack(qa.scales),
            torch.from_dlpack(qb.data),
            torch.from_dlpack(qb.scales),
        )
        for qa, qb in sets
    ]
    try:
        t0 = time.time()
        cdeq(*tsets[0])
        torch.cuda.synchronize()
        ms = median_ms([lambda t=t: cdeq(*t) for t in tsets])
        row = {
            "shape": [m, n, k],
            "fmt": "e4m3xe4m3",
            "impl": "dequant->bf16 + cuBLAS (torch.compile)",
            "ms": ms,
            "tflops": flop / ms / 1e9,
            "compile_s": time.time() - t0,
        }
    except Exception as exc:
        row = {"shape": [m, n, k], "impl": "dequant+cuBLAS compiled", "error": str(exc)[:1500]}
    LOG["time"].append(row)
    print("time", row, flush=True)
    a16 = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    b16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    ms = median_ms([lambda i=i: a16[i] @ b16[i].T for i in range(3)])
    row = {"shape": [m, n, k], "impl": "cuBLAS bf16 torch.matmul", "ms": ms, "tflops": flop / ms / 1e9}
    LOG["time"].append(row)
    print("time", row, flush=True)
    a8 = [x.to(torch.float8_e4m3fn) for x in a16]
    b8 = [x.to(torch.float8_e4m3fn) for x in b16]
    one = torch.tensor(1.0, device="cuda")
    ms = median_ms(
        [
            lambda i=i: torch._scaled_mm(a8[i], b8[i].T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            for i in range(3)
        ]
    )
    row = {"shape": [m, n, k], "impl": "cuBLAS fp8 per-tensor torch._scaled_mm", "ms": ms, "tflops": flop / ms / 1e9}
    LOG["time"].append(row)
    print("time", row, flush=True)


def profile() -> None:
    """One launch of each profiled build at 4096^3 (run under ncu -k regex:gemm_mx_sm90)."""
    m = n = k = 4096
    ((qa, qb),) = gpu_inputs(m, n, k, "e4m3", "e4m3", 1)
    p = fake_problem(m, n, k, "e4m3", "e4m3", "bfloat16")
    dg = DeviceGemm(p, qa.data, qb.data, qa.scales, qb.scales, cupy.empty((m, n), cupy.uint16), ARCH)
    for _label, kw in (VARIANTS[0], VARIANTS[1]):
        gemm_sm90.run(dg, **kw)
        cupy.cuda.runtime.deviceSynchronize()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="two small shapes, for compute-sanitizer")
    ap.add_argument("--no-peers", action="store_true", help="time the mxrt variants only")
    ap.add_argument("--check-kw", default="{}", help='run() keywords for the check, e.g. {"bm": 192, "stages": 4}')
    ap.add_argument("--json", default="")
    ap.add_argument("--sections", default="check,accuracy,time")
    args = ap.parse_args()
    fails = 0
    if args.tiny:
        SHAPES[:] = [(300, 200, 272), (7, 130, 48)]
        PAIRS[:] = [("e4m3", "e4m3"), ("e2m1", "e4m3")]
        OUTS[:] = ["bfloat16", "float32"]
    for name in args.sections.split(","):
        t0 = time.time()
        try:
            if name == "check":
                fails += check(args.quick, json.loads(args.check_kw))
            elif name == "accuracy":
                accuracy()
            elif name == "time":
                time_shapes(args.quick, peers=not args.no_peers)
            elif name == "profile":
                profile()
        except Exception:
            traceback.print_exc()
            fails += 1
        print(f"section {name}: {time.time() - t0:.1f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(LOG, f, indent=1)
    print("SUMMARY")
    for r in LOG["time"]:
        print(
            f"  {r['shape']!s:20s} {r.get('fmt', ''):10s} {r['impl']:45s} "
            + (f"{r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s" if "ms" in r else r.get("error", "")[:200])
        )
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
