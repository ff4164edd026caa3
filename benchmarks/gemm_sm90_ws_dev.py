"""Development check + timing of the issue-10 engine skeleton ``gemm_mx_sm90_ws`` on an H100 (repository root).

    python benchmarks/gemm_sm90_ws_dev.py [--sections check,time] [--json OUT.json] [--quick]

check: the exact build (diag 0) against the float64 reference of the dequantized inputs (16-bit out: calc_diff
       <= 1e-5; fp32 out reported, not gated: fp8 partials), poisoned outputs, aligned / edge / K-tail shapes, more
       tiles than CTAs (persistent walk), extreme scale pairs over the whole E8M0 range, NaN scale blocks, two runs
       bitwise; the inexact diag 1 build only for finiteness and a loose error (it is a timing diagnostic).
time:  8192^3 and the MoE shapes (M=4096; N,K = 4096,7168 / 7168,2048 / 5760,2880), e4m3 x e4m3, bf16 out: the
       skeleton diag 1 (inexact, the gate: >= 1000 TFLOP/s), the exact skeleton, today's sm90_wgmma, and the
       torch peers in the same run (cuBLAS bf16 on bf16 inputs; dequantize MX -> bf16 eagerly + cuBLAS).
       CUDA events, median of 20 x 5 back-to-back calls cycling 3 input sets (METHOD.md).
"""

# ruff: noqa: B023
from __future__ import annotations

import argparse
import itertools
import json
import sys
import traceback
from types import SimpleNamespace

import cupy
import ml_dtypes
import numpy as np

import mxrt
from mxrt.bench import core as bench_core
from mxrt.ops import gemm_sm90, gemm_sm90_ws
from mxrt.ops.gemm_paths import DeviceGemm
from mxrt.reference import calc_diff, gemm_mx, relative_error
from mxrt.runtime import get_arch

ARCH = get_arch()
NP_OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
CP_OUT = {"float32": cupy.float32, "bfloat16": cupy.uint16, "float16": cupy.float16}
LOG: dict = {"device": bench_core.device_name(), "check": [], "time": []}


def problem(m, n, k, fa, fb, od):
    return SimpleNamespace(
        op="gemm_mx", m=m, n=n, k=k, a_fmt=fa, b_fmt=fb, out_dtype=np.dtype(NP_OUT[od]), split_k=1,
        a_scale_layout=None, b_scale_layout=None, is_empty=m == 0 or n == 0, k_blocks=-(-k // 32),
    )  # fmt: skip


def to_f64(out, od):
    h = cupy.asnumpy(out)
    return (h.view(ml_dtypes.bfloat16) if od == "bfloat16" else h).astype(np.float64)


def run_ws(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, diag=0, split=1):
    p = problem(m, n, k, fa, fb, od)
    out = cupy.empty((m, n), CP_OUT[od])
    out.view(cupy.uint8).fill(0xFF)  # poison: NaN in every out dtype
    dg = DeviceGemm(p, cupy.asarray(codes_a), cupy.asarray(codes_b), cupy.asarray(sa), cupy.asarray(sb), out, ARCH)
    gemm_sm90_ws.run(dg, diag=diag, split=split)
    cupy.cuda.runtime.deviceSynchronize()
    return to_f64(out, od)


def check_one(name, codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, diag=0, bar=1e-5):
    want = gemm_mx((codes_a, sa, fa, k), (codes_b, sb, fb, k), out_dtype="float64")
    return all(
        check_split(name, codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, want, diag, bar, split)
        for split in ((0,) if diag else (0, 1))
    )


def check_split(name, codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, want, diag, bar, split):
    got = run_ws(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, diag, split)
    nan_w = np.isnan(want)
    nan_ok = bool((np.isnan(got) == nan_w).all())
    ok = ~nan_w
    with np.errstate(over="ignore"):
        want_od = want.astype(NP_OUT[od]).astype(np.float64)  # overflow in the out dtype is the reference's too
    fin = bool((np.isfinite(got[ok]) == np.isfinite(want_od[ok])).all())
    ok &= np.isfinite(want_od)
    err = relative_error(want[ok], got[ok]) if od == "float32" else calc_diff(got[ok], want[ok])
    again = run_ws(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, diag, split)
    bitwise = bool(np.array_equal(got, again, equal_nan=True))
    passed = nan_ok and fin and err <= bar and bitwise
    row = {"name": name, "shape": [m, n, k], "fmt": f"{fa}x{fb}", "out": od, "diag": diag, "split": split,
           "err": float(err), "nan_ok": nan_ok, "finite": fin, "bitwise": bitwise, "pass": passed}  # fmt: skip
    LOG["check"].append(row)
    print("check", row, flush=True)
    return passed


def operands(m, n, k, fa, fb, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-6, 7, (m, 1)))
    w = rng.standard_normal((n, k)) * np.exp2(rng.integers(-6, 7, (n, 1)))
    return mxrt.quantize_mx(x, fa), mxrt.quantize_mx(w, fb)


def extreme_pairs(m, n, k, rng, off):
    kb = -(-k // 32)
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - off - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254 - off
    sa[:, -1], sb[:, -1] = 254 - off, 0
    return sa, sb


def check(quick: bool) -> int:
    fails = 0
    shapes = [(512, 512, 1024), (300, 200, 272), (129, 257, 4080), (7, 130, 48), (1000, 1000, 2880), (2304, 2048, 512)]
    cases = [(s, "e4m3", "e4m3", "bfloat16") for s in shapes]
    if not quick:
        cases += [((300, 200, 272), "e5m2", "e4m3", "float16"), ((129, 257, 4080), "e4m3", "e5m2", "bfloat16"),
                  ((512, 384, 1024), "e4m3", "e4m3", "float32")]  # fmt: skip
    for i, ((m, n, k), fa, fb, od) in enumerate(cases):
        qa, qb = operands(m, n, k, fa, fb, 100 + i)
        bar = 1e-5 if od != "float32" else 1e-4  # fp32 out: fp8 partials, reported (sm90 declines fp32 out)
        fails += not check_one("random", qa.data, qa.scales, qb.data, qb.scales, m, n, k, fa, fb, od, bar=bar)
    # diag 1 (inexact): only finite and loosely near the reference on uniform-scale data
    m, n, k = 512, 512, 1024
    qa, qb = operands(m, n, k, "e4m3", "e4m3", 7)
    sa1, sb1 = np.full_like(qa.scales, 127), np.full_like(qb.scales, 120)
    fails += not check_one("diag1 uniform", qa.data, sa1, qb.data, sb1, m, n, k, "e4m3", "e4m3", "bfloat16", diag=1)
    # extreme pairs over the whole E8M0 range (true factors near 2^0), a zero-code block at scale 254 / 254
    for od, off in (("bfloat16", 0), ("float16", 36)):
        m, n, k = 150, 136, 320
        rng = np.random.default_rng(21)
        qa, qb = operands(m, n, k, "e4m3", "e4m3", 21)
        sa, sb = extreme_pairs(m, n, k, rng, off)
        ac = qa.data.copy()
        sa[:, 4], sb[:, 4] = 254, 254
        ac[:, 128:160] = 0
        fails += not check_one("extreme pairs", ac, sa, qb.data, sb, m, n, k, "e4m3", "e4m3", od)
    # NaN blocks, wide stages beside fast ones (several tiles)
    m, n, k = 300, 260, 512
    rng = np.random.default_rng(9)
    qa, qb = operands(m, n, k, "e4m3", "e4m3", 9)
    sa = rng.integers(112, 140, qa.scales.shape).astype(np.uint8)
    sb = rng.integers(112, 140, qb.scales.shape).astype(np.uint8)
    sa[:64, 3], sa[64:, 3], sb[:, 3] = 40, 64, 190
    sa[200, 7], sb[17, 2] = 255, 255
    fails += not check_one("nan blocks", qa.data, sa, qb.data, sb, m, n, k, "e4m3", "e4m3", "bfloat16")
    print(f"check: {fails} failures", flush=True)
    return fails


def median_ms(fns, iters=20, reps=5):
    for f in fns:
        f()
    cupy.cuda.runtime.deviceSynchronize()
    turn = itertools.count()

    def run():
        for _ in range(reps):
            fns[next(turn) % len(fns)]()

    return bench_core.cupy_median_time(run, iters) / reps * 1e3


def gpu_sets(m, n, k, sets=3):
    out = []
    for i in range(sets):
        cupy.random.seed(i)
        xa = cupy.random.standard_normal((m, k), dtype=cupy.float32)
        xb = cupy.random.standard_normal((n, k), dtype=cupy.float32)
        out.append((mxrt.quantize_mx(xa, "e4m3"), mxrt.quantize_mx(xb, "e4m3")))
        del xa, xb
    return out


def record(shape, impl, ms, flop, **extra):
    row = {"shape": list(shape), "impl": impl, "ms": ms, "tflops": flop / ms / 1e9, **extra}
    LOG["time"].append(row)
    print("time", row, flush=True)


def time_shapes(quick: bool, stages: tuple[int, ...] = (4,)) -> None:
    import torch

    shapes = [(8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
    for m, n, k in shapes[:1] if quick else shapes:
        flop = 2.0 * m * n * k
        sets = gpu_sets(m, n, k)
        p = problem(m, n, k, "e4m3", "e4m3", "bfloat16")
        dgs = [
            DeviceGemm(p, a.data, b.data, a.scales, b.scales, cupy.empty((m, n), cupy.uint16), ARCH) for a, b in sets
        ]
        variants = [(f"ws diag1 S{s} (inexact)", lambda d, s=s: gemm_sm90_ws.run(d, diag=1, stages=s)) for s in stages]
        variants += [(f"ws exact rows S{s}", lambda d, s=s: gemm_sm90_ws.run(d, stages=s, split=0)) for s in stages]
        variants += [(f"ws exact cols S{s}", lambda d, s=s: gemm_sm90_ws.run(d, stages=s, split=1)) for s in stages]
        variants += [("sm90_wgmma (today)", lambda d: gemm_sm90.run(d))]
        for label, fn in variants:
            try:
                record((m, n, k), label, median_ms([lambda d=d: fn(d) for d in dgs]), flop)
            except Exception as exc:
                LOG["time"].append({"shape": [m, n, k], "impl": label, "error": f"{type(exc).__name__}: {exc}"[:800]})
                print("time error", label, exc, flush=True)
        tsets = [tuple(torch.from_dlpack(x) for x in (a.data, a.scales, b.data, b.scales)) for a, b in sets]

        def deq(q, s, rows):
            v = q.view(torch.float8_e4m3fn).to(torch.bfloat16).view(rows, k // 32, 32)
            return (v * torch.exp2(s.to(torch.float32) - 127.0).to(torch.bfloat16)[..., None]).view(rows, k)

        record((m, n, k), "dequant->bf16 (eager) + cuBLAS", median_ms(
            [lambda t=t: deq(t[0], t[1], m) @ deq(t[2], t[3], n).T for t in tsets]), flop)  # fmt: skip
        a16 = [deq(t[0], t[1], m) for t in tsets]
        b16 = [deq(t[2], t[3], n) for t in tsets]
        record((m, n, k), "cuBLAS bf16 (inputs already bf16)", median_ms(
            [lambda i=i: a16[i] @ b16[i].T for i in range(3)]), flop)  # fmt: skip
        dgs = sets = tsets = a16 = b16 = None
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()


def skeleton() -> None:
    """Where the skeleton's time goes: the k128 diagnostic with its parts removed (WS_MODE 2: no promotion, 3: no
    wgmma, 4: no scale warps either), beside the exact build, at 8192^3 and the K = 2880 MoE shape."""
    for m, n, k in [(8192, 8192, 8192), (4096, 5760, 2880)]:
        flop = 2.0 * m * n * k
        sets = gpu_sets(m, n, k)
        p = problem(m, n, k, "e4m3", "e4m3", "bfloat16")
        dgs = [
            DeviceGemm(p, a.data, b.data, a.scales, b.scales, cupy.empty((m, n), cupy.uint16), ARCH) for a, b in sets
        ]
        variants = [(f"ws diag1 mode {md} S4", {"diag": 1, "mode": md}) for md in (0, 2, 3, 4)]
        variants += [(f"ws diag1 mode 3 S{st}", {"diag": 1, "mode": 3, "stages": st}) for st in (5, 6)]
        variants += [(f"ws diag1 mode 0 S{st}", {"diag": 1, "stages": st}) for st in (5, 6)]
        variants += [(f"ws exact rows S{st}", {"split": 0, "stages": st}) for st in (4, 5, 6)]
        for label, kw in variants:
            record((m, n, k), label, median_ms([lambda d=d: gemm_sm90_ws.run(d, **kw) for d in dgs]), flop)
        dgs = sets = None
        cupy.get_default_memory_pool().free_all_blocks()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="check,time")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--stages", default="4")
    args = ap.parse_args()
    fails = 0
    for sec in args.sections.split(","):
        try:
            if sec == "check":
                fails += check(args.quick)
            elif sec == "skeleton":
                skeleton()
            elif sec == "time":
                time_shapes(args.quick, tuple(int(s) for s in args.stages.split(",")))
        except Exception:
            traceback.print_exc()
            fails += 1
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(LOG, fh, indent=1)
    print("\n== summary ==")
    for r in LOG["time"]:
        if "tflops" in r:
            print(f"{'x'.join(map(str, r['shape'])):>18}  {r['impl']:<36} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s")
    print(f"check failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
