"""Run every collected test id in its own pytest process, several at a time, each under a timeout: a GPU file's
ids spread over a device machine's cores (the builds compile in parallel), and a hanging test shows as a time-out
instead of stopping the run. Prints the count per outcome and every id that did not pass.

    python benchmarks/par_pytest.py tests/test_gpu_moe_gemm.py [-k EXPR] [--par 16] [--timeout 300]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-k", default=None)
    ap.add_argument("--par", type=int, default=12)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    sel = ["-k", args.k] if args.k else []
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    out = subprocess.run([*base, "--collect-only", "-m", "gpu", *sel, *args.files], capture_output=True, text=True)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    print(f"{len(ids)} test ids", flush=True)

    def one(test_id: str) -> tuple[str, str]:
        try:
            r = subprocess.run([*base, test_id], capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "timeout", test_id
        if r.returncode == 0:
            return "passed", test_id
        tail = [line for line in r.stdout.splitlines() if line.startswith(("E ", "FAILED", "ERROR"))][:3]
        return f"rc {r.returncode}", test_id + ("\n    " + "\n    ".join(tail) if tail else "")

    with ThreadPoolExecutor(args.par) as pool:
        results = list(pool.map(one, ids))
    print(dict(collections.Counter(k for k, _ in results)))
    for kind, what in results:
        if kind != "passed":
            print(kind, what)
    return 0 if all(k == "passed" for k, _ in results) and ids else 1


if __name__ == "__main__":
    sys.exit(main())
