"""The tuned table of the decode GEMM path (``sm90_decode``): which configuration, or which other GEMM path, serves
one small-M cell on one GPU. Pure Python (no cupy); read by :mod:`mxrt.ops.gemm_decode`, written by
``mxrt tune gemm`` (:mod:`mxrt.bench.tune`).

Two files, user entries first: the user table (``MXRT_TUNED_TABLE``, else ``$XDG_CACHE_HOME/mxrt/tuned_decode.json``
or ``~/.cache/mxrt/tuned_decode.json``; what ``mxrt tune gemm`` writes) and the one shipped in the package
(``mxrt/data/tuned_decode.json``). A file is::

    {"schema": 1, "meta": {...},
     "targets": {"sm_90a": {"NVIDIA H100 80GB HBM3": {"7168x4096": {"1": {"path": "sm90_decode", "kw": 2,
                                                                          "stages": 3, "split": 8}, ...}}}},
     "w_fmts": {"e2m1": {"sm_90a": {"NVIDIA H100 80GB HBM3": {"7168x4096": {"1": {...}, ...}}}}}}

keyed by weight format, target, device name, ``NxK`` and M bucket (the smallest of :data:`M_BUCKETS` holding m).
``targets`` holds the entries of fp8 weights (measured on e4m3 x e4m3; e5m2 weights read them too: the same bytes
per row and the same builds); the optional ``w_fmts`` holds one tree of the same shape per other weight format
(:data:`W_FMTS`: e2m1, MXFP4 weights, whose rows are half the bytes and prefer other builds). A file without
``w_fmts`` (every file written before it existed) is an fp8 table, and a reader that predates it ignores it, so the
schema number stays 1. :func:`lookup` matches the weight format exactly; a call with e2m1 weights whose cell has no
e2m1 entry runs as before the key existed (:func:`mxrt.ops.gemm_decode.plan`: the fp8 entry's build, which fits
the smaller e2m1 rings and was measured 4.6% off the e2m1 optimum at the median against 15.6% for the envelope
defaults, H100, 64 cells, benchmarks/results_s21_fmtkey.md; the path by the e2m1 token threshold). ``path`` is
``"sm90_decode"`` (then ``kw``, ``stages``, ``split`` are the build and the path's own K split of a ``split_k=1``
call) or the name of another registered GEMM path that won the measurement (the decode path then declines the
cell). A device without an entry of its own takes any device's entry of the same target. Absent an entry, the
envelope defaults run (:func:`mxrt.ops.gemm_decode.plan`). Files are read once and memoised; :func:`clear` forgets
them. Every file is validated on load: :class:`TunedTableError` names the file and the bad field.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..codes import FMT_CODES
from ..config import tuned_table_path
from ..errors import MxrtError
from . import gemm_decode_kernels as K

SCHEMA = 1
#: the M buckets of the table: a call with m tokens uses the smallest bucket >= m
M_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
DECODE_PATH = "sm90_decode"
SHIPPED = "tuned_decode.json"
#: the weight formats the table keys: e4m3 (fp8 weights, the top-level ``targets``) and those of ``w_fmts``
W_FMTS = ("e4m3", "e2m1")
FP8_W_FMT = W_FMTS[0]
_E4M3 = FMT_CODES["e4m3"]


def table_w_fmt(b_fmt: str) -> str:
    """The table key of weights in format ``b_fmt``: ``"e2m1"`` for e2m1, else ``"e4m3"`` (e5m2 weights have the
    same bytes per row and builds as e4m3, and read its entries)."""
    return b_fmt if b_fmt in W_FMTS else FP8_W_FMT


class TunedTableError(MxrtError, ValueError):
    """A tuned-table file that cannot be used; ``path`` is the file, ``field`` the bad entry's location."""

    def __init__(self, path: str, field: str, why: str):
        self.path, self.field = path, field
        super().__init__(f"tuned table {path}: {field}: {why}")


@dataclass(frozen=True)
class Entry:
    """One cell's choice: the GEMM path and, for the decode path, its build (``kw``, ``stages``, ``rt``: weight row
    tiles per CTA, 1 when a table omits it) and K split; ``us`` is the measured time when the tuner wrote it (None
    for the shipped defaults)."""

    path: str
    kw: int | None = None
    stages: int | None = None
    split: int | None = None
    us: float | None = None
    rt: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path}
        if self.path == DECODE_PATH:
            d.update(kw=self.kw, stages=self.stages, split=self.split, rt=self.rt or 1)
        if self.us is not None:
            d["us"] = round(float(self.us), 3)
        return d


def bucket(m: int) -> int:
    """The smallest M bucket holding ``m`` (m > 64 has none: outside the decode envelope)."""
    for b in M_BUCKETS:
        if m <= b:
            return b
    raise ValueError(f"m = {m} > {M_BUCKETS[-1]}: outside the decode table")


def mt_of(m: int) -> int:
    """The token tile (define MT) that a call of ``m`` tokens builds."""
    return next(t for t in K.DECODE_MT if 8 * t >= m)


def cell_key(n: int, k: int) -> str:
    return f"{n}x{k}"


def _int(v: Any, path: str, field: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TunedTableError(path, field, f"expected an integer, got {v!r}")
    if not lo <= v <= hi:
        raise TunedTableError(path, field, f"{v} is outside [{lo}, {hi}]")
    return v


def parse_entry(raw: Any, path: str, field: str, n: int, k: int, m_bucket: int, w_fmt: str = FP8_W_FMT) -> Entry:
    """One validated entry of cell ``n x k`` at bucket ``m_bucket`` for weights in table format ``w_fmt`` (its
    build must fit in shared memory with e4m3 tokens and those weights)."""
    if not isinstance(raw, dict):
        raise TunedTableError(path, field, f"expected an object, got {type(raw).__name__}")
    name = raw.get("path")
    if not isinstance(name, str) or not name:
        raise TunedTableError(path, f"{field}.path", f"expected a GEMM path name, got {name!r}")
    us = raw.get("us")
    if us is not None and (isinstance(us, bool) or not isinstance(us, (int, float)) or not us > 0):
        raise TunedTableError(path, f"{field}.us", f"expected a positive number, got {us!r}")
    unknown = set(raw) - {"path", "kw", "stages", "split", "us", "rt"}
    if unknown:
        raise TunedTableError(path, f"{field}.{sorted(unknown)[0]}", "unknown field")
    if name != DECODE_PATH:
        return Entry(name, us=None if us is None else float(us))
    for f in ("kw", "stages", "split"):
        if f not in raw:
            raise TunedTableError(path, f"{field}.{f}", f"missing (required with path {DECODE_PATH!r})")
    kw, stages = raw["kw"], raw["stages"]
    if kw not in K.DECODE_KW or isinstance(kw, bool):
        raise TunedTableError(path, f"{field}.kw", f"{kw!r} is not one of {K.DECODE_KW}")
    if stages not in K.DECODE_STAGES or isinstance(stages, bool):
        raise TunedTableError(path, f"{field}.stages", f"{stages!r} is not one of {K.DECODE_STAGES}")
    rt = raw.get("rt")  # absent: RT 1 (tables written before the define existed)
    if rt is not None and (isinstance(rt, bool) or not K.valid_rt(mt_of(m_bucket), rt)):
        raise TunedTableError(
            path, f"{field}.rt", f"{rt!r} is not one of {K.DECODE_RT} with rt * MT <= 16 (MT {mt_of(m_bucket)})"
        )
    smem = K.smem_bytes(_E4M3, FMT_CODES[w_fmt], mt_of(m_bucket), kw, stages, rt or 1)
    if smem > K.DECODE_SMEM_MAX:
        raise TunedTableError(
            path,
            f"{field}.stages",
            f"kw={kw} stages={stages} rt={rt} needs {smem} B of shared memory > {K.DECODE_SMEM_MAX}",
        )
    split = _int(raw["split"], path, f"{field}.split", 1, max(1, k // 128))
    return Entry(DECODE_PATH, kw, stages, split, None if us is None else float(us), rt)


Key = tuple[str, str, int, int, int, str]  # (target, device, n, k, m bucket, table weight format)
Cells = dict[Key, Entry]


def _parse_targets(targets: Any, path: str, where: str, w_fmt: str, out: Cells) -> None:
    """The entries of one target -> device -> NxK -> M bucket tree (``where``: its field) into ``out``."""
    if not isinstance(targets, dict):
        raise TunedTableError(path, where, "expected an object target -> device -> NxK -> M bucket -> entry")
    for target, devices in targets.items():
        if not isinstance(devices, dict):
            raise TunedTableError(path, f"{where}.{target}", "expected an object device name -> cells")
        for device, cells in devices.items():
            at = f"{where}.{target}.{device}"
            if not isinstance(cells, dict):
                raise TunedTableError(path, at, "expected an object NxK -> M bucket -> entry")
            for nk, ms in cells.items():
                parts = nk.split("x")
                if (
                    len(parts) != 2
                    or not all(v.isdigit() and int(v) > 0 for v in parts)
                    or nk != cell_key(*(int(v) for v in parts))
                ):
                    raise TunedTableError(path, f"{at}.{nk}", "expected a cell key NxK, e.g. 7168x4096")
                n, k = (int(v) for v in parts)
                if not isinstance(ms, dict):
                    raise TunedTableError(path, f"{at}.{nk}", "expected an object M bucket -> entry")
                for mb, raw in ms.items():
                    if not (mb.isdigit() and int(mb) in M_BUCKETS):
                        raise TunedTableError(path, f"{at}.{nk}.{mb}", f"M bucket must be one of {M_BUCKETS}")
                    entry = parse_entry(raw, path, f"{at}.{nk}.{mb}", n, k, int(mb), w_fmt)
                    out[(target, device, n, k, int(mb), w_fmt)] = entry


def parse_table(doc: Any, path: str) -> Cells:
    """Every entry of a loaded JSON document, validated: ``targets`` (fp8 weights) and each tree of ``w_fmts``."""
    if not isinstance(doc, dict):
        raise TunedTableError(path, "<top>", f"expected an object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise TunedTableError(path, "schema", f"expected {SCHEMA}, got {doc.get('schema')!r}")
    out: Cells = {}
    _parse_targets(doc.get("targets"), path, "targets", FP8_W_FMT, out)
    by_fmt = doc.get("w_fmts", {})
    if not isinstance(by_fmt, dict):
        raise TunedTableError(path, "w_fmts", "expected an object weight format -> target -> device -> cells")
    for w_fmt, targets in by_fmt.items():
        if w_fmt == FP8_W_FMT:
            raise TunedTableError(path, f"w_fmts.{w_fmt}", "fp8 weights' entries are the top-level targets")
        if w_fmt not in W_FMTS:
            raise TunedTableError(path, f"w_fmts.{w_fmt}", f"expected one of {', '.join(W_FMTS[1:])}")
        _parse_targets(targets, path, f"w_fmts.{w_fmt}", w_fmt, out)
    return out


def load_file(path: str | Path) -> tuple[Cells, dict]:
    """The entries and the metadata of one table file (TunedTableError when unreadable or invalid)."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        raise TunedTableError(str(path), "<file>", f"cannot read JSON ({type(e).__name__}: {e})") from e
    meta = doc.get("meta", {}) if isinstance(doc, dict) else {}
    return parse_table(doc, str(path)), meta if isinstance(meta, dict) else {}


def shipped_path() -> Path:
    return Path(str(resources.files("mxrt") / "data" / SHIPPED))


def to_doc(cells: Cells, meta: dict) -> dict:
    """The JSON document of ``cells`` (sorted keys, so rewrites diff cleanly; ``w_fmts`` only when it has entries,
    so an fp8-only table is written as before)."""
    trees: dict[str, dict] = {f: {} for f in W_FMTS}
    for (target, device, n, k, mb, w_fmt), e in sorted(cells.items()):
        tree = trees[w_fmt].setdefault(target, {}).setdefault(device, {})
        tree.setdefault(cell_key(n, k), {})[str(mb)] = e.as_dict()
    doc = {"schema": SCHEMA, "meta": meta, "targets": trees[FP8_W_FMT]}
    others = {f: t for f, t in trees.items() if f != FP8_W_FMT and t}
    if others:
        doc["w_fmts"] = others
    return doc


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[Cells, Cells]:
    """(user, shipped) entries, read once."""
    user_path = tuned_table_path()
    user = load_file(user_path)[0] if user_path.is_file() else {}
    ship = shipped_path()
    shipped = load_file(ship)[0] if ship.is_file() else {}
    return user, shipped


def _find(cells: Cells, target: str, device: str, n: int, k: int, mb: int, w_fmt: str) -> Entry | None:
    hit = cells.get((target, device, n, k, mb, w_fmt))
    if hit is not None:
        return hit
    for (t, _, nn, kk, b, f), e in sorted(cells.items()):  # another device of the same target
        if (t, nn, kk, b, f) == (target, n, k, mb, w_fmt):
            return e
    return None


@functools.lru_cache(maxsize=4096)
def lookup(target: str, device: str, n: int, k: int, m: int, w_fmt: str = FP8_W_FMT) -> Entry | None:
    """The entry for a call of ``m`` tokens on an ``n x k`` weight in format ``w_fmt`` (a weight format; e5m2
    reads the e4m3 entries, :func:`table_w_fmt`): the user table first (this device, then any device of the
    target), then the shipped one; None when neither has one for that weight format (or m is outside the buckets).
    An exact match: the e2m1 call's fallback to the fp8 entry's build is :func:`mxrt.ops.gemm_decode.plan`'s."""
    if m > M_BUCKETS[-1]:
        return None
    mb, fmt = bucket(max(m, 1)), table_w_fmt(w_fmt)
    for cells in _tables():
        e = _find(cells, target, device, n, k, mb, fmt)
        if e is not None:
            return e
    return None


def clear() -> None:
    """Forget the memoised files and lookups (the tuner wrote a table; tests)."""
    _tables.cache_clear()
    lookup.cache_clear()


__all__ = [
    "DECODE_PATH",
    "FP8_W_FMT",
    "M_BUCKETS",
    "SCHEMA",
    "W_FMTS",
    "Entry",
    "TunedTableError",
    "bucket",
    "cell_key",
    "clear",
    "load_file",
    "lookup",
    "parse_table",
    "shipped_path",
    "table_w_fmt",
    "to_doc",
]
