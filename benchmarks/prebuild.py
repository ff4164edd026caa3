"""Warm CuPy's disk cache on a fresh GPU machine: build every variant of the named kernel specs for the current
device in parallel processes (NVRTC builds one variant per process), so the tests and benchmarks that follow load
them instead of compiling one after another (the sm90 GEMMs take ~10-20 s each).

    python benchmarks/prebuild.py gemm_mx_grouped_sm90 gemm_mx_sm90 [--jobs 16]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def _build(item: tuple[str, int]) -> str:
    from mxrt.ops.kernels import ALL_SPECS
    from mxrt.runtime.arch import get_arch
    from mxrt.runtime.compiler import build

    symbol, i = item
    spec = next(s for s in ALL_SPECS if s.symbol == symbol)
    t = time.perf_counter()
    try:
        build(spec, spec.variants[i], get_arch())
    except Exception as e:
        return f"{symbol}[{i}] FAILED {type(e).__name__}: {str(e)[:300]}"
    return f"{symbol}[{i}] {time.perf_counter() - t:.1f} s"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("symbols", nargs="+")
    ap.add_argument("--jobs", type=int, default=16)
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
