"""Grouped MX GEMM timing on a GPU: mxrt's grouped kernels (forward, dgrad, variable-K wgrad; the kernel ``auto``
picks on sm_90a: the torch route for bfloat16 out with torch present, the grouped engine gemm_mx_grouped_sm90_ws for
fwd / dgrad, the sm90_bf16 wgrad route for the float32 wgrad) against ``torch._grouped_mm`` in bfloat16, on the MoE
shapes of Primus-Turbo PR #330 (run from the repository root).

    python benchmarks/bench_grouped_gemm.py [--json FILE] [--budget-s 200] [--reps 3] [--shapes deepseek,gpt-oss]
        [--passes fwd,dgrad,wgrad] [--kernel auto|torch|generic|sm90|sm90_ws|sm90_wgmma]
        [--wgrad-out bfloat16|float32] [--fwd-out bfloat16|float32] [--wgrad-bn 128|256]
        [--timing events|graph] [--with-quant]

``--kernel`` sets MXRT_GROUPED_GEMM_KERNEL (``generic``: the portable kernel, for A/B against the native one; on
sm_90a ``torch``: the torch route alone (exact dequantisation + ``torch._grouped_mm``, auto's choice for bfloat16
out), ``sm90_ws`` / ``sm90_wgmma``: the grouped engine / the older Hopper kernel alone, for their A/B with
``--passes fwd,dgrad``, as the wgrad runs on the older kernel only). ``--timing``: ``events`` (default: eager calls on
both sides, as the torch route cannot be captured) or ``graph`` (CUDA-graph replays; the route steps aside).
``--wgrad-out``: the wgrad's out dtype (default bfloat16, what ``torch._grouped_mm`` writes; float32 runs on the
``sm90_bf16`` wgrad route on sm_90a: exact bf16 operands, fp32 accumulation; ``--wgrad-bn`` its tile width).

Second peer (kernel-only rows): ``torch._scaled_grouped_mm``, PyTorch's fp8 grouped GEMM (CUTLASS, sm_90 / sm_100),
with e4m3 operands and rowwise float32 scales (its contract, aten/src/ATen/native/cuda/GroupedBlas.cpp: ``mat_a``
row-major, ``mat_b`` column-major per group, int32 offsets on the device, bf16 out, ``use_fast_accum=False`` for an
fp32-accumulating peer): fwd ``x [M, K] x w^T`` (``w [G, N, K]`` transposed), dgrad ``dy [M, N] x W`` (``W`` stored as
``[G, K, N]``, transposed), wgrad ``dy^T [N, Mc] x x [Mc, K]`` 2d-2d over the same per-group column padding to 32 as
mxrt's wgrad operands (its TMA needs 16-byte aligned group starts). Columns ``fp8_tflops`` and ``mxrt_over_fp8``
(that peer's time / mxrt's); where the call is unsupported the row carries ``fp8_error`` and the reason is printed
once.

Shapes (B experts, M tokens per expert on average, N x K weights): DeepSeek-V3 GateUp (N 4096, K 7168) and Down
(N 7168, K 2048) with B 16 / 32 and M 2048 / 4096; gpt-oss-20B GateUp (N 5760, K 2880) and Down (N = K = 2880) with
B 4 / 32 and M 2048 / 4096; each with balanced group sizes and an unbalanced split (lognormal weights, one empty
expert). Passes: fwd ``y = x_g @ W_g.T``, dgrad ``dx = dy_g @ W_g``, wgrad ``dW_g = dy_g.T @ x_g``. Inputs are made
and quantized on the GPU (mxrt's GPU quantizers); torch times bf16 copies of the same values (the timing does not
depend on them) and its result of the forward is compared with mxrt's (calc_diff, a sanity column). Timing:
``--timing`` (CUDA events around eager calls by default; median of --reps). Shapes stop starting once
--budget-s has passed (default 200 s, so the run stays under 4 minutes on an H100 with the generic kernel at ~20
TFLOP/s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import cupy
import numpy as np

import mxrt
from mxrt.bench import core

#: (model, pass-pair name, B, M per expert, N, K)
SHAPES = {
    "deepseek": [("DeepSeek-V3", "GateUp", b, m, 4096, 7168) for b in (16, 32) for m in (2048, 4096)]
    + [("DeepSeek-V3", "Down", b, m, 7168, 2048) for b in (16, 32) for m in (2048, 4096)],
    "gpt-oss": [("gpt-oss-20B", "GateUp", b, m, 5760, 2880) for b in (4, 32) for m in (2048, 4096)]
    + [("gpt-oss-20B", "Down", b, m, 2880, 2880) for b in (4, 32) for m in (2048, 4096)],
}


def group_lens(b: int, m: int, balanced: bool, rng: np.random.Generator) -> np.ndarray:
    """B lengths summing to B * m: equal, or lognormal weights with expert 0 empty (B > 1)."""
    total = b * m
    if balanced or b == 1:
        return np.full(b, m, np.int64)
    w = rng.lognormal(0.0, 1.0, b)
    w[0] = 0.0
    lens = np.floor(w / w.sum() * total).astype(np.int64)
    lens[int(np.argmax(lens))] += total - int(lens.sum())
    return lens


def _bf16_torch(x: cupy.ndarray):
    import torch

    return torch.from_dlpack(x).to(torch.bfloat16)


def _torch_rows(out) -> cupy.ndarray:
    import torch

    return cupy.from_dlpack(out.float() if isinstance(out, torch.Tensor) else out)


def time_events(fn, reps: int, calls: int = 5) -> tuple[float, str]:
    """Seconds per call of ``fn`` (mxrt or torch: both queue on the legacy default stream here) by CUDA events
    around ``calls`` eager calls, median of ``reps``: what a user's eager step sees, host work included where it
    is not hidden behind the GPU (the torch route cannot be captured, mxrt/ops/grouped_gemm_torch.py)."""
    fn()
    cupy.cuda.Device().synchronize()

    def loop() -> None:
        for _ in range(calls):
            fn()

    return core.cupy_median_time(loop, reps) / calls, "events"


def run_shape(
    model, name, b, m, n, k, balanced, reps, rng, log, only=("fwd", "dgrad", "wgrad"), wgrad_out="bfloat16",
    timing="events", with_fp8=True, fwd_out="bfloat16",
) -> list[dict]:  # fmt: skip
    import torch

    lens = group_lens(b, m, balanced, rng)
    mt = int(lens.sum())
    lens_d = cupy.asarray(lens)
    x = cupy.random.standard_normal((mt, k), dtype=cupy.float32)
    w = cupy.random.standard_normal((b, n, k), dtype=cupy.float32)
    dy = cupy.random.standard_normal((mt, n), dtype=cupy.float32)
    qx, qdy = mxrt.quantize_mx(x), mxrt.quantize_mx(dy)
    qw = mxrt.quantize_mx_dual_grouped(w)  # row [B, n, k] for fwd, col [B, k, n] for dgrad
    qdy_c = mxrt.quantize_mx_grouped(dy, lens_d, colwise=True, col_align=32).col
    qx_c = mxrt.quantize_mx_grouped(x, lens_d, colwise=True, col_align=32).col
    fdt = cupy.float32 if fwd_out == "float32" else cupy.uint16
    y, dx = cupy.empty((mt, n), fdt), cupy.empty((mt, k), fdt)
    dw = cupy.empty((b, n, k), cupy.float32 if wgrad_out == "float32" else cupy.uint16)
    passes = {
        "fwd": (lambda: mxrt.grouped_gemm_mx(qx, qw.row, lens_d, out_dtype=fwd_out, out=y), 2 * mt * n * k),
        "dgrad": (lambda: mxrt.grouped_gemm_mx(qdy, qw.col, lens_d, out_dtype=fwd_out, out=dx), 2 * mt * n * k),
        "wgrad": (
            lambda: mxrt.grouped_gemm_mx_wgrad(qdy_c, qx_c, lens_d, out_dtype=wgrad_out, out=dw),
            2 * mt * n * k,
        ),
    }
    tx, tw, tdy = _bf16_torch(x), _bf16_torch(w), _bf16_torch(dy)
    offs = torch.from_numpy(np.cumsum(lens).astype(np.int32)).cuda()
    peers = {
        "fwd": lambda: torch._grouped_mm(tx, tw.transpose(-2, -1), offs=offs),
        "dgrad": lambda: torch._grouped_mm(tdy, tw, offs=offs),
        "wgrad": lambda: torch._grouped_mm(tdy.t(), tx, offs=offs),
    }
    try:
        fp8 = fp8_peers(tx, tw, tdy, lens, offs, only) if with_fp8 else {}
    except Exception as e:  # making its operands failed (e.g. no float8 casts): the rows say why
        fp8 = dict.fromkeys(only, f"operands: {type(e).__name__}: {str(e)[:150]}")
    rows = []
    for p, (fn, flops) in passes.items():
        if p not in only:
            continue
        row = dict(model=model, gemm=name, B=b, M=m, N=n, K=k, split="balanced" if balanced else "unbalanced")
        row["pass"] = p
        try:
            t, how = time_events(fn, reps) if timing == "events" else core.time_cupy([fn], reps, calls=1, log=log)
            row.update(mxrt_us=t * 1e6, mxrt_tflops=flops / t / 1e12, mxrt_timing=how)
        except Exception as e:
            row["mxrt_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        try:
            t, how = time_events(peers[p], reps) if timing == "events" else core.time_torch([peers[p]], reps, log=log)
            row.update(torch_us=t * 1e6, torch_tflops=flops / t / 1e12, torch_timing=how)
            if p == "fwd" and "mxrt_us" in row:
                ref = _torch_rows(peers[p]())
                got = cupy.asarray(y.view(cupy.uint16)).astype(cupy.uint32) << 16
                got = got.view(cupy.float32)
                d = 1 - 2 * float((got * ref).sum()) / max(float((got * got + ref * ref).sum()), 1e-30)
                row["calc_diff_vs_torch"] = d
        except Exception as e:
            row["torch_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if "mxrt_us" in row and "torch_us" in row:
            row["mxrt_over_torch"] = row["torch_us"] / row["mxrt_us"]
        peer8 = fp8.get(p)
        try:
            if peer8 is None:
                pass
            elif isinstance(peer8, str):
                raise RuntimeError(peer8)
            else:
                _time_fp8(row, p, peer8, peers[p], flops, reps, timing, log)
        except Exception as e:
            row["fp8_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            if row["fp8_error"] not in _FP8_SAID:
                _FP8_SAID.add(row["fp8_error"])
                log(f"torch._scaled_grouped_mm {p}: not measured ({row['fp8_error']})")
        rows.append(row)
        log(
            f"  {model} {name} B={b} M={m} {row['split']} {p}: mxrt {row.get('mxrt_tflops', float('nan')):.1f} "
            f"TFLOP/s, torch bf16 {row.get('torch_tflops', float('nan')):.1f} TFLOP/s, torch fp8 rowwise "
            f"{row.get('fp8_tflops', float('nan')):.1f} TFLOP/s"
        )
    return rows  # the buffers die with this frame; main() returns them to the pools


_FP8_SAID: set[str] = set()  # fp8 peer errors already printed


def _time_fp8(row: dict, p: str, peer8, peer_bf16, flops: int, reps: int, timing: str, log) -> None:
    """Time the fp8 rowwise peer of pass ``p`` into ``row`` (and, for the forward, a sanity calc_diff of its product
    against the bf16 peer's: e4m3-rounded inputs give ~1e-3)."""
    t, how = time_events(peer8, reps) if timing == "events" else core.time_torch([peer8], reps, log=log)
    row.update(fp8_us=t * 1e6, fp8_tflops=flops / t / 1e12, fp8_timing=how)
    if "mxrt_us" in row:
        row["mxrt_over_fp8"] = row["fp8_us"] / row["mxrt_us"]
    if p == "fwd":
        got, ref = _torch_rows(peer8()), _torch_rows(peer_bf16())
        d = 1 - 2 * float((got * ref).sum()) / max(float((got * got + ref * ref).sum()), 1e-30)
        row["fp8_calc_diff_vs_bf16"] = d


def fp8_peers(tx, tw, tdy, lens: np.ndarray, offs, only) -> dict:
    """pass -> a call of ``torch._scaled_grouped_mm`` (e4m3, rowwise float32 scales of 1, bf16 out, fp32
    accumulation), or the reason it cannot run here. The operands are e4m3 casts of the bf16 peer's tensors in the
    layouts its contract asks for (module docstring): timing does not depend on the values."""
    import torch

    f = getattr(torch, "_scaled_grouped_mm", None)
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if f is None or fp8 is None:
        return dict.fromkeys(only, f"torch {torch.__version__} has no _scaled_grouped_mm / float8_e4m3fn")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) not in ((9, 0), (10, 0)):
        return dict.fromkeys(only, f"_scaled_grouped_mm runs on sm_90 / sm_100, not sm_{major}{minor}")
    g, mt = int(tw.shape[0]), int(tx.shape[0])
    n, k = int(tw.shape[1]), int(tw.shape[2])
    dev = tx.device
    ones = lambda *shape: torch.ones(shape, device=dev, dtype=torch.float32)  # noqa: E731
    out = {}
    if "fwd" in only:  # [Mt, K] x [G, K, N] (w transposed: column-major per group), scales [Mt] and [G, N]
        a, w8 = tx.to(fp8), tw.to(fp8)
        sa, sb = ones(mt), ones(g, n)
        out["fwd"] = lambda: f(a, w8.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16)
    if "dgrad" in only:  # [Mt, N] x [G, N, K] column-major: W stored [G, K, N], transposed; scales [Mt], [G, K]
        dy8, wt8 = tdy.to(fp8), tw.transpose(-2, -1).contiguous().to(fp8)
        sa2, sb2 = ones(mt), ones(g, k)
        out["dgrad"] = lambda: f(dy8, wt8.transpose(-2, -1), sa2, sb2, offs=offs, out_dtype=torch.bfloat16)
    if "wgrad" in only:  # 2d-2d: dy^T [N, Mc] x x [Mc, K] (x^T stored [K, Mc]), groups padded to 32 columns
        ends = np.asarray(mxrt.pad_group_layout(lens, 32)[1][1:], np.int64)
        mc = int(ends[-1]) if ends.size else 0
        dyt8 = torch.zeros(n, mc, device=dev, dtype=torch.bfloat16)
        xt8 = torch.zeros(k, mc, device=dev, dtype=torch.bfloat16)
        src = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        dst = np.concatenate([[0], ends[:-1]]) if ends.size else ends
        for i in range(g):  # each group's columns at its padded start, zeros in the padding
            ln = int(lens[i])
            dyt8[:, int(dst[i]) : int(dst[i]) + ln] = tdy[int(src[i]) : int(src[i]) + ln].t()
            xt8[:, int(dst[i]) : int(dst[i]) + ln] = tx[int(src[i]) : int(src[i]) + ln].t()
        dyt8, xt8 = dyt8.to(fp8), xt8.to(fp8)
        offs_pad = torch.from_numpy(ends.astype(np.int32)).to(dev)
        sa3, sb3 = ones(n * g), ones(k * g)
        out["wgrad"] = lambda: f(dyt8, xt8.t(), sa3, sb3, offs=offs_pad, out_dtype=torch.bfloat16)
    return out


def run_with_quant(model, name, b, m, n, k, balanced, reps, rng, log) -> list[dict]:
    """The seed's with-quantization rows: a training step's expert GEMM from bf16 tensors. mxrt "fwd+q": quantize x
    (rowwise) and the weights (``quantize_mx_dual_grouped``: rows for the forward, columns for the dgrad), then the
    forward; "bwd+q": quantize dy rowwise (dgrad) and dy / x colwise per group (``quantize_mx_grouped``, wgrad), then
    the dgrad and the bf16 wgrad (what ``mxrt.torch.grouped_linear_mx`` runs). Peer: ``torch._grouped_mm`` on the bf16
    tensors, one GEMM forward, two backward. FLOPs: 2 M n k per GEMM."""
    import torch

    lens = group_lens(b, m, balanced, rng)
    mt = int(lens.sum())
    dev = "cuda"
    tx = torch.randn(mt, k, device=dev, dtype=torch.bfloat16)
    tw = torch.randn(b, n, k, device=dev, dtype=torch.bfloat16)
    tdy = torch.randn(mt, n, device=dev, dtype=torch.bfloat16)
    lens_t = torch.from_numpy(lens).to(dev)
    offs = torch.from_numpy(np.cumsum(lens).astype(np.int32)).to(dev)
    qw = mxrt.quantize_mx_dual_grouped(tw)

    def mx_fwd():
        q = mxrt.quantize_mx_dual_grouped(tw)
        return mxrt.grouped_gemm_mx(mxrt.quantize_mx(tx), q.row, lens_t)

    def mx_bwd():
        dx = mxrt.grouped_gemm_mx(mxrt.quantize_mx(tdy), qw.col, lens_t)
        qg = mxrt.quantize_mx_grouped(tdy, lens_t, colwise=True, col_align=32)
        qx = mxrt.quantize_mx_grouped(tx, lens_t, colwise=True, col_align=32)
        return dx, mxrt.grouped_gemm_mx_wgrad(qg, qx, lens_t, out_dtype="bfloat16")

    cases = {
        "fwd+q": (mx_fwd, lambda: torch._grouped_mm(tx, tw.transpose(-2, -1), offs=offs), 2 * mt * n * k),
        "bwd+q": (
            mx_bwd,
            lambda: (torch._grouped_mm(tdy, tw, offs=offs), torch._grouped_mm(tdy.t(), tx, offs=offs)),
            4 * mt * n * k,
        ),
    }
    rows = []
    for p, (fn, peer, flops) in cases.items():
        row = dict(model=model, gemm=name, B=b, M=m, N=n, K=k, split="balanced" if balanced else "unbalanced")
        row["pass"] = p
        try:
            t, _ = time_events(fn, reps)
            row.update(mxrt_us=t * 1e6, mxrt_tflops=flops / t / 1e12)
            t, _ = time_events(peer, reps)
            row.update(torch_us=t * 1e6, torch_tflops=flops / t / 1e12)
            row["mxrt_over_torch"] = row["torch_us"] / row["mxrt_us"]
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        log(f"  {model} {name} B={b} M={m} {row['split']} {p}: {row.get('mxrt_over_torch', float('nan')):.2f}x")
    return rows


def _empty_torch_cache() -> None:
    import torch

    torch.cuda.empty_cache()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="gpt-oss,deepseek", help="comma-separated: deepseek, gpt-oss")
    ap.add_argument("--passes", default="fwd,dgrad,wgrad", help="comma-separated: fwd, dgrad, wgrad")
    ap.add_argument(
        "--kernel", default="auto", help="MXRT_GROUPED_GEMM_KERNEL: auto, generic, sm90, sm90_ws, sm90_wgmma, ..."
    )
    ap.add_argument("--wgrad-out", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--fwd-out", default="bfloat16", choices=("bfloat16", "float32"), help="fwd / dgrad out dtype")
    ap.add_argument("--wgrad-bn", type=int, default=0, help="the sm90_bf16 wgrad route's tile width (128 / 256)")
    ap.add_argument("--no-fp8", action="store_true", help="skip the torch._scaled_grouped_mm fp8 rowwise peer")
    ap.add_argument(
        "--with-quant", action="store_true",
        help="the with-quantization rows (bf16 in: quantizers + GEMMs of a training step) instead of kernel-only",
    )  # fmt: skip
    ap.add_argument(
        "--timing", default="events", choices=("events", "graph"),
        help="events: eager calls, both sides (the torch route runs eagerly only); graph: CUDA-graph replays",
    )  # fmt: skip
    args = ap.parse_args(argv)
    os.environ["MXRT_GROUPED_GEMM_KERNEL"] = args.kernel
    if args.wgrad_bn:
        from mxrt.ops import grouped_wgrad_bf16

        grouped_wgrad_bf16.BN = args.wgrad_bn
    only = tuple(x.strip() for x in args.passes.split(","))
    shapes = [s for key in args.shapes.split(",") for s in SHAPES[key.strip()]]
    shapes.sort(key=lambda s: s[2] * s[3] * s[4] * s[5])  # small first, so the budget cuts the largest
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    rows: list[dict] = []
    for shape in shapes:
        for balanced in (True, False):
            if time.perf_counter() - t0 > args.budget_s:
                print(f"budget {args.budget_s:.0f} s reached; skipping {shape} balanced={balanced}")
                continue
            try:
                if args.with_quant:
                    rows += run_with_quant(*shape, balanced, args.reps, rng, print)
                else:
                    rows += run_shape(
                        *shape,
                        balanced,
                        args.reps,
                        rng,
                        print,
                        only,
                        args.wgrad_out,
                        args.timing,
                        not args.no_fp8,
                        fwd_out=args.fwd_out,
                    )
            except Exception:
                traceback.print_exc()
    cols = ["model", "gemm", "B", "M", "split", "pass", "mxrt_tflops", "torch_tflops", "mxrt_over_torch"]
    if not args.with_quant and not args.no_fp8:
        cols += ["fp8_tflops", "mxrt_over_fp8"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, "-")) for c in cols]
        print("| " + " | ".join(cells) + " |")
    print(f"wall {time.perf_counter() - t0:.0f} s on {core.device_name()}")
    if args.json:
        with open(args.json, "w") as fh:
            meta = {"device": core.device_name(), "software": core.software(), "kernel": args.kernel}
            meta["wgrad_out"], meta["timing"], meta["with_quant"] = args.wgrad_out, args.timing, args.with_quant
            meta["grouped_plans"] = os.environ.get("MXRT_GROUPED_PLANS", "1")
            json.dump({**meta, "rows": rows}, fh, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
