"""Achieved bandwidth of the grouped GPU quantizers against a device-to-device copy in the same run (not a test).

Shapes: MoE activations of the seeds (DeepSeek-V3 hidden 7168 / intermediate 2048, gpt-oss 2880), total_m =
4096 * 8 routed tokens split unbalanced (exponential weights, a few empty experts) over G = 8 and 32 experts;
per-group weights [G, n, k] for the dual quantizer. Bytes counted: input read once + every output byte written
(codes, scales, padding rows, offsets). ``quantize_mx_grouped`` is timed twice: called from Python per
iteration ("eager"), and as a replayed CUDA graph of the same call ("graph", kernel time without the Python
and launch overhead). ``python benchmarks/bench_grouped_quant.py [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json

import cupy
import numpy as np
from _timing import timed

import mxrt
from mxrt.ops import grouped


def split(total: int, num_groups: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.exponential(1.0, num_groups)
    w[rng.choice(num_groups, num_groups // 8, replace=False)] = 0  # a few experts get no token
    lens = np.floor(w / w.sum() * total).astype(np.int64)
    lens[int(np.argmax(w))] += total - lens.sum()
    return lens


def random_input(shape: tuple[int, ...]):
    """Normal values generated on the device: bfloat16 where this CuPy has it, else float16 (same 2 bytes)."""
    x = cupy.random.standard_normal(shape, dtype=cupy.float32)
    try:
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16), "bf16"
    except (ImportError, TypeError, ValueError, NotImplementedError):
        return x.astype(cupy.float16), "fp16"


def nbytes(*arrays) -> int:
    return sum(int(a.nbytes) for a in arrays if a is not None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--fmt", default="e4m3")
    p.add_argument("--tokens", type=int, default=4096 * 8)
    p.add_argument("--json", default="")
    args = p.parse_args()
    cupy.random.seed(0)
    default_unroll = grouped.ROWWISE_UNROLL
    src = cupy.empty(512 * 2**20, cupy.uint8)
    dst = cupy.empty_like(src)
    t_copy = timed(lambda: dst.__setitem__(slice(None), src))
    copy_bw = 2 * src.nbytes / t_copy
    rows = [("d2d copy 512 MiB", "", t_copy, 2 * src.nbytes)]

    total = args.tokens
    for k in (7168, 2048, 2880):
        x, dname = random_input((total, k))
        for num_groups in (8, 32):
            lens = cupy.asarray(split(total, num_groups, seed=k + num_groups))
            for colwise, unroll in ((False, 1), (False, 2), (True, 0)):
                if unroll:
                    grouped.ROWWISE_UNROLL = unroll
                out = mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=colwise)
                col = out.col
                moved = nbytes(x, out.row.data, out.row.scales, out.offs_pad_row)
                moved += nbytes(col.data, col.scales, out.offs_pad_col) if col is not None else 0
                name = "grouped row+col" if colwise else f"grouped row u{unroll}"
                shape = f"T={total} k={k} G={num_groups}"
                t_eager = timed(
                    lambda x=x, lens=lens, c=colwise: mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=c)
                )
                stream = cupy.cuda.Stream()
                with stream:
                    stream.begin_capture()
                    mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=colwise)
                    graph = stream.end_capture()
                with stream:
                    t_graph = timed(lambda g=graph, s=stream: g.launch(stream=s))
                rows.append((name + " eager", shape, t_eager, moved))
                rows.append((name + " graph", shape, t_graph, moved))
        del x
    grouped.ROWWISE_UNROLL = default_unroll

    for g, n, k in ((8, 4096, 7168), (8, 7168, 2048), (8, 5760, 2880)):
        w, dname = random_input((g, n, k))
        for b2 in (False, True):
            out = mxrt.quantize_mx_dual_grouped(w, args.fmt, block_2d=b2)
            moved = nbytes(w, out.row.data, out.row.scales, out.col.data, out.col.scales)
            t = timed(lambda w=w, b2=b2: mxrt.quantize_mx_dual_grouped(w, args.fmt, block_2d=b2))
            rows.append((f"dual_grouped {'2d' if b2 else '1d'}", f"G={g} n={n} k={k}", t, moved))
        del w

    print(f"device {mxrt.runtime.get_arch().name}, {dname} input -> {args.fmt} (RCEIL)")
    table = []
    for name, shape, t, moved in rows:
        bw = moved / t
        table.append({"kernel": name, "shape": shape, "us": t * 1e6, "tbps": bw / 1e12, "pct_copy": 100 * bw / copy_bw})
        print(f"{name:24s} {shape:22s} {t * 1e6:9.1f} us  {bw / 1e12:6.2f} TB/s  {100 * bw / copy_bw:5.1f}% of copy")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)


if __name__ == "__main__":
    main()
