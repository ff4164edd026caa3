"""Warm CuPy's disk cache on a fresh GPU machine: build every variant of the named kernel specs for the current
device in parallel processes (NVRTC builds one variant per process), so the tests and benchmarks that follow load
them instead of compiling one after another (the sm90 GEMMs take ~10-20 s each).

    python benchmarks/prebuild.py gemm_mx_grouped_sm90 gemm_mx_sm90 [--jobs 16]
    python benchmarks/prebuild.py gemm_mx_splitk_reduce --tune-shapes 1x7168x4096,8x7168x4096 --tune-fmts e2m1

``--tune-shapes`` adds every ``sm90_decode`` build that ``mxrt tune gemm --fmts ...`` times on those cells (bf16 out
for split 1, the fp32 slices of a split), which the spec's variants do not all hold (e2m1 weights at every ring).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def _build(item: tuple[str, int | tuple]) -> str:
    from mxrt.ops.kernels import ALL_SPECS
    from mxrt.runtime.arch import get_arch
    from mxrt.runtime.compiler import build

    symbol, i = item  # a variant's index, or the defines themselves
    spec = next(s for s in ALL_SPECS if s.symbol == symbol)
    t = time.perf_counter()
    try:
        build(spec, spec.variants[i] if isinstance(i, int) else i, get_arch())
    except Exception as e:
        return f"{symbol}[{i}] FAILED {type(e).__name__}: {str(e)[:300]}"
    return f"{symbol}[{i}] {time.perf_counter() - t:.1f} s"


def tune_builds(shapes: str, fmts: str, sms: int) -> list[tuple]:
    """The defines of every sm90_decode candidate of ``mxrt tune gemm`` on ``shapes`` x ``fmts`` (e4m3 tokens)."""
    from mxrt.bench import core, tune
    from mxrt.codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
    from mxrt.ops import decode_table
    from mxrt.ops import gemm_decode_kernels as K

    fa, out = FMT_CODES[tune.TOKEN_FMT], GEMM_OUT_DTYPE_CODES
    builds = {}
    for m, n, k in core.parse_shapes(shapes, 3):
        mb = decode_table.bucket(m)
        for w in tune.parse_fmts(fmts):
            for c in tune.decode_candidates(mb, n, k, sms, w):
                od = out["bfloat16"] if c.split == 1 else out["float32"]  # split > 1: the fp32 slices
                d = K.dense_variant(fa, FMT_CODES[w], 0, c.kw, decode_table.mt_of(mb), od, c.stages, c.rt)
                builds[d] = None
    return list(builds)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("symbols", nargs="+")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--tune-shapes", default="", help="MxNxK list: the sm90_decode builds the tuner times there")
    ap.add_argument("--tune-fmts", default="e4m3", help="weight formats of --tune-shapes")
    args = ap.parse_args(argv)
    from mxrt.ops.kernels import ALL_SPECS
    from mxrt.runtime.arch import get_arch

    target = get_arch().target
    work = [
        (s.symbol, i)
        for s in ALL_SPECS
        if s.symbol in args.symbols and s.supports(target)
        for i in range(len(s.variants))
    ]
    if args.tune_shapes:
        work += [("gemm_mx_decode_sm90", d) for d in tune_builds(args.tune_shapes, args.tune_fmts, get_arch().num_cus)]
    t0 = time.perf_counter()
    # spawn, not fork: the parent has initialised CUDA (get_arch), a forked child cannot use it (call 1: every
    # build failed at once)
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        lines = list(pool.map(_build, work))
    bad = [x for x in lines if "FAILED" in x]
    print(f"prebuild: {len(work)} builds for {target} in {time.perf_counter() - t0:.0f} s, {len(bad)} failed")
    for x in bad:
        print(x)
    return int(bool(bad))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
