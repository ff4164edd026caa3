"""Per-PC executed-instruction counts and stall samples of an ncu report, read offline (no GPU, no ncu binary):
`pip install ncu-report` (NVIDIA's report reader on PyPI), then

    python benchmarks/ncu_pc_counts.py REPORT.ncu-rep [OUT.txt] [UNIT]

REPORT from `ncu --set full --import-source yes -o REPORT ...` (benchmarks/gpu_s17.sh `src`). Prints the kernel's
headline metrics and stall mix, then the SASS grouped by execution count: code that runs once per warp and tile
shares one count, so with UNIT (the warp-tiles of the launch, e.g. tiles x warps per CTA) each class reads as
instructions per warp and tile (session 17 found the grouped quantizers' load waits and their 515-instruction tile
this way). OUT gets every PC: offset, count, samples, SASS.
"""

import sys

import ncu_report

rep = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else None
unit = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
a = ncu_report.load_report(rep).range_by_idx(0).action_by_idx(0)


def value(name: str) -> float:
    m = a.metric_by_name(name)
    return float("nan") if m is None else m.as_double()


def per_pc(name: str) -> dict[int, float]:
    m = a.metric_by_name(name)
    ids = m.correlation_ids()
    return {ids.as_uint64(i): m.as_double(i) for i in range(m.num_instances())}


print(a.name())
for n in (
    "gpu__time_duration.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "launch__registers_per_thread",
    "launch__grid_size",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
):
    print(f"  {n:60s} {value(n):,.2f}")
stalls = {}
for n in a.metric_names():
    if n.startswith("smsp__pcsamp_warps_issue_stalled_") and not n.endswith("not_issued"):
        stalls[n[33:]] = sum(per_pc(n).values())
total = sum(stalls.values()) or 1.0
print(
    "  stalls:", ", ".join(f"{k} {v / total * 100:.0f}%" for k, v in sorted(stalls.items(), key=lambda kv: -kv[1])[:8])
)
ex, st = per_pc("inst_executed"), per_pc("smsp__pcsamp_sample_count")
classes: dict[float, int] = {}
for c in ex.values():
    classes[c] = classes.get(c, 0) + 1
print("  count classes (instructions x count" + (", per warp-tile" if unit else "") + "):")
for c, n in sorted(classes.items(), key=lambda kv: -kv[0] * kv[1])[:12]:
    extra = f"  {n * c / unit:7.1f} per warp-tile" if unit else ""
    print(f"    {int(c):>12,} x {n:4d} = {int(c * n):>14,}{extra}")
if out:
    base = min(ex)
    with open(out, "w") as f:
        for pc in sorted(ex):
            f.write(f"{pc - base:6x} {ex[pc]:12.0f} {st.get(pc, 0):6.0f}  {a.sass_by_pc(pc)}\n")
