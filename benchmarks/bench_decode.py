"""Small-M (decode) MX GEMM against its peers, same run, same GPU (issue 12).

Cells: the decode GEMMs of a DeepSeek-V3-class and a Llama-70B-class model per tensor-parallel degree (below), at
M in {1, 2, 4, 8, 16, 32, 64} tokens, MXFP8 (e4m3 x e4m3) and MXFP4 weights (e4m3 tokens x e2m1 weights).
Peers: cuBLAS bf16 (``torch.matmul`` of bf16 tokens and the bf16 weight, what an H100 user runs) and the device
copy bandwidth (a 16-byte vector copy kernel, read + write bytes per second). Timing: CUDA-graph replays
round-robin over input sets larger than 3x the L2 (mxrt.bench.core), so weights come from DRAM as in a model;
``--eager`` adds plain-call timings (host overhead included) for the issue's cell.

    python3 benchmarks/bench_decode.py [--quick] [--tp 1,8] [--m 1,2,4,8,16,32,64] [--json FILE] [--plot FILE]
    python3 benchmarks/bench_decode.py --sweep 1x7168x4096,16x7168x4096    # builds (rt, split, kw, stages)
    python3 benchmarks/bench_decode.py --weight-layout aiter16x16          # weights shuffled, read in place

``--weight-layout aiter16x16``: every weight is passed as ``mxrt.preshuffle_weight``'s buffer (``b_weight_layout``);
the "other path" column is then the row-major weight on the path the shuffled call took (the layout's own cost).

Bytes read per call: weight codes + weight scales + token codes + token scales (+ the bf16 output written);
``copy%`` is that over the copy kernel's rate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

#: (model, gemm) -> (N, K) at TP=1 and which of them the TP degree divides ("n": column parallel, "k": row)
MODELS = {
    # DeepSeek-V3 dense-MLP layers and MLA projections: hidden 7168, 128 heads x 128 v_head_dim = 16384, MLP 18432;
    # q_a (1536) + kv_a (512 + 64 rope) projections fused, replicated across TP
    ("DeepSeek-V3", "qkv_a"): (2112, 7168, None),
    ("DeepSeek-V3", "gate_up"): (2 * 18432, 7168, "n"),
    ("DeepSeek-V3", "o_proj"): (7168, 16384, "k"),
    ("DeepSeek-V3", "down"): (7168, 18432, "k"),
    # Llama-3-70B: hidden 8192, 64 q heads + 2 x 8 kv heads of 128, MLP 28672
    ("Llama-70B", "qkv"): ((64 + 16) * 128, 8192, "n"),
    ("Llama-70B", "gate_up"): (2 * 28672, 8192, "n"),
    ("Llama-70B", "o_proj"): (8192, 8192, "k"),
    ("Llama-70B", "down"): (8192, 28672, "k"),
}
#: the issue's headline cell (the number it quotes: N = 7168, K = 4096)
ISSUE_CELL = (7168, 4096)


def cells(tps, ms, quick):
    if quick:
        return [("issue", "cell", 1, m, *ISSUE_CELL) for m in ms]
    out = []
    for (model, gemm), (n, k, split) in MODELS.items():
        for tp in tps:
            if split is None and tp != tps[0]:
                continue
            nn, kk = (n // tp, k) if split == "n" else ((n, k // tp) if split == "k" else (n, k))
            out += [(model, gemm, tp, m, nn, kk) for m in ms]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the issue's cell N=7168, K=4096")
    ap.add_argument("--tp", default="1,8")
    ap.add_argument("--m", default="1,2,4,8,16,32,64")
    ap.add_argument("--fmts", default="e4m3,e2m1", help="weight formats (tokens are e4m3)")
    ap.add_argument("--eager", action="store_true", help="also plain calls (host time): issue cell, MoE")
    peers_help = "mxrt only: no cuBLAS bf16 timing, other decode path or same-size copy (an A/B of two trees)"
    ap.add_argument("--no-peers", action="store_true", help=peers_help)
    ap.add_argument("--sweep", default="", help="MxNxK list: time the decode builds (rt, split, kw 2/4, stages 2-4)")
    ap.add_argument("--sweep-kw", default="2,4", help="K warps the --sweep builds take")
    ap.add_argument("--wg-sweep", default="", help="MxNxK list: the wgmma decode builds (nc, stages, split) vs peers")
    ap.add_argument("--moe", action="store_true", help="MoE decode: DeepSeek-V3 top-8 gate_up / down, 64 experts")
    ap.add_argument("--weight-layout", default="", help="aiter16x16: weights shuffled (b_weight_layout)")
    ap.add_argument("--json", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--budget-s", type=float, default=400)
    sk_help = "sm90_decode_wg's stream-K grid: where it is measured faster (auto), never, or on every call"
    ap.add_argument("--sk", choices=("auto", "off", "on"), default="auto", help=sk_help)
    args = ap.parse_args(argv)

    import cupy
    import torch

    import mxrt
    from mxrt.bench import core
    from mxrt.ops import gemm as gemm_op
    from mxrt.ops import gemm_decode, gemm_decode_wg
    from mxrt.ops import gemm_decode_kernels as K
    from mxrt.problems import gemm_problem

    if args.sk == "off":
        gemm_decode_wg.SK_MIN_UNITS = None
    elif args.sk == "on":  # one CTA per SM (at least 4 units each) on every split_k=1 call
        gemm_decode_wg.sk_ctas = lambda n, k, sms: max(1, min(sms, -(-n // K.WG_ROWS) * max(1, k // 128) // 4))
    t_start = time.monotonic()
    l2 = core.l2_bytes()
    bw = core.copy_bandwidth(l2)
    copy_bw = bw["copy16 kernel"]
    dev = torch.cuda.get_device_name()
    memcpy = bw["cudaMemcpyAsync"] / 1e12
    print(f"device {dev}; L2 {l2 >> 20} MiB; copy16 {copy_bw / 1e12:.2f} TB/s, memcpy {memcpy:.2f} TB/s")

    def quant(rows, k, fmt, seed):
        x = cupy.random.default_rng(seed).standard_normal((rows, k), dtype=cupy.float32)
        q = mxrt.quantize_mx(x, fmt)
        return x, q

    def mx_bytes(q):
        return q.data.nbytes + q.scales.nbytes

    def same_size_copy(nbytes):
        """The copy kernel moving ``nbytes`` in all (half read, half written): the bandwidth a kernel of this
        traffic reaches with its launch, ramp and tail included."""
        launches, moved = core.copy_launches(nbytes, l2)
        return moved / core.time_cupy(launches, 7, log=print)[0]

    if args.moe:
        return bench_moe(args, core, copy_bw, dev)

    if args.wg_sweep:
        return wg_sweep(args, core, copy_bw, l2, quant, mx_bytes)

    if args.sweep:
        for m, n, k in core.parse_shapes(args.sweep, 3):
            for fmt in args.fmts.split(","):
                _, qw = quant(n, k, fmt, 1)
                sets = core.n_input_sets(mx_bytes(qw), l2)
                ws = [qw] + [quant(n, k, fmt, 2 + i)[1] for i in range(sets - 1)]
                _, qx = quant(m, k, "e4m3", 0)
                base, _ = gemm_decode.plan(m, n, k, 1)
                same = same_size_copy(mx_bytes(qw) + mx_bytes(qx))
                print(f"sweep {m}x{n}x{k} {fmt}: plan {base}, {sets} weight sets; copy of the same bytes "
                      f"{same / 1e12:.2f} TB/s")  # fmt: skip
                fa, fb = mxrt.codes.FMT_CODES["e4m3"], mxrt.codes.FMT_CODES[fmt]
                dgs = [gemm_op.device_gemm(gemm_problem(qx, w)) for w in ws]
                best = {}
                for rt in K.DECODE_RT:
                    if not K.valid_rt(base.mt, rt):
                        continue
                    for split in sorted({1, gemm_decode.plan(m, n, k, 1)[1]}):  # (the plan's split at its rt)
                        for kw in [int(v) for v in args.sweep_kw.split(",")]:  # 8 rarely wins (session 5)
                            for st in (2, 3, 4):
                                if K.smem_bytes(fa, fb, base.mt, kw, st, rt) > K.DECODE_SMEM_MAX:
                                    continue
                                if split * kw > k // 128:
                                    continue
                                tune = dict(kw=kw, stages=st, rt=rt, split=split)
                                launches = [lambda dg=dg, tune=tune: gemm_decode.run(dg, **tune) for dg in dgs]
                                label = f"rt={rt} split={split:2d} kw={kw} stages={st}"
                                try:
                                    t, _ = core.time_cupy(launches, 7, log=print)
                                except Exception as e:  # a configuration that does not build or launch
                                    print(f"  {label}: {type(e).__name__}: {str(e)[:100]}")
                                    continue
                                gbs = (mx_bytes(qw) + mx_bytes(qx)) / t
                                print(f"  {label}: {t * 1e6:7.2f} us  {gbs / 1e12:5.2f} TB/s  {gbs / copy_bw:5.1%}")
                                if rt not in best or t < best[rt][0]:
                                    best[rt] = (t, label)
                for rt, (t, label) in sorted(best.items()):
                    print(f"  best at rt={rt}: {label} {t * 1e6:.2f} us")
                del dgs
                del ws
        return 0

    rows = []
    tps = [int(t) for t in args.tp.split(",")]
    ms = [int(m) for m in args.m.split(",")]
    budget = core.Budget(args.budget_s)
    for model, gemm, tp, m, n, k in cells(tps, ms, args.quick):
        if budget.over():
            print("budget spent; stopping")
            break
        # weights: one per set so that the sets exceed 3x the L2; torch's bf16 copies likewise
        w32, _ = quant(n, k, "e4m3", 11)
        wb = torch.from_dlpack(w32).to(torch.bfloat16)
        x32, qx = quant(m, k, "e4m3", 12)
        xb = torch.from_dlpack(x32).to(torch.bfloat16)
        t_torch, how_t = None, None
        if not args.no_peers:
            tsets = core.n_input_sets(wb.numel() * 2, l2)
            wbs = [wb] + [torch.randn_like(wb) for _ in range(tsets - 1)]
            t_torch, how_t = core.time_torch([lambda w=w, xb=xb: torch.matmul(xb, w.t()) for w in wbs], 7, log=print)
            del wbs
        ref = torch.matmul(xb.double(), wb.double().t())
        for fmt in args.fmts.split(","):
            qw = mxrt.quantize_mx(w32, fmt)
            sets = core.n_input_sets(mx_bytes(qw), l2)
            ws = [qw] + [quant(n, k, fmt, 20 + i)[1] for i in range(sets - 1)]
            wl = args.weight_layout or None
            if wl is None:
                calls = [lambda w=w, qx=qx: mxrt.gemm_mx(qx, w) for w in ws]
                dg = gemm_op.device_gemm(gemm_problem(qx, qw))
            else:  # the same weights shuffled (one device buffer each), read in place
                shuf = [(cupy.asarray(mxrt.preshuffle_weight(w.data.get(), wl)), w.scales, fmt, k) for w in ws]
                calls = [lambda w=w, qx=qx, wl=wl: mxrt.gemm_mx(qx, w, b_weight_layout=wl) for w in shuf]
                dg = gemm_op.device_gemm(gemm_problem(qx, shuf[0], b_weight_layout=wl))
            path = gemm_op.resolve_gemm_path(dg)[0].name
            t_mx, how = core.time_cupy(calls, 7, log=print)
            # the other decode path on the same cell (forced): the wgmma kernel where another path served the call,
            # sm90_decode where the wgmma kernel did; with a weight layout, the row-major weights on the same path
            t_other = None
            other = gemm_decode.NAME if path == gemm_decode_wg.NAME else gemm_decode_wg.NAME
            if wl is not None:
                other = path
            if not budget.over() and not args.no_peers:
                os.environ["MXRT_GEMM_PATH"] = other
                try:
                    t_other, _ = core.time_cupy([lambda w=w, qx=qx: mxrt.gemm_mx(qx, w) for w in ws], 7, log=print)
                except Exception as e:  # the path declines the cell
                    print(f"    {other}: {type(e).__name__}: {str(e)[:100]}")
                finally:
                    del os.environ["MXRT_GEMM_PATH"]
            got = torch.from_dlpack(calls[0]()).view(torch.bfloat16).double()
            cd = float(1 - 2 * (got * ref).sum() / ((got * got).sum() + (ref * ref).sum()))
            nbytes = mx_bytes(qw) + mx_bytes(qx) + 2 * m * n
            same = None if args.no_peers else same_size_copy(nbytes)
            row = dict(model=model, gemm=gemm, tp=tp, m=m, n=n, k=k, fmt=fmt, path=path, weight_layout=wl,
                       mxrt_us=t_mx * 1e6,
                       mxrt_tbps=nbytes / t_mx / 1e12, copy_frac=nbytes / t_mx / copy_bw,
                       same_copy_tbps=None if same is None else same / 1e12,
                       same_copy_frac=None if same is None else nbytes / t_mx / same,
                       torch_us=None if t_torch is None else t_torch * 1e6,
                       torch_tbps=None if t_torch is None else (2 * n * k + 2 * m * k + 2 * m * n) / t_torch / 1e12,
                       speedup=None if t_torch is None else t_torch / t_mx,
                       calc_diff_vs_bf16=cd, method=how, torch_method=how_t,
                       other_path=other, other_us=None if t_other is None else t_other * 1e6)  # fmt: skip
            if args.eager and (n, k) == ISSUE_CELL:
                mxrt.gemm_mx(qx, qw)
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                for _ in range(200):
                    mxrt.gemm_mx(qx, qw)
                cupy.cuda.Device().synchronize()
                row["mxrt_eager_us"] = (time.perf_counter() - t0) / 200 * 1e6
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(200):
                    torch.matmul(xb, wb.t())
                torch.cuda.synchronize()
                row["torch_eager_us"] = (time.perf_counter() - t0) / 200 * 1e6
            rows.append(row)
            eager = ""
            if "mxrt_eager_us" in row:
                eager = f" | eager {row['mxrt_eager_us']:.1f} vs {row['torch_eager_us']:.1f} us"
            if t_torch is not None:
                peers = (f"{row['same_copy_frac']:.0%} same-size copy, {path}) | cuBLAS bf16 {t_torch * 1e6:7.2f} us "
                         f"({row['torch_tbps']:.2f} TB/s) | {row['speedup']:.2f}x")  # fmt: skip
            else:
                peers = f"{path})"
            print(
                f"{model:11s} {gemm:7s} tp{tp} M={m:2d} N={n:5d} K={k:5d} {fmt}: mxrt {t_mx * 1e6:7.2f} us "
                f"({row['mxrt_tbps']:.2f} TB/s, {row['copy_frac']:.0%} copy, {peers} | calc_diff {cd:.1e}"
                + eager
                + ("" if t_other is None else f" | {other} {t_other * 1e6:.1f} us")
            )
            del ws, qw, calls
        del w32, wb
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    print(f"wall {time.monotonic() - t_start:.0f} s on {dev}")
    if rows:
        print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "copy_bw": bw, "rows": rows}, f, indent=1)
        print(f"wrote {args.json}")
    if args.plot and rows and not args.no_peers:
        _plot(rows, args.plot, dev)
    return 0


def wg_sweep(args, core, copy_bw, l2, quant, mx_bytes) -> int:
    """Each MxNxK cell and weight format (``--fmts``; tokens e4m3): the wgmma decode path's builds (nc, stages,
    split) against sm90_decode's plan and cuBLAS bf16, all CUDA-graph timed over weight sets larger than 3x the L2."""
    import torch

    from mxrt.ops import gemm as gemm_op
    from mxrt.ops import gemm_decode, gemm_decode_wg
    from mxrt.ops import gemm_decode_kernels as K
    from mxrt.problems import gemm_problem

    for (m, n, k), fmt in ((c, f) for c in core.parse_shapes(args.wg_sweep, 3) for f in args.fmts.split(",")):
        w32, qw = quant(n, k, fmt, 1)
        sets = core.n_input_sets(mx_bytes(qw), l2)
        ws = [qw] + [quant(n, k, fmt, 2 + i)[1] for i in range(sets - 1)]
        x32, qx = quant(m, k, "e4m3", 0)
        nbytes = mx_bytes(qw) + mx_bytes(qx) + 2 * m * n
        wb = torch.from_dlpack(w32).to(torch.bfloat16)
        xb = torch.from_dlpack(x32).to(torch.bfloat16)
        wbs = [wb] + [torch.randn_like(wb) for _ in range(core.n_input_sets(wb.numel() * 2, l2) - 1)]
        t_torch, _ = core.time_torch([lambda w=w, xb=xb: torch.matmul(xb, w.t()) for w in wbs], 7, log=print)
        del wbs
        dgs = [gemm_op.device_gemm(gemm_problem(qx, w)) for w in ws]
        t_dec, _ = core.time_cupy([lambda dg=dg: gemm_decode.run(dg) for dg in dgs], 7, log=print)
        base, split0 = gemm_decode_wg.plan(m, n, k, 1)
        print(
            f"wg-sweep {m}x{n}x{k} {fmt}: cuBLAS bf16 {t_torch * 1e6:.2f} us, sm90_decode {t_decode_us(t_dec)} us; "
            f"wg plan {base} split {split0}; {sets} weight sets"
        )
        best = None
        for nc, ns, pw in ((2, 1, 2), (2, 1, 4), (2, 1, 8), (1, 1, 8), (2, 2, 8), (4, 2, 4), (4, 1, 4)):
            for st, pf in ((st, pf) for st in (4, 8, 12, 16) for pf in (K.WG_PF if fmt == "e2m1" else (0,))):
                if not K.wg_valid(base.nt, nc, st, ns, pw, fmt == "e2m1", pf or 2):
                    continue
                for split in sorted({1, split0}):
                    if split > k // 128:
                        continue
                    tune = dict(nt=base.nt, nc=nc, ns=ns, pw=pw, stages=st, pf=pf, split=split)
                    label = f"nc={nc} ns={ns} pw={pw} stages={st:2d} pf={pf} split={split:2d}"
                    try:
                        t, _ = core.time_cupy([lambda dg=dg, tune=tune: gemm_decode_wg.run(dg, **tune) for dg in dgs],
                                              7, log=print)  # fmt: skip
                    except Exception as e:  # a configuration that does not build or launch
                        print(f"  {label}: {type(e).__name__}: {str(e)[:100]}")
                        continue
                    print(f"  {label}: {t * 1e6:7.2f} us  {nbytes / t / 1e12:5.2f} TB/s  {nbytes / t / copy_bw:5.1%} "
                          f"copy  {t_torch / t:5.2f}x cuBLAS  {t_dec / t:5.2f}x sm90_decode")  # fmt: skip
                    if best is None or t < best[0]:
                        best = (t, label)
        if best:
            print(
                f"  best: {best[1]} {best[0] * 1e6:.2f} us = {t_torch / best[0]:.2f}x cuBLAS bf16, "
                f"{t_dec / best[0]:.2f}x sm90_decode"
            )
        del dgs, ws
    return 0


def t_decode_us(t):
    return f"{t * 1e6:.2f}"


#: DeepSeek-V3 routed experts, top-8, expert intermediate 2048 (gate_up N = 2 x 2048 on x [T, 7168]; down N = 7168
#: on the activated slots [T * 8, 2048]), with the 64 local experts of expert parallelism 4 (all 256 experts'
#: gate_up weights are 7.5 G elements, past mxrt's 2^31-1 element limit)
MOE_GEMMS = {"gate_up": (4096, 7168, True), "down": (7168, 2048, False)}


def moe_weights(e_num: int, n: int, k: int, fmt: str):
    """MX weights [e_num, n, k] of random valid codes (no NaN bytes) and scales near 2^-7, made on the device (the
    whole [E, N, K] would take ~30 GB as fp32)."""
    import cupy

    import mxrt

    rng = cupy.random.default_rng(1)
    shape = (e_num, n, k if fmt != "e2m1" else k // 2)
    codes = rng.integers(0, 2**62, int(np.prod(shape)) // 8, dtype=cupy.int64).view(cupy.uint8).reshape(shape)
    if fmt != "e2m1":
        codes &= 0xBF  # exponent below 15: no NaN codes
    scales = (rng.integers(118, 126, (e_num, n, k // 32), dtype=cupy.int32)).astype(cupy.uint8)
    cupy.get_default_memory_pool().free_all_blocks()  # the generator's temporaries, before a peer allocates
    return mxrt.MXArray(codes, scales, fmt, 32, 2, (e_num, n, k), "rceil")


def moe_cell(w, t: int, top_k: int, bs: int, gate: bool):
    """One MoE decode cell on ``w [E, n, k]``: T = ``t`` tokens routed top-k (seeded by t), the layout of blocks of
    ``bs`` slots, the MX activations (``[t, k]`` for gate_up, ``[t * top_k, k]`` for down), the call's keywords, the
    routing ``ids [t, top_k]`` and the bytes the bench counts (the touched experts' weights and scales, the tokens,
    the bf16 output)."""
    import cupy

    import mxrt

    e_num, n, k = w.shape
    g = np.random.default_rng(t)
    ids = np.stack([g.choice(e_num, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    layout = tuple(cupy.asarray(v) for v in mxrt.moe_align_block_size(ids, bs, e_num))
    rows_x = t if gate else t * top_k
    x = mxrt.quantize_mx(cupy.random.default_rng(2).standard_normal((rows_x, k), dtype=cupy.float32))
    kw = dict(top_k=top_k, block_size=bs, a_div=top_k if gate else 1)
    nbytes = np.unique(ids).size * n * (w.data.shape[2] + k // 32) + x.data.nbytes + x.scales.nbytes
    return x, layout, kw, ids, nbytes + 2 * t * top_k * n


def bench_moe(args, core, copy_bw, dev) -> int:
    """mxrt.moe_gemm_mx against torch._grouped_mm (bf16) on the same routing; bandwidth on the touched experts'
    bytes (the weights of the experts the routing reaches, their scales, the tokens)."""
    import cupy
    import torch

    import mxrt

    e_num, top_k, bs = 64, 8, 16
    rows = []
    for gemm, (n, k, gate) in MOE_GEMMS.items():
        for fmt in args.fmts.split(","):
            w = moe_weights(e_num, n, k, fmt)
            wb = torch.randn(e_num, n, k, device="cuda", dtype=torch.bfloat16)
            for t in [int(v) for v in args.m.split(",")]:
                x, (s_ids, eids, ntpp), kw, ids, nbytes = moe_cell(w, t, top_k, bs, gate)
                rows_x = x.shape[0]
                t_mx, how = core.time_cupy([lambda x=x, w=w, s=s_ids, b=eids, p=ntpp, kw=kw: mxrt.moe_gemm_mx(
                    x, w, s, b, p, **kw)], 7, log=print)  # fmt: skip
                touched = np.unique(ids)
                # torch peer: the routed slots sorted by expert, one bf16 grouped GEMM over all E experts
                flat = ids.reshape(-1)
                order = np.argsort(flat, kind="stable")
                rows_src = order // top_k if gate else order
                xs = torch.randn(rows_x, k, device="cuda", dtype=torch.bfloat16)[torch.from_numpy(rows_src).cuda()]
                offs = torch.from_numpy(np.cumsum(np.bincount(flat, minlength=e_num)).astype(np.int32)).cuda()
                try:
                    t_tc, _ = core.time_torch([lambda xs=xs, wb=wb, offs=offs: torch._grouped_mm(
                        xs, wb.transpose(-2, -1), offs=offs)], 7, log=print)  # fmt: skip
                except Exception as ex:  # no _grouped_mm in this torch
                    print(f"    torch._grouped_mm: {type(ex).__name__}: {str(ex)[:100]}")
                    t_tc = float("nan")
                row = dict(gemm=gemm, fmt=fmt, t=t, n=n, k=k, experts=int(touched.size), mxrt_us=t_mx * 1e6,
                           tbps=nbytes / t_mx / 1e12, copy_frac=nbytes / t_mx / copy_bw, torch_us=t_tc * 1e6,
                           speedup=t_tc / t_mx, method=how)  # fmt: skip
                if args.eager:  # plain calls, back to back: the host's time per call where it exceeds the kernel
                    row["mxrt_eager_us"] = 1e6 * core.wall_per_call(
                        lambda x=x, w=w, s=s_ids, b=eids, p=ntpp, kw=kw: mxrt.moe_gemm_mx(x, w, s, b, p, **kw),
                        core.cupy_sync,
                    )
                    row["torch_eager_us"] = 1e6 * core.wall_per_call(
                        lambda xs=xs, wb=wb, offs=offs: torch._grouped_mm(xs, wb.transpose(-2, -1), offs=offs),
                        torch.cuda.synchronize,
                    )
                    print(f"    eager: mxrt {row['mxrt_eager_us']:.1f} us, torch {row['torch_eager_us']:.1f} us")
                rows.append(row)
                print(f"moe {gemm:7s} {fmt} T={t:2d} ({touched.size:3d} experts): mxrt {t_mx * 1e6:7.1f} us "
                      f"({row['tbps']:.2f} TB/s on touched bytes, {row['copy_frac']:.0%} copy) | torch._grouped_mm "
                      f"bf16 {t_tc * 1e6:7.1f} us | {row['speedup']:.2f}x")  # fmt: skip
            del w, wb
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
    print("| gemm | weights | T | experts touched | mxrt us | TB/s (touched) | % copy | torch._grouped_mm bf16 us "
          "| speedup |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['gemm']} | {'MXFP8' if r['fmt'] == 'e4m3' else 'MXFP4'} | {r['t']} | {r['experts']} | "
              f"{r['mxrt_us']:.1f} | {r['tbps']:.2f} | {r['copy_frac']:.0%} | {r['torch_us']:.1f} | "
              f"{r['speedup']:.2f}x |")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "copy_bw": copy_bw, "moe_rows": rows}, f, indent=1)
    return 0


def markdown(rows) -> str:
    """The RESULTS.md table: one line per cell and weight format (the path that served it; the other decode path
    forced on the same cell)."""
    head = ("| model | gemm | TP | M | N | K | weights | path | mxrt us | TB/s | % copy | % same-size copy | "
            "cuBLAS bf16 us | speedup | other decode path us |")  # fmt: skip
    lines = [head, "|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    short = {"sm90_decode": "dec", "sm90_decode_wg": "wg"}

    def fmt(v, spec: str, unit: str = "") -> str:  # "-": not measured (--no-peers)
        return "-" if v is None else format(v, spec) + unit

    for r in rows:
        lines.append(
            f"| {r['model']} | {r['gemm']} | {r['tp']} | {r['m']} | {r['n']} | {r['k']} | "
            f"{'MXFP8' if r['fmt'] == 'e4m3' else 'MXFP4'} | {short.get(r['path'], r['path'])} | {r['mxrt_us']:.1f} | "
            f"{r['mxrt_tbps']:.2f} | {r['copy_frac']:.0%} | {fmt(r['same_copy_frac'], '.0%')} | "
            f"{fmt(r['torch_us'], '.1f')} | {fmt(r['speedup'], '.2f', 'x')} | {fmt(r.get('other_us'), '.1f')} |"
        )
    return "\n".join(lines)


def _plot(rows, path, dev):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for fmt, style in (("e4m3", "o-"), ("e2m1", "s-")):
        sel = [r for r in rows if r["fmt"] == fmt]
        ms = sorted({r["m"] for r in sel})
        ax.plot(ms, [np.median([r["mxrt_tbps"] for r in sel if r["m"] == m]) for m in ms], style,
                label=f"mxrt {'MXFP8' if fmt == 'e4m3' else 'MXFP4'} weights")  # fmt: skip
    sel = [r for r in rows if r["fmt"] == "e4m3"]
    ms = sorted({r["m"] for r in sel})
    ax.plot(ms, [np.median([r["torch_tbps"] for r in sel if r["m"] == m]) for m in ms], "k^--", label="cuBLAS bf16")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M (tokens)")
    ax.set_ylabel("TB/s of bytes read (median over cells)")
    ax.set_title(f"decode GEMM bandwidth, {dev}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
