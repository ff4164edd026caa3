"""MoE decode builds (session 20): `mxrt.moe_gemm_mx` on `bench_decode.py --moe`'s cells (DeepSeek-V3 gate_up / down, 64
local experts, top-8, blocks of --bs slots) with each (kw, stages, rt) of mxrt.ops.moe_gemm's defaults for the block's
MT and the weight format set in turn; CUDA-graph replays (mxrt.bench.core.time_cupy), the percentage of copy bandwidth
on the touched bytes as the bench counts it, and each build's result against the first's (calc_diff: a different K split
sums in another order).

python3 benchmarks/dev_moe_sweep.py [--configs kw:stages:rt,...] [--t 1,4,16,64] [--fmts e4m3,e2m1] [--bs 16]
    [--gemms gate_up,down] [--extra=-DNAME=V,...] [--mt N]   (--extra: compile options added to every build, an A/B
    of a define; --mt: the token tiles per CTA, the grid's chunks covering the rest of each block)
"""

import argparse

import cupy
import numpy as np
from bench_decode import MOE_GEMMS, moe_cell, moe_weights  # benchmarks/ (this script's folder)
from dev_moe_trace import options_build

import mxrt
from mxrt.bench import core
from mxrt.ops import gemm_decode_kernels as K
from mxrt.ops import moe_gemm

GEMMS = MOE_GEMMS
E, TOP_K = 64, 8


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="2:3:1,4:3:1,2:4:1,2:3:2,4:3:2,4:2:2,2:4:2,8:2:2,4:3:4,2:3:4")
    ap.add_argument("--t", default="1,4,16,64")
    ap.add_argument("--fmts", default="e4m3,e2m1")
    ap.add_argument("--bs", default="16", help="block sizes of the layout (MT = the token tiles that hold one)")
    ap.add_argument("--gemms", default="gate_up,down")
    ap.add_argument("--extra", default="", help="comma-separated compile options added to every build")
    ap.add_argument("--mt", type=int, default=0, help="token tiles per CTA whatever the block size (chunks cover it)")
    args = ap.parse_args()
    if args.mt:
        moe_gemm._mt = lambda block_size, numel=None, e=None: args.mt
    if args.extra:
        moe_gemm.build_with_smem = options_build([o for o in args.extra.split(",") if o], False)
    configs = [tuple(int(v) for v in c.split(":")) for c in args.configs.split(",")]
    copy_bw = core.copy_bandwidth(core.l2_bytes())["copy16 kernel"]
    for bs in [int(v) for v in args.bs.split(",")]:
        sweep(args, configs, copy_bw, bs)


def sweep(args, configs, copy_bw, bs) -> None:
    for gemm in args.gemms.split(","):
        n, k, gate = GEMMS[gemm]
        for fmt in args.fmts.split(","):
            w = moe_weights(E, n, k, fmt)
            for t in [int(v) for v in args.t.split(",")]:
                x, (s_ids, eids, ntpp), kw, _, nbytes = moe_cell(w, t, TOP_K, bs, gate)
                mt = moe_gemm._mt(bs, t * TOP_K, E)  # the op's MT for this cell
                line, ref = [], None
                for cfg in configs:
                    kwc, st, rt = cfg
                    smem = K.smem_bytes(K.E4M3, K.FMT_CODES[fmt], mt, kwc, st, rt)
                    if not K.valid_rt(mt, rt) or smem > K.DECODE_SMEM_MAX:
                        line.append(f"{cfg}: n/a")
                        continue
                    (moe_gemm.MOE_DEFAULT_E2M1 if fmt == "e2m1" else moe_gemm.MOE_DEFAULT)[mt] = (cfg, cfg)
                    if fmt == "e2m1" and mt in moe_gemm.MOE_FEW_E2M1:  # the few-block builds (T 1) too
                        moe_gemm.MOE_FEW_E2M1[mt] = (cfg, cfg)
                    if fmt != "e2m1" and mt in moe_gemm.MOE_CHUNKED_FP8_SHORT_K:  # and the chunked fp8 one
                        moe_gemm.MOE_CHUNKED_FP8_SHORT_K[mt] = cfg

                    def call(x=x, w=w, s=s_ids, b=eids, p=ntpp, kw=kw):
                        return mxrt.moe_gemm_mx(x, w, s, b, p, **kw)

                    out = call()
                    got = cupy.asnumpy(out).view(np.uint16).astype(np.uint32) << 16
                    got = got.view(np.float32).astype(np.float64)
                    diff = 0.0 if ref is None else float(mxrt.calc_diff(got, ref))
                    ref = got if ref is None else ref
                    t_s, _ = core.time_cupy([call], 7, log=lambda s: None)
                    line.append(f"{cfg}: {t_s * 1e6:7.1f} us {nbytes / t_s / copy_bw:4.0%} d{diff:.0e}")
                print(f"bs {bs:2d} {gemm:7s} {fmt} T={t:2d} | " + " | ".join(line), flush=True)
            del w
            cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
