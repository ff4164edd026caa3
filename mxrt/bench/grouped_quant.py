"""``mxrt bench grouped-quant``: bandwidth of the grouped GPU quantizers against a device copy in the same run.

Shapes: MoE activations of the seeds (DeepSeek-V3 hidden 7168 / intermediate 2048, gpt-oss 2880), total_m =
4096 * 8 routed tokens split unbalanced (exponential weights, a few empty experts) over G = 8 and 32 experts;
per-group weights [G, n, k] for the dual quantizer. Bytes counted: input read once + every output byte written
(codes, scales, padding rows, offsets). ``quantize_mx_grouped`` is timed twice: called from Python per
iteration ("eager", CUDA events around back-to-back calls), and as a replayed CUDA graph of the same call
("graph", kernel time without the Python and launch overhead).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from . import core
from .core import Column, Session, fmt_num

HELP = "quantize_mx_grouped / quantize_mx_dual_grouped bandwidth vs a device copy (MoE shapes)"

TOKENS = 4096 * 8
ACT_KS = (7168, 2048, 2880)
ACT_GROUPS = (8, 32)
WEIGHTS = [(8, 4096, 7168), (8, 7168, 2048), (8, 5760, 2880)]
CPU_SHAPES = [(512, 256, 4)]
CPU_WEIGHTS = [(2, 128, 256)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", help="comma list of TxKxG: tokens x hidden x groups (default: T=32768, K=7168/2048/"
                   "2880, G=8/32)")  # fmt: skip
    p.add_argument("--weights", help="comma list of GxNxK for the per-group dual quantizer (default: the MoE weights)")
    p.add_argument("--fmt", default="e4m3", choices=("e4m3", "e5m2", "e2m1"), help="element format")


def finish_args(args: argparse.Namespace) -> None:
    if args.shapes is not None and not isinstance(args.shapes, list):
        args.shapes = [tuple(s) for s in core.parse_shapes(args.shapes, 3, "TxKxG")]
    if args.weights is not None and not isinstance(args.weights, list):
        args.weights = [tuple(s) for s in core.parse_shapes(args.weights, 3, "GxNxK")]


def activation_shapes(args: argparse.Namespace, gpu: bool = True) -> list[tuple[int, int, int]]:
    if args.shapes:
        return list(args.shapes)
    return [(TOKENS, k, g) for k in ACT_KS for g in ACT_GROUPS] if gpu else list(CPU_SHAPES)


def weight_shapes(args: argparse.Namespace, gpu: bool = True) -> list[tuple[int, int, int]]:
    if args.weights:
        return list(args.weights)
    return list(WEIGHTS) if gpu else list(CPU_WEIGHTS)


def split(total: int, num_groups: int, seed: int) -> np.ndarray:
    """int64 [num_groups] summing to ``total``: exponential weights, num_groups // 8 experts with no token."""
    rng = np.random.default_rng(seed)
    w = rng.exponential(1.0, num_groups)
    w[rng.choice(num_groups, num_groups // 8, replace=False)] = 0  # a few experts get no token
    lens = np.floor(w / w.sum() * total).astype(np.int64)
    lens[int(np.argmax(w))] += total - lens.sum()
    return lens


def _nbytes(*arrays: Any) -> int:
    return sum(int(a.nbytes) for a in arrays if a is not None)


def _moved(x: Any, out: Any) -> int:
    moved = _nbytes(x, out.row.data, out.row.scales, getattr(out, "offs_pad_row", None))
    if out.col is not None:
        moved += _nbytes(out.col.data, out.col.scales, getattr(out, "offs_pad_col", None))
    return moved


def _random_input(shape: tuple[int, ...]) -> tuple[Any, str]:
    """Normal values generated on the device: bfloat16 where this CuPy has it, else float16 (same 2 bytes)."""
    import cupy

    x = cupy.random.standard_normal(shape, dtype=cupy.float32)
    try:
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16), "bf16"
    except (ImportError, TypeError, ValueError, NotImplementedError):
        return x.astype(cupy.float16), "fp16"


def _row(kernel: str, shape: str, seconds: float | None, moved: int, **kw: Any) -> dict:
    return {"kernel": kernel, "shape": shape, "s": seconds, "bytes": moved} | kw


def run(ses: Session, args: argparse.Namespace) -> None:
    import cupy

    import mxrt

    res = ses.result
    res.update(device=core.device_name(), software=core.software(), fmt=args.fmt)
    cupy.random.seed(0)
    try:
        from mxrt.ops import grouped

        default_unroll: int | None = grouped.ROWWISE_UNROLL
    except (ImportError, AttributeError):  # the tuning knob moved: time the default build only
        grouped, default_unroll = None, None
    src = cupy.empty(512 * 2**20, cupy.uint8)
    dst = cupy.empty_like(src)
    t_copy = core.cupy_mean_time(lambda d=dst, s=src: d.__setitem__(slice(None), s))
    copy_bw = 2 * src.nbytes / t_copy
    res["copy_Bps"] = copy_bw
    rows = res["rows"]
    rows.append(_row("d2d copy 512 MiB", "", t_copy, 2 * src.nbytes, method="events"))
    del src, dst
    dname = "-"
    try:
        for total, k, num_groups in ses.track(activation_shapes(args), "grouped", lambda s: "x".join(map(str, s))):
            x, dname = _random_input((total, k))
            lens = cupy.asarray(split(total, num_groups, seed=k + num_groups))
            shape = f"T={total} k={k} G={num_groups}"
            unrolls = (1, 2) if grouped is not None else (0,)
            for colwise, unroll in [(False, u) for u in unrolls] + [(True, 0)]:
                name = "grouped row+col" if colwise else ("grouped row" + (f" u{unroll}" if unroll else ""))
                if unroll and grouped is not None:
                    grouped.ROWWISE_UNROLL = unroll
                try:
                    out = mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=colwise)
                    moved = _moved(x, out)
                    t_eager = core.cupy_mean_time(
                        lambda x=x, lens=lens, c=colwise: mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=c)
                    )
                    stream = cupy.cuda.Stream()
                    with stream:
                        stream.begin_capture()
                        mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=colwise)
                        graph = stream.end_capture()
                        t_graph = core.cupy_mean_time(lambda g=graph, s=stream: g.launch(stream=s))
                except Exception as e:  # a case failing is a row with its reason
                    rows.append(_row(name, shape, None, 0, note=f"{type(e).__name__}: {str(e)[:160]}"))
                    continue
                rows.append(_row(name + " eager", shape, t_eager, moved, method="events"))
                rows.append(_row(name + " graph", shape, t_graph, moved, method="graph"))
                ses.log(f"  {name:24} {shape:22} eager {t_eager * 1e6:9.1f} us, graph {t_graph * 1e6:9.1f} us")
            del x
            ses.save()
    finally:
        if grouped is not None:
            grouped.ROWWISE_UNROLL = default_unroll
    for g, n, k in ses.track(weight_shapes(args), "dual_grouped", lambda s: "x".join(map(str, s))):
        w, dname = _random_input((g, n, k))
        for b2 in (False, True):
            name, shape = f"dual_grouped {'2d' if b2 else '1d'}", f"G={g} n={n} k={k}"
            try:
                out = mxrt.quantize_mx_dual_grouped(w, args.fmt, block_2d=b2)
                moved = _nbytes(w, out.row.data, out.row.scales, out.col.data, out.col.scales)
                t = core.cupy_mean_time(lambda w=w, b2=b2: mxrt.quantize_mx_dual_grouped(w, args.fmt, block_2d=b2))
            except Exception as e:  # a case failing is a row with its reason
                rows.append(_row(name, shape, None, 0, note=f"{type(e).__name__}: {str(e)[:160]}"))
                continue
            rows.append(_row(name, shape, t, moved, method="events"))
            ses.log(f"  {name:24} {shape:22} {t * 1e6:9.1f} us")
        del w
        ses.save()
    res["input_dtype"] = dname
    add_bandwidth(rows, copy_bw)
    ses.save()


def run_cpu(ses: Session, args: argparse.Namespace) -> None:
    """No GPU: the numpy grouped quantizers on a small MoE-like input."""
    import ml_dtypes

    import mxrt

    rows = ses.result["rows"]
    rng = np.random.default_rng(0)
    for total, k, num_groups in ses.track(activation_shapes(args, gpu=False), "grouped (numpy)", str):
        x = rng.standard_normal((total, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        lens = split(total, num_groups, seed=k + num_groups)
        shape = f"T={total} k={k} G={num_groups}"
        for colwise in (False, True):
            out = mxrt.quantize_mx_grouped(x, lens, args.fmt, colwise=colwise, backend="numpy")
            t = core.host_time(
                lambda x=x, lens=lens, c=colwise: mxrt.quantize_mx_grouped(
                    x, lens, args.fmt, colwise=c, backend="numpy"
                )
            )
            name = "grouped row+col (numpy)" if colwise else "grouped row (numpy)"
            rows.append(_row(name, shape, t, _moved(x, out), method="wall", note="numpy reference"))
    for g, n, k in weight_shapes(args, gpu=False):
        w = rng.standard_normal((g, n, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        out = mxrt.quantize_mx_dual_grouped(w, args.fmt, backend="numpy")
        moved = _nbytes(w, out.row.data, out.row.scales, out.col.data, out.col.scales)
        t = core.host_time(lambda w=w: mxrt.quantize_mx_dual_grouped(w, args.fmt, backend="numpy"))
        rows.append(_row("dual_grouped 1d (numpy)", f"G={g} n={n} k={k}", t, moved, method="wall", note="numpy"))
    add_bandwidth(rows, None)
    ses.save()


def add_bandwidth(rows: list[dict], copy_bw: float | None) -> list[dict]:
    for r in rows:
        bw = r["bytes"] / r["s"] if r.get("s") else None
        r["us"] = None if r.get("s") is None else r["s"] * 1e6
        r["tbps"] = None if bw is None else bw / 1e12
        r["pct_copy"] = None if bw is None or not copy_bw else 100 * bw / copy_bw
    return rows


COLUMNS = [
    Column("kernel", lambda r: r["kernel"]),
    Column("shape", lambda r: r["shape"]),
    Column("us", lambda r: fmt_num(r.get("us"), ".1f"), right=True),
    Column("TB/s", lambda r: fmt_num(r.get("tbps"), ".3g"), right=True),
    Column("% of copy", lambda r: fmt_num(r.get("pct_copy"), ".1f"), right=True),
    Column("method", lambda r: r.get("method") or "-"),
    Column("note", lambda r: r.get("note") or ""),
]


def table(result: dict) -> str:
    return core.markdown_table(result["rows"], COLUMNS)


def plot(result: dict, path: str) -> None:
    rows = [r for r in result["rows"] if r.get("s") and r["shape"]]
    gpu = any(r.get("pct_copy") is not None for r in rows)
    key, ylabel = ("pct_copy", "% of d2d copy") if gpu else ("tbps", "TB/s (numpy, host)")
    groups = list(dict.fromkeys(r["shape"] for r in rows))
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    cell = {(r["shape"], r["kernel"]): r.get(key) for r in rows}
    series = {kn: [cell.get((g, kn)) for g in groups] for kn in kernels}
    title = f"grouped quantizer bandwidth -> {result.get('fmt', 'e4m3')} ({result.get('device', 'CPU')})"
    core.bar_plot(path, [core.Panel(title, ylabel, groups, series)])
