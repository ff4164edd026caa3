"""``mxrt bench overhead``: host wall time per call with no CUDA graph, on the small problems of decode.

At decode every call is small, so the time from the Python call to the queued kernel is the product's speed
(issue 9, "Host overhead": target <= 1.5x ``torch.matmul`` for ``gemm_mx`` and ``quantize_mx``). Per shape
``MxNxK`` this times, each call on CuPy device arrays prepared beforehand:

* ``torch.matmul bf16``     ``a [m, k] @ b[n, k].T`` in bf16: the baseline of the ratios;
* ``mxrt.gemm_mx``          MX operands from ``quantize_mx`` (e4m3, CuPy), bf16 out; also ``split_k=4``;
* ``mxrt.gemm_mx torch``    the same operands as torch tensors (``mxrt.convert(q, "torch")``), torch out;
* ``mxrt.quantize_mx``      float32 ``a [m, k]`` -> e4m3 (the activation quantization a decode step pays); also
  with ``a`` a torch tensor;
* ``torch a*2``             one torch elementwise launch on ``a``: the torch op a quantization is compared with;
* ``CuPy x*2 (floor)``      one CuPy elementwise launch on ``a``: the floor of any call launched through CuPy.

Three numbers per row: ``wall`` = ``--calls`` back-to-back calls then one device synchronise, per call (the
host's time per call once it exceeds the kernel's), the median of ``--reps`` samples taken round-robin over the
rows of a shape (mxrt and torch rows interleaved, so a drift of the host's speed hits them alike); ``latency`` =
one call + synchronise, median; ``graph`` = the same call replayed from a CUDA graph (the kernel time, no host).
``vs torch`` = wall / torch.matmul's wall. The gemm suite runs this at its end (``mxrt bench gemm``) unless
``--no-overhead``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from . import core
from .core import Column, Session, fmt_num, shape_label

HELP = "host overhead: wall time per call, no graph, gemm_mx / quantize_mx vs torch.matmul on small shapes"

GPU_SHAPES = [(1, 128, 128), (1, 7168, 4096), (4, 7168, 4096), (16, 7168, 4096)]
CPU_SHAPES = [(1, 128, 128)]
TARGET_RATIO = 1.5  # issue 9: wall time per call <= 1.5x torch.matmul's on the same shape

OP_TORCH = "torch.matmul bf16"
OP_GEMM = "mxrt.gemm_mx"
OP_GEMM_SK4 = "mxrt.gemm_mx split_k=4"
OP_GEMM_TORCH = "mxrt.gemm_mx torch"
OP_QUANT = "mxrt.quantize_mx"
OP_QUANT_TORCH = "mxrt.quantize_mx torch"
OP_TORCH_EW = "torch a*2"
OP_FLOOR = "CuPy x*2 (floor)"
OP_NUMPY_MATMUL = "numpy f32 matmul"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", help="comma list of MxNxK (default: 1x128x128 and M = 1, 4, 16 x 7168 x 4096)")
    p.add_argument("--calls", type=int, default=1000, help="back-to-back calls per wall-time sample")


def finish_args(args: argparse.Namespace) -> None:
    if args.shapes is not None and not isinstance(args.shapes, list):
        args.shapes = [tuple(s) for s in core.parse_shapes(args.shapes, 3, "MxNxK")]
    if args.calls < 1:
        raise ValueError("--calls must be >= 1")
    if args.reps < 1:
        raise ValueError("--reps must be >= 1")


def run(ses: Session, args: argparse.Namespace) -> None:
    peers = core.discover_peers()
    ses.result.update(device=core.device_name(), software=core.software(), peers=dataclasses.asdict(peers))
    ses.result["rows"] = rows_gpu(ses, args.shapes or GPU_SHAPES, peers, args.reps, args.calls)
    ses.save()


def run_cpu(ses: Session, args: argparse.Namespace) -> None:
    ses.result["rows"] = rows_cpu(ses, args.shapes or CPU_SHAPES)
    ses.save()


def _row(m: int, n: int, k: int, op: str, **kw: Any) -> dict:
    return {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "op": op} | kw


def add_ratios(rows: list[dict], baseline: str) -> list[dict]:
    """``vs_torch`` / ``vs_torch_latency`` of every row: its wall / latency over the ``baseline`` row's of the same
    shape (None where either is missing)."""
    base = {r["shape"]: r for r in rows if r["op"] == baseline}
    for r in rows:
        b = base.get(r["shape"], {})
        for key, out in (("wall_s", "vs_torch"), ("latency_s", "vs_torch_latency")):
            r[out] = r[key] / b[key] if r.get(key) is not None and b.get(key) else None
    return rows


def rows_gpu(
    ses: Session, shapes: list[tuple[int, int, int]], peers: core.Peers, reps: int = 10, calls: int = 200
) -> list[dict]:
    import cupy

    import mxrt

    rows: list[dict] = []
    sync = core.cupy_sync
    for m, n, k in ses.track(shapes, "overhead", lambda s: shape_label(*s)):
        rng = cupy.random.default_rng(m + n + k)
        a32 = rng.standard_normal((m, k), dtype=cupy.float32)
        b32 = rng.standard_normal((n, k), dtype=cupy.float32)
        tmp = cupy.empty_like(a32)
        cases: list[tuple[str, Callable[[], Any] | None, str, str]] = []  # op, fn, graph kind, why not
        ta = None
        if peers.torch:
            import torch

            ta, tb = torch.from_dlpack(a32).to(torch.bfloat16), torch.from_dlpack(b32).to(torch.bfloat16)
            ta32, tt = torch.from_dlpack(a32), torch.empty_like(torch.from_dlpack(a32))
            cases.append((OP_TORCH, lambda ta=ta, tb=tb: torch.matmul(ta, tb.t()), "torch", ""))
        else:
            cases.append((OP_TORCH, None, "torch", peers.why_torch or ""))
        why_q = ""
        try:
            qa, qb = mxrt.quantize_mx(a32, "e4m3", backend="gpu"), mxrt.quantize_mx(b32, "e4m3", backend="gpu")
        except Exception as e:  # no quantizer kernel here: the gemm rows say why
            qa = qb = None
            why_q = f"{type(e).__name__}: {str(e)[:120]}"
        for op, sk in ((OP_GEMM, 1), (OP_GEMM_SK4, 4)):
            if qa is None:
                cases.append((op, None, "cupy", why_q))
            elif sk > -(-k // 32):
                cases.append((op, None, "cupy", f"split_k={sk} needs k >= {32 * sk}"))
            else:
                fn = lambda qa=qa, qb=qb, sk=sk: mxrt.gemm_mx(qa, qb, out_dtype="bfloat16", split_k=sk, backend="gpu")  # noqa: E731
                cases.append((op, fn, "cupy", ""))
        if ta is not None and qa is not None:
            tqa, tqb = mxrt.convert(qa, "torch"), mxrt.convert(qb, "torch")
            cases.append((OP_GEMM_TORCH, lambda a=tqa, b=tqb: mxrt.gemm_mx(a, b, out_dtype="bfloat16"), "torch", ""))
        cases.append((OP_QUANT, lambda a=a32: mxrt.quantize_mx(a, "e4m3", backend="gpu"), "cupy", ""))
        if ta is not None:
            cases.append((OP_QUANT_TORCH, lambda a=ta32: mxrt.quantize_mx(a, "e4m3", backend="gpu"), "torch", ""))
            cases.append((OP_TORCH_EW, lambda a=ta32, t=tt: torch.mul(a, 2, out=t), "torch", ""))
        cases.append((OP_FLOOR, lambda a=a32, t=tmp: cupy.multiply(a, 2, out=t), "cupy", ""))
        runnable = [(op, fn) for op, fn, _, why in cases if fn is not None]
        walls, errors = wall_interleaved(runnable, sync, calls=calls, reps=max(reps, 5))
        for op, fn, kind, why in cases:
            if fn is None:
                rows.append(_row(m, n, k, op, wall_s=None, latency_s=None, graph_s=None, note=why))
                continue
            try:
                if op in errors:
                    raise errors[op]
                wall = walls[op]
                latency = core.latency_per_call(fn, sync)
                graph, method, note = None, "wall", ""
                if op in (OP_GEMM_TORCH, OP_QUANT_TORCH):
                    note = "graph: see the CuPy row (same kernel; torch's capture stream is not CuPy's)"
                else:
                    try:
                        timer = core.time_torch if kind == "torch" else core.time_cupy
                        graph, method = timer([fn], reps, log=ses.log)
                    except Exception as e:  # the wall and latency columns stand without it
                        note = f"graph: {type(e).__name__}: {str(e)[:80]}"
                row = _row(m, n, k, op, wall_s=wall, latency_s=latency, graph_s=graph, method=method, note=note)
            except Exception as e:  # an op failing is a row with its reason
                row = _row(m, n, k, op, wall_s=None, latency_s=None, graph_s=None, note=f"{type(e).__name__}: {e}")
            rows.append(row)
            w_us, l_us, g_us = (_us(row.get(key)) for key in ("wall_s", "latency_s", "graph_s"))
            ses.log(f"  {row['shape']:>14} {op:26} {w_us:>9} us wall {l_us:>9} us latency {g_us:>9} us graph")
        del a32, b32, tmp
        cupy.get_default_memory_pool().free_all_blocks()
    return add_ratios(rows, OP_TORCH)


def wall_interleaved(
    cases: list[tuple[str, Callable[[], Any]]], sync: Callable[[], Any], calls: int = 1000, reps: int = 9
) -> tuple[dict[str, float], dict[str, Exception]]:
    """Median wall seconds per call of every case: ``reps`` rounds, each timing ``calls`` back-to-back calls then
    one ``sync()`` of every case in turn (round-robin), after warm-up calls. A case that raises is left out of the
    rounds and returned with its error."""
    import statistics
    import time

    errors: dict[str, Exception] = {}
    live = []
    for op, fn in cases:
        try:
            for _ in range(3):
                fn()
            sync()
            live.append((op, fn))
        except Exception as e:  # the row says why
            errors[op] = e
    samples: dict[str, list[float]] = {op: [] for op, _ in live}
    for _ in range(reps):
        for op, fn in live:
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            samples[op].append((time.perf_counter() - t0) / calls)
    return {op: statistics.median(v) for op, v in samples.items()}, errors


def rows_cpu(ses: Session, shapes: list[tuple[int, int, int]]) -> list[dict]:
    """No GPU: the numpy reference's wall time per call, against numpy's float32 matmul of the same shape."""
    import mxrt

    rows: list[dict] = []
    rng = np.random.default_rng(0)
    for m, n, k in ses.track(shapes, "overhead (numpy)", lambda s: shape_label(*s)):
        a32 = rng.standard_normal((m, k), dtype=np.float32)
        b32 = rng.standard_normal((n, k), dtype=np.float32)
        qa, qb = mxrt.quantize_mx(a32, "e4m3", backend="numpy"), mxrt.quantize_mx(b32, "e4m3", backend="numpy")
        cases = [
            (OP_NUMPY_MATMUL, lambda a=a32, b=b32: a @ b.T),
            (OP_GEMM, lambda qa=qa, qb=qb: mxrt.gemm_mx(qa, qb, out_dtype="bfloat16", backend="numpy")),
            (OP_QUANT, lambda a=a32: mxrt.quantize_mx(a, "e4m3", backend="numpy")),
        ]
        for op, fn in cases:
            t = core.host_time(fn)
            rows.append(_row(m, n, k, op, wall_s=t, latency_s=t, graph_s=None, method="wall", note="numpy"))
            ses.log(f"  {shape_label(m, n, k):>14} {op:26} {t * 1e6:9.1f} us wall (numpy)")
    return add_ratios(rows, OP_NUMPY_MATMUL)


def _us(s: float | None) -> str:
    return fmt_num(None if s is None else s * 1e6, ".1f")


COLUMNS = [
    Column("shape MxNxK", lambda r: r["shape"]),
    Column("op", lambda r: r["op"]),
    Column("wall us/call", lambda r: _us(r.get("wall_s")), right=True),
    Column("vs baseline", lambda r: fmt_num(r.get("vs_torch"), ".2f"), right=True),
    Column("latency us", lambda r: _us(r.get("latency_s")), right=True),
    Column("vs baseline", lambda r: fmt_num(r.get("vs_torch_latency"), ".2f"), right=True),
    Column("graph us", lambda r: _us(r.get("graph_s")), right=True),
    Column("note", lambda r: r.get("note") or r.get("method") or ""),
]


def verdict(rows: list[dict]) -> str:
    """One line: the worst wall-time ratio of gemm_mx and quantize_mx, against the target on the GPU."""
    gpu = any(r["op"] == OP_TORCH and r.get("wall_s") for r in rows)
    base = OP_TORCH if gpu else OP_NUMPY_MATMUL
    parts = []
    for op in (OP_GEMM, OP_GEMM_TORCH, OP_QUANT, OP_QUANT_TORCH):
        ratios = [r["vs_torch"] for r in rows if r["op"] == op and r.get("vs_torch") is not None]
        if ratios:
            worst = max(ratios)
            mark = f" ({'met' if worst <= TARGET_RATIO else 'MISSED'})" if gpu else ""
            parts.append(f"{op} worst {worst:.2f}x{mark}")
    if not parts:
        return "host overhead: no ratio (the baseline or the mxrt rows did not run)"
    if not gpu:
        return f"host overhead of the numpy reference vs {base} (the <= {TARGET_RATIO}x target is for the GPU): " + (
            ", ".join(parts)
        )
    return f"host overhead vs {base} (target <= {TARGET_RATIO}x wall per call): " + ", ".join(parts)


def format_table(rows: list[dict]) -> str:
    return verdict(rows) + "\n" + core.markdown_table(rows, COLUMNS)


def table(result: dict) -> str:
    return format_table(result["rows"])


def panel(rows: list[dict]) -> core.Panel:
    groups = list(dict.fromkeys(r["shape"] for r in rows))
    ops = list(dict.fromkeys(r["op"] for r in rows))
    cell = {(r["shape"], r["op"]): r.get("wall_s") for r in rows}
    series = {op: [None if cell.get((g, op)) is None else cell[(g, op)] * 1e6 for g in groups] for op in ops}
    return core.Panel("host wall time per call, no graph (lower is better)", "us per call", groups, series, log_y=True)


def plot(result: dict, path: str) -> None:
    core.bar_plot(path, [panel(result["rows"])], suptitle=result.get("device", "CPU (numpy reference)"))
