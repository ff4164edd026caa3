"""Development check + timing of the issue-10 bf16 route ``gemm_mx_sm90_bf16`` on an H100 / H200 (repository root).

    python benchmarks/gemm_sm90_bf16_dev.py [--sections check,time] [--json OUT.json] [--quick] [--rings 5]

check: against the float64 reference of the dequantised inputs (bf16 / fp16 out calc_diff <= 1e-5, fp32 out relative
       Frobenius <= 1e-5), poisoned outputs, aligned / edge / K-tail shapes, more tiles than CTAs, every fp8 format
       pair and out dtype, scales spread over the kernel's window (e4m3 [10, 134], e5m2 [17, 142]) plus NaN-scale
       blocks, e4m3 subnormal codes, two runs bitwise.
time:  8192^3 and the MoE shapes (M = 4096; N, K = 4096, 7168 / 7168, 2048 / 5760, 2880), e4m3 x e4m3, bf16 out: the
       bf16 route, sm90_ws (today's default), and in the same run cuBLAS bf16 on bf16 inputs and the compiled
       dequantize + cuBLAS peer of ``mxrt bench gemm``. CUDA events, median of 20 x 5 calls over 3 input sets.
"""

# ruff: noqa: B023
from __future__ import annotations

import argparse
import itertools
import json
import sys
import traceback
from pathlib import Path

import cupy
import numpy as np

import mxrt
from mxrt.bench import core as bench_core
from mxrt.ops import gemm_generic, gemm_sm90_bf16, gemm_sm90_ws
from mxrt.ops.gemm_paths import DeviceGemm
from mxrt.reference import calc_diff, gemm_mx, relative_error
from mxrt.runtime import get_arch

sys.path.insert(0, str(Path(__file__).parent))
from gemm_sm90_ws_dev import CP_OUT, NP_OUT, median_ms, operands, problem, to_f64

ARCH = get_arch()
LOG: dict = {"device": bench_core.device_name(), "check": [], "time": []}
WINDOW = {"e4m3": (10, 134), "e5m2": (17, 142)}
REGS = (88, 72)
DIAGS: tuple[int, ...] = ()


def run_bf16(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, ring):
    p = problem(m, n, k, fa, fb, od)
    out = cupy.empty((m, n), CP_OUT[od])
    out.view(cupy.uint8).fill(0xFF)  # poison: NaN in every out dtype
    dg = DeviceGemm(p, cupy.asarray(codes_a), cupy.asarray(codes_b), cupy.asarray(sa), cupy.asarray(sb), out, ARCH)
    gemm_sm90_bf16.run(dg, ring=ring)
    cupy.cuda.runtime.deviceSynchronize()
    return to_f64(out, od)


def check_one(name, codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, ring):
    want = gemm_mx((codes_a, sa, fa, k), (codes_b, sb, fb, k), out_dtype="float64")
    got = run_bf16(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, ring)
    nan_w = np.isnan(want)
    nan_ok = bool((np.isnan(got) == nan_w).all())
    ok = ~nan_w
    with np.errstate(over="ignore"):
        want_od = want.astype(NP_OUT[od]).astype(np.float64)
    fin = bool((np.isfinite(got[ok]) == np.isfinite(want_od[ok])).all())
    ok &= np.isfinite(want_od)
    err = relative_error(want[ok], got[ok]) if od == "float32" else calc_diff(got[ok], want[ok])
    again = run_bf16(codes_a, sa, codes_b, sb, m, n, k, fa, fb, od, ring)
    bitwise = bool(np.array_equal(got, again, equal_nan=True))
    passed = nan_ok and fin and err <= 1e-5 and bitwise
    row = {"name": name, "shape": [m, n, k], "fmt": f"{fa}x{fb}", "out": od, "ring": ring, "err": float(err),
           "nan_ok": nan_ok, "finite": fin, "bitwise": bitwise, "pass": passed}  # fmt: skip
    LOG["check"].append(row)
    print("check", row, flush=True)
    return passed


def window_scales(shape, fmt, rng):
    lo, hi = WINDOW[fmt]
    return rng.integers(lo, hi + 1, shape).astype(np.uint8)


def check(quick: bool, ring: int) -> int:
    fails = 0
    shapes = [(512, 512, 1024), (300, 200, 272), (129, 257, 4080), (7, 130, 48), (1000, 1000, 2880), (2304, 2048, 512)]
    cases = [(s, "e4m3", "e4m3", od) for s in shapes for od in ("bfloat16", "float32")]
    if not quick:
        cases += [((300, 200, 272), "e5m2", "e4m3", "float16"), ((129, 257, 4080), "e4m3", "e5m2", "bfloat16")]
        cases += [((520, 384, 1056), "e5m2", "e5m2", "float32"), ((4096, 1024, 7168), "e4m3", "e4m3", "float32")]
    for i, ((m, n, k), fa, fb, od) in enumerate(cases):
        qa, qb = operands(m, n, k, fa, fb, 100 + i)
        fails += not check_one("random", qa.data, qa.scales, qb.data, qb.scales, m, n, k, fa, fb, od, ring)
    # scales over the whole window (true products far from 1), NaN-scale blocks, zero blocks
    for j, (fa, fb, od) in enumerate((("e4m3", "e4m3", "bfloat16"), ("e4m3", "e4m3", "float32"),
                                      ("e5m2", "e4m3", "float32"), ("e4m3", "e5m2", "float16"))):  # fmt: skip
        m, n, k = 300, 260, 512
        rng = np.random.default_rng(9 + j)
        qa, qb = operands(m, n, k, fa, fb, 9 + j)
        sa = window_scales(qa.scales.shape, fa, rng)
        sb = window_scales(qb.scales.shape, fb, rng)
        # keep products finite in the out dtype: pair high A scales with low B scales per block column
        sb = (WINDOW[fb][0] + WINDOW[fb][1] - sb.astype(np.int64)).astype(np.uint8) if j % 2 else sb
        sa[200, 7], sb[17, 2] = 255, 255
        ac = qa.data.copy()
        ac[:, 128:160] = 0
        fails += not check_one("window scales", ac, sa, qb.data, sb, m, n, k, fa, fb, od, ring)
    # e4m3 subnormal codes (0x01..0x07, 0x81..0x87) at the window's low edge
    m, n, k = 256, 128, 256
    rng = np.random.default_rng(5)
    ac = rng.integers(0, 8, (m, k)).astype(np.uint8) | (rng.integers(0, 2, (m, k)) * 128).astype(np.uint8)
    bc = rng.integers(0, 127, (n, k)).astype(np.uint8)
    sa = np.full((m, k // 32), 10, np.uint8)
    sb = np.full((n, k // 32), 250 - 127, np.uint8)
    fails += not check_one("subnormal codes", ac, sa, bc, sb, m, n, k, "e4m3", "e4m3", "float32", ring)
    print(f"check: {fails} failures", flush=True)
    return fails


def record(shape, impl, ms, flop, **extra):
    row = {"shape": list(shape), "impl": impl, "ms": ms, "tflops": flop / ms / 1e9, **extra}
    LOG["time"].append(row)
    print("time", row, flush=True)


def time_shapes(quick: bool, rings: tuple[int, ...]) -> None:
    import torch

    from mxrt.bench.gemm_peers import code_lut, dequant_gemm, scale_lut, torch_dequant

    compiled = torch.compile(dequant_gemm, dynamic=False)
    clut = torch.tensor(code_lut("e4m3"), device="cuda")
    slut = torch.tensor(scale_lut(), device="cuda")
    shapes = [(8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
    for m, n, k in shapes[:1] if quick else shapes:
        flop = 2.0 * m * n * k
        sets = []
        for i in range(3):
            cupy.random.seed(i)
            xa = cupy.random.standard_normal((m, k), dtype=cupy.float32)
            xb = cupy.random.standard_normal((n, k), dtype=cupy.float32)
            sets.append((mxrt.quantize_mx(xa, "e4m3"), mxrt.quantize_mx(xb, "e4m3")))
            del xa, xb
        gate = cupy.zeros(1, cupy.uint32)
        for od in ("bfloat16", "float32"):
            p = problem(m, n, k, "e4m3", "e4m3", od)
            dgs = [DeviceGemm(p, a.data, b.data, a.scales, b.scales, cupy.empty((m, n), CP_OUT[od]), ARCH)
                   for a, b in sets]  # fmt: skip
            for r, pr in itertools.product(rings, REGS if od == "bfloat16" else REGS[:1]):
                fns = [lambda d=d: gemm_sm90_bf16.run(d, gate=gate, ring=r, regs=pr) for d in dgs]
                record((m, n, k), f"bf16 route R{r} P{pr} out {od}", median_ms(fns), flop)
            if od == "bfloat16" and DIAGS:
                for dg_mode in DIAGS:  # timing diagnostics (inexact): 1 no B conversion, 2 no A conversion, 3 neither
                    fns = [lambda d=d: gemm_sm90_bf16.run(d, gate=gate, ring=rings[0], diag=dg_mode) for d in dgs]
                    record((m, n, k), f"bf16 route R{rings[0]} diag {dg_mode} (inexact)", median_ms(fns), flop)
            if od == "float32" and m * n * k <= 8192**3:
                # what fp32 out with fp8 operands ran on before the bf16 route (both sm90 fp8 paths decline it)
                record((m, n, k), "generic (fp32 out before)", median_ms([lambda d=d: gemm_generic.run(d) for d in dgs],
                       iters=3, reps=1), flop)  # fmt: skip
                fns = [lambda d=d: gemm_sm90_bf16.run(d, ring=rings[0]) for d in dgs]
                record((m, n, k), f"bf16 route R{rings[0]} with the window check", median_ms(fns), flop)
            if od == "bfloat16":
                record((m, n, k), "sm90_ws (default)", median_ms([lambda d=d: gemm_sm90_ws.run(d) for d in dgs]), flop)
        tsets = [tuple(torch.from_dlpack(x) for x in (a.data, a.scales, b.data, b.scales)) for a, b in sets]
        record((m, n, k), "deq+cuBLAS compiled", median_ms(
            [lambda t=t: compiled(*t, k, "e4m3", clut, slut) for t in tsets]), flop)  # fmt: skip
        a16 = [torch_dequant(t[0], t[1], k, "e4m3", clut, slut) for t in tsets]
        b16 = [torch_dequant(t[2], t[3], k, "e4m3", clut, slut) for t in tsets]
        record((m, n, k), "cuBLAS bf16 (inputs already bf16)", median_ms(
            [lambda i=i: a16[i] @ b16[i].T for i in range(3)]), flop)  # fmt: skip
        dgs = sets = tsets = a16 = b16 = None
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()


def prof(rings: tuple[int, ...]) -> None:
    """Per-role clock64 intervals (BF_PROF=1) of one call at 8192^3: cycles per CTA and per stage."""
    m = n = k = 8192
    cupy.random.seed(0)
    a = mxrt.quantize_mx(cupy.random.standard_normal((m, k), dtype=cupy.float32), "e4m3")
    b = mxrt.quantize_mx(cupy.random.standard_normal((n, k), dtype=cupy.float32), "e4m3")
    p = problem(m, n, k, "e4m3", "e4m3", "bfloat16")
    dg = DeviceGemm(p, a.data, b.data, a.scales, b.scales, cupy.empty((m, n), cupy.uint16), ARCH)
    names = ["", "tma wait empty", "tma total", "conv wait full", "conv convert", "conv total"]
    names += ["cons wait full+conv", "cons wg_wait", "cons convert+issue", "cons epilogue", "cons total"]
    names += ["conv loop top", "conv load issue"]
    for r in rings:
        for diag in (0, 2):
            gate = cupy.zeros(64, cupy.uint32)
            gemm_sm90_bf16.run(dg, gate=gate, ring=r, prof=1, diag=diag)
            cupy.cuda.runtime.deviceSynchronize()
            v = cupy.asnumpy(gate.view(cupy.uint64))
            ctas = min(ARCH.num_cus, 32 * 64)
            stages = 2048 * 128 / ctas
            row = {names[i]: float(v[i]) / ctas / stages for i in range(1, 13)}
            LOG.setdefault("prof", []).append({"ring": r, "diag": diag, "cycles_per_stage": row})
            print("prof", r, diag, {kk: round(vv, 1) for kk, vv in row.items()}, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="check,time")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rings", default="4")
    ap.add_argument("--regs", default="88,72")
    ap.add_argument("--diags", default="", help="timing diagnostics BF_DIAG to time beside (e.g. 1,2,3)")
    args = ap.parse_args()
    rings = tuple(int(s) for s in args.rings.split(","))
    global REGS, DIAGS
    REGS = tuple(int(s) for s in args.regs.split(","))
    DIAGS = tuple(int(s) for s in args.diags.split(",") if s)
    fails = 0
    for sec in args.sections.split(","):
        try:
            if sec == "check":
                fails += check(args.quick, rings[0])
            elif sec == "prof":
                prof(rings)
            elif sec == "time":
                time_shapes(args.quick, rings)
        except Exception:
            traceback.print_exc()
            fails += 1
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(LOG, fh, indent=1)
    print("\n== summary ==")
    for r in LOG["time"]:
        if "tflops" in r:
            print(f"{r['shape']!s:22s} {r['impl']:40s} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s")
    print(f"check failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
