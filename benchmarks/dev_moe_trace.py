"""Where an MoE decode call's time goes (session 24): a CTA timeline of `gemm_mx_decode_sm90_moe` built with
DEC_TRACE (gemm_decode_sm90.h: %globaltimer per CTA at entry, setup done, warp 0's first stage, warp 0's mainloop
end, every warp's end, the stores' end; the SM id), on bench_decode.py --moe's cells, and the op's time with and
without its zeroing (CUDA-graph replays, mxrt.bench.core.time_cupy).

Per cell: the kernel's span from the first CTA's entry to the last CTA's end, the per-CTA phases (median / p90, us),
how many CTAs started in the first microsecond, the resident CTAs per SM over the span, and the weight bytes consumed
per tenth of the span as a share of the copy bandwidth (a CTA's bytes spread evenly over its mainloop).

python3 benchmarks/dev_moe_trace.py [--t 1,16] [--fmts e4m3,e2m1] [--gemms gate_up,down] [--bs 16] [--extra -DX=1]
"""

import argparse

import cupy
import numpy as np
from bench_decode import MOE_GEMMS, moe_cell, moe_weights  # benchmarks/ (this script's folder)

import mxrt
from mxrt.api import moe_gemm as api_moe
from mxrt.bench import core
from mxrt.ops import moe_gemm
from mxrt.runtime import compiler, source

E, TOP_K = 64, 8
MODULES: list = []


class _Skip:
    """A call that does nothing (the call plan's memset, skipped to time the GEMM alone)."""

    def __call__(self, *args) -> None:
        pass


def options_build(extra, trace):
    """moe_gemm.build_with_smem with DEC_TRACE (``trace``) and ``extra`` options added; keeps each module."""

    def build(spec, d, arch, smem):
        code = source.stamped_source(spec.file, arch.target)
        options = (*compiler.compile_options(arch, d), *(["-DDEC_TRACE=1"] if trace else []), *extra)
        module = cupy.RawModule(code=code, options=options)
        kernel = module.get_function(spec.symbol)
        kernel.max_dynamic_shared_size_bytes = smem
        MODULES.append(module)
        return kernel

    return build


def summarise(tr, wbytes, copy_bw):
    tr = tr.astype(np.int64)
    ncta = int(np.count_nonzero(tr[:, 0]))
    live = tr[:, 6] > 0
    t = tr[live]
    t0 = t[:, 0].min()
    span = (t[:, 6].max() - t0) / 1e3
    ph = {"setup": t[:, 2] - t[:, 0], "first": t[:, 3] - t[:, 2], "main": t[:, 4] - t[:, 3],
          "kwait": t[:, 5] - t[:, 4], "store": t[:, 6] - t[:, 5], "life": t[:, 6] - t[:, 0]}  # fmt: skip
    parts = [f"{k} {np.median(v) / 1e3:.2f}/{np.percentile(v, 90) / 1e3:.2f}" for k, v in ph.items()]
    start_us = (t[:, 0] - t0) / 1e3
    sms = int(t[:, 1].max()) + 1
    # resident CTAs per SM, averaged over the span; share of the span with >= 1 CTA on an SM
    grid = np.linspace(0, span, 200)
    res = np.zeros((sms, grid.size))
    for row in t:
        a, b = (row[0] - t0) / 1e3, (row[6] - t0) / 1e3
        res[int(row[1])] += (grid >= a) & (grid < b)
    occ = res.mean()
    busy = (res > 0).mean()
    # bytes consumed per tenth of the span (each CTA's weight bytes spread over [first stage, mainloop end])
    bins = np.zeros(10)
    edges = np.linspace(0, span, 11)
    per = wbytes / t.shape[0]
    for row in t:
        a, b = (row[3] - t0) / 1e3, max((row[4] - t0) / 1e3, (row[3] - t0) / 1e3 + 1e-3)
        ov = np.clip(np.minimum(b, edges[1:]) - np.maximum(a, edges[:-1]), 0, None)
        bins += per * ov / (b - a)
    rate = bins / (span / 10 * 1e-6) / copy_bw
    cyc = np.median(t[:, 7]) if t.shape[0] else 0
    return (
        f"span {span:.1f} us, {t.shape[0]} live of {ncta} CTAs on {sms} SMs, {np.mean(start_us < 1.0):.0%} started "
        f"in the first us, last start {start_us.max():.1f} us; CTAs resident per SM {occ:.1f}, SMs busy {busy:.0%}\n"
        f"    phases us median/p90: {', '.join(parts)}; main {cyc:.0f} cycles median\n"
        f"    copy share per tenth of the span: {' '.join(f'{r:.0%}' for r in rate)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--t", default="1,16")
    ap.add_argument("--fmts", default="e4m3,e2m1")
    ap.add_argument("--gemms", default="gate_up,down")
    ap.add_argument("--bs", type=int, default=16)
    ap.add_argument("--extra", default="", help="comma-separated extra compile options (an A/B of a define)")
    ap.add_argument("--no-trace", action="store_true", help="time the builds without DEC_TRACE")
    args = ap.parse_args()
    extra = [o for o in args.extra.split(",") if o]
    if extra or not args.no_trace:
        moe_gemm.build_with_smem = options_build(extra, not args.no_trace)
    copy_bw = core.copy_bandwidth(core.l2_bytes())["copy16 kernel"]
    for gemm in args.gemms.split(","):
        n, k, gate = MOE_GEMMS[gemm]
        for fmt in args.fmts.split(","):
            w = moe_weights(E, n, k, fmt)
            for t in [int(v) for v in args.t.split(",")]:
                x, (s_ids, eids, ntpp), kw, ids, nbytes = moe_cell(w, t, TOP_K, args.bs, gate)
                api_moe.clear_plans()
                MODULES.clear()

                def call(x=x, w=w, s=s_ids, b=eids, p=ntpp, kw=kw):
                    return mxrt.moe_gemm_mx(x, w, s, b, p, **kw)

                call()
                call()  # the second call keeps the plan
                t_op, _ = core.time_cupy([call], 7, log=lambda s: None)
                plans = list(api_moe._PLANS.values())
                t_k = float("nan")
                if len(plans) == 1:
                    plans[0][0]._memset = _Skip()  # no zeroing: the GEMM alone
                    t_k, _ = core.time_cupy([call], 7, log=lambda s: None)
                head = f"{gemm:7s} {fmt} T={t:2d}: op {t_op * 1e6:6.1f} us ({nbytes / t_op / copy_bw:.0%} of copy), "
                head += f"kernel alone {t_k * 1e6:6.1f} us"
                if args.no_trace or not MODULES:
                    print(head, flush=True)
                    continue
                mem = MODULES[-1].get_global("dec_trace")
                tr = cupy.ndarray((65536, 8), cupy.uint64, mem)
                tr.fill(0)
                call()
                cupy.cuda.get_current_stream().synchronize()
                host = cupy.asnumpy(tr)
                wbytes = np.unique(ids).size * n * w.data.shape[2]
                print(head + "\n    " + summarise(host, wbytes, copy_bw), flush=True)
            del w
            cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
