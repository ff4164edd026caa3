"""Print ``metric value`` lines from ``ncu --csv --metrics ...`` output on stdin (one kernel launch)."""

import csv
import sys

rows = list(csv.reader(line for line in sys.stdin if line.startswith('"')))
if not rows:
    print("  (no ncu rows)")
for r in rows[1:]:
    d = dict(zip(rows[0], r, strict=False))
    print(f"  {d.get('Metric Name', '?'):<90} {d.get('Metric Value', '?')}")
