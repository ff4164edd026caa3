"""Same-run A/B of the dense Hopper GEMM (``gemm_mx`` on ``sm90_wgmma``) and the grouped Hopper kernel with one
group on the same operands (``grouped_gemm_mx``, lens = [m]): run it once per kernel source, e.g. the tree before
the tile factoring under ``MXRT_KERNELS_SRC`` and the current one, alternating (H100 instances differ by ~10%, so
only same-run numbers compare). CUDA-graph replays (mxrt.bench.core), median of --reps.

    python benchmarks/ab_sm90_dense.py --label new [--reps 5]
"""

from __future__ import annotations

# ruff: noqa: B023  (the timed lambdas run inside the loop iteration that defines them)
import argparse
import dataclasses
import sys

import cupy

import mxrt
from mxrt.bench import core

SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 7168, 2048)]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    quiet = lambda *_a, **_k: None  # noqa: E731
    for m, n, k in SHAPES:
        w = cupy.random.standard_normal((n, k), dtype=cupy.float32)
        qa = mxrt.quantize_mx(cupy.random.standard_normal((m, k), dtype=cupy.float32))
        qb = mxrt.quantize_mx(w)
        b3 = dict(data=qb.data.reshape(1, n, k), scales=qb.scales.reshape(1, n, -1), shape=(1, n, k), axis=2)
        qb3 = dataclasses.replace(qb, **b3)  # one group: the same codes
        out = cupy.empty((m, n), cupy.uint16)
        lens = cupy.asarray([m], cupy.int32)
        flops = 2 * m * n * k
        td, _ = core.time_cupy([lambda: mxrt.gemm_mx(qa, qb, out=out)], args.reps, log=quiet)
        tg, _ = core.time_cupy([lambda: mxrt.grouped_gemm_mx(qa, qb3, lens, out=out)], args.reps, log=quiet)
        print(
            f"{args.label} {m}x{n}x{k} bf16: dense {flops / td / 1e12:.0f} TFLOP/s ({td * 1e3:.3f} ms), "
            f"grouped G=1 {flops / tg / 1e12:.0f} TFLOP/s ({tg * 1e3:.3f} ms)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
