"""``mxrt tune gemm``: measure the decode GEMM cells on the present GPU and write the tuned table the decode path
reads (:mod:`mxrt.ops.decode_table`; default: the user cache file, overriding the shipped one).

For each ``MxNxK`` shape (m rounded up to its M bucket) and weight format of ``--fmts`` (e4m3 tokens; e4m3 weights
by default, the table's fp8 entries, which e5m2 weights read too; e2m1 for MXFP4 weights, the table's ``w_fmts``
entries): every ``(kw, stages, rt)`` build of ``sm90_decode`` that fits in shared memory with those operands at a
few K splits (the envelope default, 1, and 2 / 4 when the CTAs leave SMs idle), and every other registered GEMM path
of the target that supports the call (forced by name, as ``MXRT_GEMM_PATH`` does; what a ``split_k=1`` call would
run). For e2m1 weights the cell's fp8 entry is timed too when it is not already a candidate (its build is what an
e2m1 call of a cell without an e2m1 entry runs), and the log compares it with the envelope default and the best.
Timing: :func:`mxrt.bench.core.time_cupy` (CUDA-graph replays) round-robin over weight sets larger than the L2.
The fastest candidate becomes the cell's entry, merged into the existing table at ``--out``.

The selection (:func:`decode_candidates`, :func:`best_entry`, :func:`merge`) is pure and tested on the CPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..codes import FMT_CODES
from ..config import tuned_table_path
from ..errors import MxrtError, ShapeError
from ..ops import decode_table as T
from ..ops import gemm_decode_kernels as K
from . import core

HELP = "time the decode GEMM configurations on this GPU and write the tuned table the dispatcher reads"
#: the target whose decode path is tuned
TARGET = "sm_90a"
#: the token format the tuner measures (e4m3: the largest stages of every token format)
TOKEN_FMT = "e4m3"


@dataclass(frozen=True)
class Candidate:
    """One configuration to time: ``sm90_decode`` with its build and split, or another path by name."""

    path: str
    kw: int | None = None
    stages: int | None = None
    split: int | None = None
    rt: int | None = None

    def label(self) -> str:
        if self.path != T.DECODE_PATH:
            return self.path
        return f"{self.path} kw={self.kw} stages={self.stages} rt={self.rt} split={self.split}"

    def entry(self, seconds: float) -> T.Entry:
        return T.Entry(self.path, self.kw, self.stages, self.split, us=seconds * 1e6, rt=self.rt)


def check_shape(m: int, n: int, k: int) -> None:
    """The decode table's envelope: ShapeError otherwise."""
    if not 1 <= m <= T.M_BUCKETS[-1]:
        raise ShapeError(f"{m}x{n}x{k}: m = {m}, the decode table holds 1 <= m <= {T.M_BUCKETS[-1]}")
    if k % 128:
        raise ShapeError(f"{m}x{n}x{k}: k = {k} is not a multiple of 128 (the decode path's envelope)")


def parse_fmts(text: str) -> tuple[str, ...]:
    """``--fmts``: a comma list of the table's weight formats (:data:`mxrt.ops.decode_table.W_FMTS`), in order,
    without repeats; ValueError otherwise."""
    fmts = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    bad = [f for f in fmts if f not in T.W_FMTS]
    if bad or not fmts:
        why = "e5m2 weights read the e4m3 entries; " if "e5m2" in bad else ""
        raise ValueError(f"--fmts {text!r}: {why}expected a comma list of {', '.join(T.W_FMTS)}")
    return fmts


def parse_paths(text: str, known: Sequence[str]) -> tuple[str, ...] | None:
    """``--paths``: None (empty: every path), ``()`` for ``none``, else the named paths of ``known`` (the target's
    registered paths other than sm90_decode), in order, without repeats; ValueError for another name."""
    if not text.strip():
        return None
    if text.strip() == "none":
        return ()
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in names if p not in known]
    if bad:
        raise ValueError(f"--paths {text!r}: {bad[0]!r} is not one of {', '.join(known)} (or 'none')")
    return names


def decode_candidates(
    m: int, n: int, k: int, sms: int, w_fmt: str = T.FP8_W_FMT, extra: Sequence[Candidate] = ()
) -> list[Candidate]:
    """Every ``sm90_decode`` build of ``m`` tokens (each row-tile count ``rt`` the token tile allows) that fits in
    shared memory with e4m3 tokens and ``w_fmt`` weights, at the envelope default split, 1, and 2 / 4 when
    ``ceil(n / (16 * rt))`` CTAs leave SMs idle; each warp keeps at least one group of 4 MX blocks. The envelope
    default (:func:`mxrt.ops.gemm_decode.plan` without a table) comes first; ``extra`` decode candidates (the
    cell's fp8 entry when tuning e2m1) last, unless listed already."""
    from ..ops import gemm_decode

    mt, groups = T.mt_of(m), max(1, k // 128)
    default, dsplit = gemm_decode.plan(m, n, k, 1, sms)
    fa, fb = FMT_CODES[TOKEN_FMT], FMT_CODES[w_fmt]
    out = [Candidate(T.DECODE_PATH, default.kw, default.stages, dsplit, default.rt)]
    for rt in K.DECODE_RT:
        if not K.valid_rt(mt, rt):
            continue
        ctas = -(-n // (16 * rt))
        for split in sorted({dsplit, 1} | ({2, 4} if ctas < sms else set())):
            for kw in K.DECODE_KW:
                for st in K.DECODE_STAGES:
                    c = Candidate(T.DECODE_PATH, kw, st, split, rt)
                    if c == out[0] or split > groups or split * kw > groups:
                        continue
                    if K.smem_bytes(fa, fb, mt, kw, st, rt) <= K.DECODE_SMEM_MAX:
                        out.append(c)
    return out + [c for c in dict.fromkeys(extra) if c not in out]


def best_entry(timings: Sequence[tuple[Candidate, float | None]]) -> T.Entry | None:
    """The fastest candidate that ran (``None`` seconds: it failed), as a table entry; the first listed wins a
    tie. None when nothing ran."""
    ran = [(t, i, c) for i, (c, t) in enumerate(timings) if t is not None and t > 0]
    if not ran:
        return None
    t, _, c = min(ran, key=lambda r: (r[0], r[1]))
    return c.entry(t)


def merge(existing: T.Cells, new: T.Cells) -> T.Cells:
    """The table after a run: the existing entries, those measured now replacing the same cells."""
    return {**existing, **new}


def read_existing(path: Path) -> tuple[T.Cells, dict]:
    """The table already at ``path`` (empty when there is none); TunedTableError when it is invalid."""
    if not path.is_file():
        return {}, {}
    return T.load_file(path)


def write_table(path: Path, cells: T.Cells, meta: dict) -> None:
    """Write the table (via a temporary file, so a reader never sees half of it) and make this process forget the
    memoised tables and the launch plans made from them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(T.to_doc(cells, meta), fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    from ..ops import gemm_decode

    gemm_decode.reload_table()
    try:
        from ..api.gemm import clear_plans
    except ImportError:  # pragma: no cover - the api layer always imports
        return
    clear_plans()  # a cached plan may hold the path the old table chose


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", required=True, help="comma list of MxNxK decode cells, e.g. 1x7168x4096,16x7168x4096")
    p.add_argument("--out", metavar="FILE", help=f"table to write and merge into (default: {tuned_table_path()})")
    p.add_argument("--fmts", default=T.FP8_W_FMT,
                   help=f"weight formats to tune, comma list of {', '.join(T.W_FMTS)} (tokens are {TOKEN_FMT}; "
                        "e5m2 weights read the e4m3 entries)")  # fmt: skip
    p.add_argument("--paths", default="",
                   help="the other GEMM paths to time beside sm90_decode, comma list, or 'none' (default: every "
                        "registered path of the target that supports the cell)")  # fmt: skip
    p.add_argument("--reps", type=int, default=7, help="timed graph replays per configuration (median)")
    p.add_argument("--no-progress", action="store_true", help="plain [i/n] lines instead of a tqdm bar")


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    """0 when the table was written; 1 without a GPU (or one without the decode path); 2 on bad arguments."""
    name = "mxrt tune gemm"
    try:
        shapes = core.parse_shapes(args.shapes, 3)
        for s in shapes:
            check_shape(*s)
        fmts = parse_fmts(args.fmts)
        from ..ops.gemm_paths import gemm_paths

        others = [p.name for p in gemm_paths(TARGET) if p.name != T.DECODE_PATH]
        paths = parse_paths(args.paths, others)
        if args.reps < 1:
            raise ValueError(f"--reps {args.reps}: expected at least 1")
        out = Path(args.out).expanduser() if args.out else tuned_table_path()
        existing, meta = read_existing(out)
    except (MxrtError, ValueError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 2
    from .. import runtime

    if not runtime.device_available():
        print(f"{name}: {core.NO_GPU}; tuning times the kernels on the present GPU, so nothing was written",
              file=sys.stderr)  # fmt: skip
        return 1
    arch = runtime.get_arch()
    if arch.target != TARGET:
        print(f"{name}: the decode path runs on {TARGET}; this GPU ({arch.name}) is {arch.target}: nothing to tune",
              file=sys.stderr)  # fmt: skip
        return 1
    ses = core.Session("tune-gemm", argv, None, progress=not args.no_progress)
    new: T.Cells = {}
    ses.log(f"device {arch.name} ({arch.target}, {arch.num_cus} SMs); writing {out}")
    cells = [(m, n, k, f) for f in fmts for m, n, k in shapes]
    try:
        for m, n, k, w_fmt in ses.track(cells, "tune gemm", lambda c: f"{core.shape_label(*c[:3])} {c[3]}"):
            entry = tune_cell(ses, arch, T.bucket(m), n, k, args.reps, w_fmt=w_fmt, paths=paths)
            if entry is not None:
                new[(arch.target, arch.name, n, k, T.bucket(m), w_fmt)] = entry
    finally:
        if new:  # a run stopped early keeps the cells it measured
            stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            done = [f for f in fmts if any(key[5] == f for key in new)]
            run_meta = {"date": stamp, "device": arch.name, "mxrt": __version__, "argv": list(argv), "reps": args.reps,
                        "formats": ", ".join(f"{TOKEN_FMT} x {f}" for f in done), "cells": len(new)}  # fmt: skip
            meta = {**meta, "written_by": name, "runs": [*meta.get("runs", []), run_meta][-20:]}
            write_table(out, merge(existing, new), meta)
            print(f"wrote {len(new)} cell(s) to {out}")
    return 0 if new else 1


def fallback_line(
    timings: Sequence[tuple[Candidate, float | None]], default: Candidate, fp8: Candidate | None, best: T.Entry
) -> str:
    """The log line that compares, for one cell of a non-fp8 weight format, the envelope default and the cell's fp8
    entry (the build of a cell without an entry of its own, and of a cell without any) with the best candidate."""
    times = dict(timings)

    def us(c: Candidate | None) -> str:
        t = None if c is None else times.get(c)
        return "-" if t is None else f"{t * 1e6:.2f}"

    return f"fallback: default {us(default)} us, fp8 entry {us(fp8)} us, best {best.us:.2f} us"


def tune_cell(
    ses: core.Session,
    arch: Any,
    m: int,
    n: int,
    k: int,
    reps: int,
    w_fmt: str = T.FP8_W_FMT,
    paths: Sequence[str] | None = None,
) -> T.Entry | None:
    """Time every candidate of one cell (e4m3 tokens, ``w_fmt`` weights) on the GPU; the best as an entry (None when
    nothing ran). For e2m1 weights the cell's fp8 entry (this device's, else the target's) is a candidate too, and a
    ``fallback:`` line compares the envelope default and that entry with the best. ``paths``: the other GEMM paths
    to time (None: every registered one)."""
    import cupy

    import mxrt

    from ..ops import gemm as gemm_op
    from ..ops import gemm_decode
    from ..ops.gemm_paths import gemm_paths, select_gemm_path
    from ..problems import gemm_problem

    l2 = core.l2_bytes()
    rng = cupy.random.default_rng(1234 + m + n + k)

    def quant(rows: int, fmt: str) -> Any:
        return mxrt.quantize_mx(rng.standard_normal((rows, k), dtype=cupy.float32), fmt)

    qx = quant(m, TOKEN_FMT)
    w0 = quant(n, w_fmt)
    nbytes = sum(a.data.nbytes + a.scales.nbytes for a in (qx, w0))
    ws = [w0] + [quant(n, w_fmt) for _ in range(core.n_input_sets(nbytes, l2) - 1)]
    dgs = [gemm_op.device_gemm(gemm_problem(qx, w)) for w in ws]
    timings: list[tuple[Candidate, float | None]] = []

    def timed(c: Candidate, launches: list) -> None:
        try:
            t, _ = core.time_cupy(launches, reps, log=ses.log)
        except Exception as e:  # a configuration that does not build or launch: recorded, not fatal
            ses.log(f"  {c.label():44s} failed: {type(e).__name__}: {str(e)[:100]}")
            timings.append((c, None))
            return
        ses.log(f"  {c.label():44s} {t * 1e6:8.2f} us  {nbytes / t / 1e12:5.2f} TB/s")
        timings.append((c, t))

    fp8 = None
    if w_fmt != T.FP8_W_FMT:
        e = T.lookup(arch.target, arch.name, n, k, m, T.FP8_W_FMT)
        if e is not None:  # the other paths' candidates carry no build
            fp8 = (
                Candidate(e.path, e.kw, e.stages, e.split, e.rt or 1) if e.path == T.DECODE_PATH else Candidate(e.path)
            )
    cands = decode_candidates(m, n, k, arch.num_cus, w_fmt, [fp8] if fp8 and fp8.path == T.DECODE_PATH else [])
    ses.log(f"cell {m}x{n}x{k} {TOKEN_FMT} x {w_fmt}: {len(ws)} weight set(s)")
    for c in cands:
        timed(
            c,
            [lambda dg=dg, c=c: gemm_decode.run(dg, kw=c.kw, stages=c.stages, rt=c.rt, split=c.split) for dg in dgs],
        )
    for path in gemm_paths(arch.target):
        if path.name == T.DECODE_PATH or (paths is not None and path.name not in paths):
            continue
        try:
            forced = select_gemm_path(dgs[0], path.name)
        except MxrtError as e:  # the path declines this call
            ses.log(f"  {path.name:44s} declines: {str(e)[-100:]}")
            continue
        timed(Candidate(path.name), [lambda dg=dg, f=forced: f.run(dg) for dg in dgs])
    best = best_entry(timings)
    if best is not None:
        ses.log(f"  best: {Candidate(best.path, best.kw, best.stages, best.split, best.rt).label()} ({best.us:.2f} us)")
    if best is not None and w_fmt != T.FP8_W_FMT:
        ses.log("  " + fallback_line(timings, cands[0], fp8, best))
    del dgs, ws, w0, qx
    cupy.get_default_memory_pool().free_all_blocks()
    return best


__all__ = [
    "HELP",
    "TOKEN_FMT",
    "Candidate",
    "add_arguments",
    "best_entry",
    "check_shape",
    "decode_candidates",
    "fallback_line",
    "merge",
    "parse_fmts",
    "parse_paths",
    "run",
]
