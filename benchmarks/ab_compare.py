"""Same-machine A/B of two ``bench_decode.py --json`` runs: per M (and path), old time over new time (min / median /
max over the cells both runs hold), and each new run against the other to show the noise.

    python3 benchmarks/ab_compare.py NEW.json OLD.json [NEW2.json]
"""

from __future__ import annotations

import json
import statistics
import sys


def _rows(path: str) -> dict:
    with open(path) as f:
        return {(r["m"], r["n"], r["k"], r["fmt"]): r for r in json.load(f)["rows"]}


def compare(new: dict, old: dict, label: str) -> None:
    by_m: dict = {}
    for key, r in new.items():
        if key in old:
            by_m.setdefault((key[0], key[3], r["path"]), []).append(old[key]["mxrt_us"] / r["mxrt_us"])
    print(f"{label}: old / new time per M (cells, min, median, max)")
    for (m, fmt, path), v in sorted(by_m.items()):
        print(f"  M={m:2d} {fmt} {path:15s} {len(v):3d}  {min(v):.3f}  {statistics.median(v):.3f}  {max(v):.3f}")


def main(argv: list[str]) -> int:
    new, old = _rows(argv[1]), _rows(argv[2])
    compare(new, old, f"{argv[1]} vs {argv[2]}")
    if len(argv) > 3:
        compare(new, _rows(argv[3]), f"noise: {argv[1]} vs {argv[3]} (1.000 = same)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
