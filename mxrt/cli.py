"""Command line: ``mxrt check | info``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence

from . import __version__
from ._backend import GPU_OPS, gpu_available
from .checks import CheckRow, run_all


def _best_backend() -> str:
    return "gpu" if any(gpu_available(op) for op in GPU_OPS) else "numpy"


def _table(rows: list[CheckRow]) -> str:
    head = ("op", "case", "backend", "metric", "value", "result")
    cells = [head] + [(r.op, r.case, r.backend, r.metric, r.value, r.result) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    backend = _best_backend()
    rows = run_all(backend)
    print(_table(rows))
    failed = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"version": __version__, "backend": backend, "rows": [r.as_dict() for r in rows]}, fh, indent=1)
    return 1 if failed else 0


def info_lines() -> list[str]:
    import ml_dtypes
    import numpy as np

    lines = [
        f"mxrt       {__version__}",
        f"python     {platform.python_version()} ({platform.machine()})",
        f"numpy      {np.__version__}",
        f"ml_dtypes  {ml_dtypes.__version__}",
        f"backend    {_best_backend()} (GPU ops: {', '.join(sorted(GPU_OPS)) or 'none'})",
    ]
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    print("\n".join(info_lines()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mxrt", description="OCP MX numerics, layouts and kernels")
    p.add_argument("--version", action="version", version=f"mxrt {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run the correctness suite on the best available backend")
    c.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    c.set_defaults(func=cmd_check)
    i = sub.add_parser("info", help="versions, backend and device")
    i.set_defaults(func=cmd_info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
