"""``mxrt bench layouts``: GPU scale preshuffles and ``moe_align_block_size`` (CUDA events around eager calls).

Preshuffle of the scales of an [8192, 8192] MX tensor (8192 x 256 bytes) into every layout, against a
device-to-device copy of the same size timed the same way; ``moe_align_block_size`` on decode and prefill
routing shapes (the one-CTA and multi-CTA paths).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from . import core
from .core import Column, Session, fmt_num

HELP = "preshuffle_scales (every layout) vs a same-size copy, and moe_align_block_size"

SCALE_ROWS, SCALE_COLS = 8192, 256
CPU_SCALES = (512, 64)
PRESHUFFLES = [("aiter32x8", None), ("turbo16x4", None), ("turbo16x4", np.uint32), ("cublas128x4", None)]
# (tokens, topk, experts, block_size); the 4096-token case also runs with 8x the tokens (the multi-CTA path)
MOE = [(1, 8, 256, 16), (64, 8, 256, 16), (512, 8, 256, 64), (4096, 8, 256, 128)]
CPU_MOE = [(64, 8, 256, 16)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iters", type=int, default=50, help="calls per timing")


def finish_args(args: argparse.Namespace) -> None:
    if args.iters < 1:
        raise ValueError("--iters must be >= 1")


def _row(kernel: str, shape: str, seconds: float | None, **kw: Any) -> dict:
    return {"kernel": kernel, "shape": shape, "s": seconds, "us": None if seconds is None else seconds * 1e6} | kw


def _cases(s: Any) -> list[tuple[str, Any]]:
    import mxrt

    out = []
    for layout, dtype in PRESHUFFLES:
        name = f"preshuffle {layout}{'/u32' if dtype else ''}"
        out.append((name, lambda layout=layout, dtype=dtype: mxrt.preshuffle_scales(s, layout, dtype=dtype)))
    out.append(("preshuffle deepgemm_ue8m0", lambda: mxrt.preshuffle_scales(s, "deepgemm_ue8m0")))
    return out


def run(ses: Session, args: argparse.Namespace) -> None:
    import cupy

    import mxrt

    ses.result.update(device=core.device_name(), software=core.software())
    rows = ses.result["rows"]
    rng = np.random.default_rng(0)
    s = cupy.asarray(rng.integers(0, 256, (SCALE_ROWS, SCALE_COLS), dtype=np.uint8))
    dst = cupy.empty_like(s)
    shape = f"{SCALE_ROWS}x{SCALE_COLS}"
    t_copy = core.cupy_mean_time(lambda: dst.__setitem__(slice(None), s), iters=args.iters)
    rows.append(_row("d2d copy", shape, t_copy, method="events"))
    for name, fn in _cases(s):
        try:
            t = core.cupy_mean_time(fn, iters=args.iters)
        except Exception as e:  # a layout failing is a row with its reason
            rows.append(_row(name, shape, None, note=f"{type(e).__name__}: {str(e)[:160]}"))
            continue
        rows.append(_row(name, shape, t, method="events", pct_copy=100 * t_copy / t))
        ses.log(f"  {name:36} {t * 1e6:8.1f} us ({100 * t_copy / t:5.1f}% of copy speed)")
    try:
        from mxrt.ops import moe as moe_ops

        plan = moe_ops.plan_moe_align
    except (ImportError, AttributeError):  # the planner moved: the path column stays empty
        plan = None
    for tokens, topk, e, bs in ses.track(MOE, "moe_align", lambda c: f"T={c[0]}"):
        ids = cupy.asarray(rng.integers(0, e, (tokens, topk)).astype(np.int32))
        for idx in [ids] + ([cupy.tile(ids, (8, 1))] if tokens == 4096 else []):
            t_x = idx.shape[0]
            path = ""
            if plan is not None:
                p = plan(int(idx.size), e)
                path = "1 CTA" if p.small else f"{p.num_ctas} CTAs"
            name, shape = "moe_align_block_size", f"T={t_x} topk={topk} E={e} bs={bs}"
            t = core.cupy_mean_time(lambda idx=idx, bs=bs, e=e: mxrt.moe_align_block_size(idx, bs, e), iters=args.iters)
            rows.append(_row(name, shape, t, method="events", note=path))
            ses.log(f"  {name} {shape:28} {t * 1e6:8.1f} us ({path})")
    ses.save()


def run_cpu(ses: Session, args: argparse.Namespace) -> None:
    """No GPU: the numpy preshuffles and moe_align_block_size on small inputs."""
    import mxrt

    rows = ses.result["rows"]
    rng = np.random.default_rng(0)
    s = rng.integers(0, 256, CPU_SCALES, dtype=np.uint8)
    shape = f"{CPU_SCALES[0]}x{CPU_SCALES[1]}"
    t_copy = core.host_time(lambda: s.copy())
    rows.append(_row("host copy", shape, t_copy, method="wall"))
    for name, fn in _cases(s):
        t = core.host_time(fn)
        rows.append(_row(name + " (numpy)", shape, t, method="wall", pct_copy=100 * t_copy / t))
    for tokens, topk, e, bs in CPU_MOE:
        ids = rng.integers(0, e, (tokens, topk)).astype(np.int32)
        t = core.host_time(lambda ids=ids, bs=bs, e=e: mxrt.moe_align_block_size(ids, bs, e, backend="numpy"))
        rows.append(_row("moe_align_block_size (numpy)", f"T={tokens} topk={topk} E={e} bs={bs}", t, method="wall"))
    ses.save()


COLUMNS = [
    Column("kernel", lambda r: r["kernel"]),
    Column("shape", lambda r: r["shape"]),
    Column("us", lambda r: fmt_num(r.get("us"), ".1f"), right=True),
    Column("% of copy speed", lambda r: fmt_num(r.get("pct_copy"), ".1f"), right=True),
    Column("method", lambda r: r.get("method") or "-"),
    Column("note", lambda r: r.get("note") or ""),
]


def table(result: dict) -> str:
    return core.markdown_table(result["rows"], COLUMNS)


def plot(result: dict, path: str) -> None:
    rows = [r for r in result["rows"] if r.get("us")]
    groups = [f"{r['kernel']}\n{r['shape']}" for r in rows]
    panel = core.Panel(
        f"layouts ({result.get('device', 'CPU')})", "us per call", groups, {"time": [r["us"] for r in rows]}
    )
    core.bar_plot(path, [panel])
