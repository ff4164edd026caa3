"""Same-run A/B of the Hopper grouped wgrad's CTA tile: bench_grouped_gemm's wgrad rows (bf16 out) with the tile
rule of mxrt/ops/grouped_gemm_sm90.py (256 x 128 past 128 rows) and with the 128 x 128 tile forced, alternating.

    python benchmarks/ab_sm90_wgrad_tile.py [--rounds 2] [--shapes gpt-oss,deepseek] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import bench_grouped_gemm

from mxrt.ops import grouped_gemm_kernels, grouped_gemm_sm90

RULE = grouped_gemm_sm90.tile


def medium(p):
    return grouped_gemm_kernels.SM90_GROUPED_MEDIUM if p.kind == "wgrad" else RULE(p)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default="gpt-oss,deepseek")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for r in range(args.rounds):
        for name, fn in (("rule", RULE), ("128x128", medium)):
            grouped_gemm_sm90.tile = fn
            path = f"/tmp/ab_{name}_{r}.json"
            print(f"=== round {r} tile {name}")
            bench_grouped_gemm.main(["--passes", "wgrad", "--shapes", args.shapes, "--reps", "3", "--json", path])
            with open(path) as fh:
                rows += [dict(x, tile=name, round=r) for x in json.load(fh)["rows"]]
    grouped_gemm_sm90.tile = RULE
    key = lambda x: (x["model"], x["gemm"], x["B"], x["M"], x["split"])  # noqa: E731
    best: dict = {}
    for x in rows:
        if "mxrt_tflops" in x:
            k = (key(x), x["tile"])
            best[k] = max(best.get(k, 0.0), x["mxrt_tflops"])
    print("| model | gemm | B | M | split | rule TFLOP/s | 128x128 TFLOP/s | 128x128 / rule |")
    print("|---|---|---|---|---|---|---|---|")
    for k in sorted({k for k, _ in best}):
        a, b = best.get((k, "rule"), float("nan")), best.get((k, "128x128"), float("nan"))
        print("| " + " | ".join(map(str, k)) + f" | {a:.1f} | {b:.1f} | {b / a:.2f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
