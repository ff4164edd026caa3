"""Top SASS instructions of one ncu report by warp-stall samples (run on the device after
`ncu --set full --import-source yes -o OUT ...`):  python benchmarks/ncu_source_top.py OUT.ncu-rep [N]"""

import csv
import io
import subprocess
import sys

rep, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
text = subprocess.run(
    ["ncu", "--import", rep, "--page", "source", "--csv", "--print-source", "sass"], capture_output=True, text=True
).stdout
text = text[text.index('"') :]
if text.startswith('"Kernel Name"'):  # newer ncu: a kernel-name line before the header
    text = text[text.index("\n") + 1 :]
rows = list(csv.DictReader(io.StringIO(text)))
keys = [k for k in rows[0] if k]
key = next((k for k in keys if k.startswith("Warp Stall Sampling (All")), None)
if key is None:
    print("columns:", keys, "\nfirst lines:", text[:600])
    key = next(k for k in keys if "Sampl" in k)
extra = [k for k in rows[0] if k and k.startswith("Warp Stall Sampling (Not")]
total = sum(float(r[key] or 0) for r in rows)
print(f"{len(rows)} SASS lines, {total:.0f} stall samples ({key})")
for r in sorted(rows, key=lambda r: -float(r[key] or 0))[:top]:
    print(f"{float(r[key] or 0) / total * 100:5.1f}%  {r.get('Address', '')}  {r.get('Source', '')[:110]}")
