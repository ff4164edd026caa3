"""Command line: ``mxrt check | info | compile-check | bench | tune``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence

from . import __version__, bench, runtime
from .api.dispatch import GPU_OPS
from .checks import CheckRow, run_all
from .errors import MxrtError


def _best_backend() -> str:
    return "gpu" if runtime.device_available() else "numpy"


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


def device_lines(compile_times: bool = False) -> list[str]:
    """The device, its Arch, and with ``compile_times`` the cold / warm build time of every GPU op's kernel."""
    from . import runtime
    from .ops import kernels

    if not runtime.device_available():
        lines = ["device     none (cupy or a GPU is missing)"]
        if compile_times:
            lines.append("compile    skipped: --compile times kernel builds on a GPU, and there is none here")
        return lines
    arch = runtime.get_arch()
    lines = [
        f"device     {arch.name} ({arch.vendor}, target {arch.target}{' from MXRT_ARCH' if arch.overridden else ''}, "
        f"wave {arch.wave_size}, {arch.num_cus} CUs/SMs, {arch.smem_per_block} B shared/block)"
    ]
    if compile_times:
        for op in sorted(kernels.DISPATCH):
            if not kernels.op_supports(op, arch.target):
                lines.append(f"compile    {op}: no kernel for {arch.target}")
                continue
            spec = kernels.select(op, arch.target)
            cold, warm = runtime.compile_times(spec, spec.variants[0], arch)
            lines.append(f"compile    {spec.symbol} {dict(spec.variants[0])}: cold {cold:.3f} s, warm {warm:.3f} s")
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    print("\n".join(info_lines() + device_lines(args.compile)))
    return 0


def cmd_compile_check(args: argparse.Namespace) -> int:
    from .ops import ALL_SPECS
    from .runtime.arch import normalize_target
    from .runtime.compile_check import run_compile_check, summarize, tools_missing

    try:
        targets = [normalize_target(t) for t in args.targets.split(",") if t.strip()]
    except MxrtError as e:
        print(f"mxrt compile-check: {e}", file=sys.stderr)
        return 2
    for t in targets:
        why = tools_missing(t)
        if why:
            print(f'mxrt compile-check: cannot build for {t}: {why}; install the extra: pip install ".[compilecheck]"',
                  file=sys.stderr)  # fmt: skip
            return 2
    reports = run_compile_check(targets, ALL_SPECS, jobs=args.jobs)
    rows = summarize(reports)
    head = ("kernel", "target", "builds", "failed", "registers", "spills", "scratch", "lds", "mma")
    cells = [head] + [
        (
            r["kernel"],
            r["target"],
            str(r["builds"]),
            str(r["failed"]),
            " ".join(f"{k}={v}" for k, v in r["registers"].items()),
            str(r["spills"]),
            str(r["scratch"]),
            str(r["lds"]),
            ",".join(r["mma"]) or "-",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    print("\n".join("  ".join(c[i].ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells))
    failed = [r for r in reports if not r.ok]
    for r in failed[:5]:
        print(f"\nFAILED {r.kernel} {r.target} {r.defines}:\n{r.error}")
    print(f"\n{len(reports) - len(failed)} builds passed, {len(failed)} failed")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"version": __version__, "rows": [r.as_dict() for r in reports], "summary": rows}, fh, indent=1)
    return 1 if failed else 0


def cmd_bench(args: argparse.Namespace) -> int:
    return bench.run(args, args.argv)


def cmd_tune(args: argparse.Namespace) -> int:
    from .bench import tune

    return tune.run(args, args.argv)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mxrt", description="OCP MX numerics, layouts and kernels")
    p.add_argument("--version", action="version", version=f"mxrt {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run the correctness suite on the best available backend")
    c.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    c.set_defaults(func=cmd_check)
    i = sub.add_parser("info", help="versions, backend and device")
    i.add_argument("--compile", action="store_true", help="also time a cold and a warm build of each kernel (GPU)")
    i.set_defaults(func=cmd_info)
    cc = sub.add_parser("compile-check", help="build every kernel for the given targets offline (no GPU)")
    cc.add_argument("--targets", default="gfx942,gfx950,sm_90a", help="comma-separated, e.g. gfx942,gfx950,sm_90a")
    cc.add_argument("--json", metavar="FILE", help="also write one JSON row per build")
    cc.add_argument("--jobs", type=int, default=None, help="parallel builds (default: CPU count)")
    cc.set_defaults(func=cmd_compile_check)
    b = sub.add_parser(
        "bench",
        help="time mxrt against the peers on this machine (numpy reference without a GPU)",
        description="Benchmark suites: mxrt against torch cuBLAS, Triton tl.dot_scaled and a device copy, in one run. "
        "Prints a markdown table; --json and --plot write the rows and a bar chart.",
    )
    suites = b.add_subparsers(dest="suite", required=True, metavar="SUITE")
    bench.add_parsers(suites)
    b.set_defaults(func=cmd_bench)
    from .bench import tune

    t = sub.add_parser("tune", help="measure kernel configurations on this GPU and write the tuned table")
    what = t.add_subparsers(dest="what", required=True, metavar="WHAT")
    tg = what.add_parser("gemm", help=tune.HELP, description=(tune.__doc__ or tune.HELP).split("\n\n")[0])
    tune.add_arguments(tg)
    tg.set_defaults(func=cmd_tune)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
