"""``mxrt bench SUITE``: the benchmark suites, mxrt against the peers present on this machine, in one run.

Each suite is one module with the same face: ``HELP``, ``add_arguments(parser)``, ``finish_args(args)`` (convert
and check; ValueError / MxrtError with the message), ``run(session, args)`` (GPU), ``run_cpu(session, args)``
(the numpy reference on a small shape, when there is no GPU), ``table(result) -> str`` and ``plot(result,
path)``. The shared parts (timing, peers, progress, tables, JSON, plots) live in :mod:`mxrt.bench.core`.

Nothing here imports cupy, torch, triton, tqdm or matplotlib at import time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from types import ModuleType

from ..errors import MxrtError
from . import core, gemm, grouped_quant, layouts, overhead, quant

#: suite name on the command line -> its module
SUITES: dict[str, ModuleType] = {
    "gemm": gemm,
    "overhead": overhead,
    "quant": quant,
    "grouped-quant": grouped_quant,
    "layouts": layouts,
}


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="FILE", help="write the rows, the device and the software versions here")
    p.add_argument("--plot", metavar="FILE.png", help="write a bar chart here (needs matplotlib)")
    p.add_argument("--reps", type=int, default=10, help="timed graph replays per row (median)")
    p.add_argument("--budget-s", type=float, default=0.0, help="stop starting new shapes after this many seconds")
    p.add_argument("--no-progress", action="store_true", help="plain [i/n] lines instead of a tqdm bar")
    p.add_argument(
        "--from-json",
        metavar="FILE",
        help="run nothing: print the table of a JSON file this suite wrote (and --plot it), e.g. on another machine",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """One sub-command per suite under ``mxrt bench``."""
    for name, mod in SUITES.items():
        p = sub.add_parser(name, help=mod.HELP, description=(mod.__doc__ or mod.HELP).split("\n\n")[0])
        mod.add_arguments(p)
        add_common_arguments(p)
        p.set_defaults(suite=name)


def gpu_present() -> bool:
    from .. import runtime

    return bool(runtime.device_available())


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    """Run one suite: GPU rows when a device is present, else the numpy reference; print the table, write the
    JSON and the plot. 0 when the suite ran (also without a GPU), 2 on bad arguments or a missing plot library."""
    name = args.suite
    suite = SUITES[name]
    if args.plot and (why := core.plot_missing()):
        print(f"mxrt bench {name}: --plot {why}", file=sys.stderr)
        return 2
    if args.from_json:
        return replot(name, args.from_json, args.plot)
    try:
        suite.finish_args(args)
    except (MxrtError, ValueError) as e:
        print(f"mxrt bench {name}: {e}", file=sys.stderr)
        return 2
    ses = core.Session(name, argv, args.json, progress=not args.no_progress)
    ses.budget = core.Budget(args.budget_s)
    gpu = gpu_present()
    ses.result["gpu"] = gpu
    try:
        if gpu:
            suite.run(ses, args)
        else:
            print(f"mxrt bench {name}: {core.NO_GPU}; timing the numpy reference on a small shape instead")
            ses.result.update(device="CPU (numpy reference)", software=core.software())
            suite.run_cpu(ses, args)
    finally:
        ses.save()  # a run stopped early (Ctrl-C, a crash) keeps the rows it has
    print(suite.table(ses.result))
    print(f"\nwall {ses.budget.elapsed():.0f} s; device {ses.result.get('device', '?')}")
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        suite.plot(ses.result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def replot(name: str, path: str, plot: str | None) -> int:
    """Print the table of a JSON file written by ``mxrt bench NAME --json`` and write its plot."""
    try:
        with open(path) as fh:
            result = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"mxrt bench {name}: --from-json {path}: {e}", file=sys.stderr)
        return 2
    if result.get("suite") != name or not isinstance(result.get("rows"), list):
        print(
            f"mxrt bench {name}: --from-json {path} holds suite {result.get('suite')!r}, not {name!r}", file=sys.stderr
        )
        return 2
    suite = SUITES[name]
    print(suite.table(result))
    if plot:
        suite.plot(result, plot)
        print(f"wrote {plot}")
    return 0


__all__ = ["SUITES", "add_common_arguments", "add_parsers", "core", "gpu_present", "replot", "run"]
