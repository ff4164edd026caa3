"""``mxrt bench gemm``: dense MX GEMM ``d = a @ b.T`` (bf16 out), mxrt against the peers on this machine.

Peers (issue 5, performance section), each checked against a float64 reference on a sub-block first:

* ``cuBLAS bf16``        ``torch.matmul`` on bf16 copies of the unquantized inputs.
* ``cuBLAS fp8 tensor``  ``torch._scaled_mm``: e4m3 operands with ONE fp32 scale per tensor (amax / 448), out
  bf16. It applies no block scales at all: a speed ceiling for fp8 tensor cores, not an MX GEMM.
* ``Triton dot_scaled``  a Triton kernel around ``tl.dot_scaled`` (:mod:`mxrt.bench.gemm_peers`), best of a
  block-config sweep. On sm_90 Triton emulates it (upcast to bf16, bf16 wgmma).
* ``deq+cuBLAS compiled`` what an H100 user does today: MX -> bf16 (code lookup table x 2^(scale-127)) then
  ``torch.matmul``, the whole function under ``torch.compile``; the baseline of the issue's ">= 1.4x" target.
* ``mxrt <path> sk<s>[a]`` ``mxrt.gemm_mx(a, b, out_dtype="bfloat16", backend="gpu")`` per registered GPU GEMM
  path of the device's target (forced with ``MXRT_GEMM_PATH``); at small M also ``split_k`` 2/4/8,
  deterministic and atomic (``a``).

Inputs: N(0, 1) float32 drawn on the GPU, quantized by mxrt's GPU ``quantize_mx`` (RCEIL); torch sees the same
device buffers through DLPack. Timing: CUDA-graph replays over rotating input sets (:mod:`mxrt.bench.core`).
TFLOP/s = 2 M N K / t. Unless ``--no-overhead``, the run ends with the host-overhead rows of
:mod:`mxrt.bench.overhead` (wall time per call with no graph, against ``torch.matmul``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

import numpy as np

from ..errors import ShapeError
from . import core, overhead
from .core import Column, Session, fmt_num, shape_label, tflops
from .gemm_peers import (
    CHECK_ROWS,
    SMALL_M_LIMIT,
    TRITON_KEEP,
    TritonConfig,
    check_block,
    code_lut,
    dequant_gemm,
    fit_block_k,
    scale_lut,
    triton_candidates,
    triton_kernel,
)

HELP = "MX GEMM vs cuBLAS bf16 / fp8, Triton dot_scaled, compiled dequant+cuBLAS; then host overhead"

# (M, N, K). 8192^3 and the seeds' MoE shapes (M = 4096 tokens; [N, K] = [4096, 7168], [7168, 2048],
# [5760, 2880]: DeepSeek-V3 / Qwen-MoE / gpt-oss expert projections).
MAIN_SHAPES = [(8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
# Small M (decode / small expert batches) against a [7168, 4096] weight: at M <= 128 a 128-wide N tiling gives
# 7168 / 128 = 56 output tiles for 132 SMs, so split-K 2-4 is what fills the chip, and K = 4096 = 128 scale
# blocks still leaves 16 of them per split at split_k = 8. The weight (29 MB fp8) fits the 50 MB L2, so the
# input sets rotate.
SMALL_M_SHAPES = [(16, 7168, 4096), (64, 7168, 4096), (256, 7168, 4096)]
QUICK_SHAPES = [(4096, 7168, 2048), (64, 7168, 4096)]
CPU_SHAPES = [(64, 256, 512)]  # the numpy reference on a machine without a GPU
FORMATS = {"mxfp8": "e4m3", "mxfp4": "e2m1"}
SPLIT_KS = (2, 4, 8)

PEER_BF16 = "cuBLAS bf16"
PEER_FP8 = "cuBLAS fp8 tensor"
PEER_TRITON = "Triton dot_scaled"
PEER_DEQUANT = "deq+cuBLAS compiled"
PEER_NUMPY = "mxrt numpy reference"
PEER_NUMPY_F32 = "numpy f32 matmul"


# --- arguments ---------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="two shapes, three Triton configs")
    p.add_argument("--only", choices=("peers", "mxrt"), help="peers: skip mxrt; mxrt: mxrt + the compiled baseline")
    p.add_argument("--formats", default="mxfp8,mxfp4", help="comma list of mxfp8, mxfp4")
    p.add_argument("--shapes", help="comma list of MxNxK (default: 8192^3, the MoE shapes, the small-M sweep)")
    p.add_argument("--no-overhead", action="store_true", help="skip the host-overhead rows at the end")
    p.add_argument("--paths", help="comma list of the mxrt GEMM paths to time (default: every path of the target)")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton dot_scaled sweep (its compiles)")


def finish_args(args: argparse.Namespace) -> None:
    """Convert and check the parsed arguments in place; ShapeError / ValueError with the message otherwise."""
    fmts = [f.strip() for f in str(args.formats).split(",") if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        raise ValueError(f"--formats {args.formats!r}: expected a comma list of {sorted(FORMATS)}")
    args.formats = fmts
    if args.shapes is not None and not isinstance(args.shapes, list):
        args.shapes = [parse_shape(s) for s in args.shapes.split(",") if s.strip()]
        if not args.shapes:
            raise ShapeError("--shapes names no shape; expected a comma list of MxNxK")
    if args.reps < 1:
        raise ValueError("--reps must be >= 1")


def parse_shape(text: str) -> tuple[int, int, int]:
    m, n, k = core.parse_shape(text, 3, "MxNxK")
    if k % 32:
        raise ShapeError(f"{text!r}: K must be a multiple of 32 (the Triton peer's scale tiles)")
    return m, n, k


def shapes_for(args: argparse.Namespace, gpu: bool = True) -> list[tuple[int, int, int]]:
    if args.shapes:
        return list(args.shapes)
    if not gpu:
        return list(CPU_SHAPES)
    return list(QUICK_SHAPES) if args.quick else MAIN_SHAPES + SMALL_M_SHAPES


# --- rows, ratios, table, plot (pure Python) -------------------------------------------------------------------


def add_ratios(rows: list[dict]) -> list[dict]:
    """Fill ``vs_dequant`` and ``vs_triton`` of every timed row: its TFLOP/s over the compiled dequant+cuBLAS row
    and over the best Triton row of the same (shape, format); None where either is missing."""
    base: dict[tuple[str, str], float] = {}
    tri: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (r["shape"], r["fmt"])
        if r.get("tflops") is None:
            continue
        if r["peer"] == PEER_DEQUANT:
            base[key] = r["tflops"]
        if r["peer"].startswith(PEER_TRITON):
            tri[key] = max(tri.get(key, 0.0), r["tflops"])
    for r in rows:
        key = (r["shape"], r["fmt"])
        t = r.get("tflops")
        r["vs_dequant"] = t / base[key] if t is not None and key in base else None
        r["vs_triton"] = t / tri[key] if t is not None and key in tri else None
    return rows


def _tflops_cell(t: float | None) -> str:
    return fmt_num(t, ".1f" if t is None or t >= 0.1 else ".2g")  # the numpy reference runs at GFLOP/s


def _check_cell(r: dict) -> str:
    if r.get("tflops") is None:
        return f"skipped: {r.get('note', '')}".strip()
    return r.get("check") or ""


COLUMNS = [
    Column("shape MxNxK", lambda r: r["shape"]),
    Column("format", lambda r: r["fmt"]),
    Column("peer", lambda r: r["peer"]),
    Column("TFLOP/s", lambda r: _tflops_cell(r.get("tflops")), right=True),
    Column("ms", lambda r: fmt_num(None if r.get("seconds") is None else r["seconds"] * 1e3, ".4f"), right=True),
    Column("vs deq+cuBLAS", lambda r: fmt_num(r.get("vs_dequant"), ".2f"), right=True),
    Column("vs Triton", lambda r: fmt_num(r.get("vs_triton"), ".2f"), right=True),
    Column("check", _check_cell),
    Column("method", lambda r: r.get("method") or "-"),
]


def format_table(rows: list[dict]) -> str:
    """A markdown table: shape, format, peer, TFLOP/s, ms, ratios, check, timing method."""
    return core.markdown_table(rows, COLUMNS)


def splitk_summary(rows: list[dict]) -> list[str]:
    """Per (shape, format, mxrt path): the best split-K row against that path's split_k = 1 row."""
    out = []
    groups: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in rows:
        parts = r["peer"].split()
        if r.get("tflops") is None or parts[0] != "mxrt" or len(parts) != 3:
            continue
        groups.setdefault((r["shape"], r["fmt"], parts[1]), {})[parts[2]] = r["tflops"]
    for (shape, fmt, path), v in groups.items():
        if "sk1" not in v or len(v) < 2:
            continue
        best = max((x for x in v if x != "sk1"), key=v.__getitem__)
        out.append(
            f"{shape} {fmt} {path}: sk1 {v['sk1']:.1f} TFLOP/s, best {best} {v[best]:.1f} ({v[best] / v['sk1']:.2f}x)"
        )
    return out


def table(result: dict) -> str:
    rows = add_ratios(result["rows"])
    lines = []
    if result.get("copy_TBps"):
        lines.append(f"device {result.get('device')}: d2d copy {result['copy_TBps']:.2f} TB/s (read + write)")
    lines += [f"skipped {s}" for s in result.get("skipped", [])]
    lines += [f"split-K {s}" for s in splitk_summary(rows)]
    lines.append(format_table(rows))
    if result.get("overhead"):
        lines += ["", overhead.format_table(result["overhead"])]
    return "\n".join(lines)


def plot_series(rows: list[dict]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Groups ``shape / MX format`` and one series per peer. The bf16 and fp8-per-tensor peers (no MX format)
    stand in every MX group of their shape; the mxrt rows collapse into ``mxrt (best)``, the best path and split-K
    of each group (which one is in the table)."""
    timed = [r for r in rows if r.get("tflops") is not None]
    mx = {r["shape"]: [] for r in timed}
    for r in timed:
        if r["fmt"] in FORMATS and r["fmt"] not in mx[r["shape"]]:
            mx[r["shape"]].append(r["fmt"])
    groups: list[str] = []
    best: dict[tuple[str, str], float] = {}
    for r in timed:
        peer = "mxrt (best)" if r["peer"].split()[0] == "mxrt" else r["peer"]
        for fmt in [r["fmt"]] if r["fmt"] in FORMATS else mx[r["shape"]] or [r["fmt"]]:
            g = f"{r['shape']}\n{fmt}"
            if g not in groups:
                groups.append(g)
            best[(g, peer)] = max(best.get((g, peer), 0.0), r["tflops"])
    peers = list(dict.fromkeys(p for _, p in best))
    return groups, {p: [best.get((g, p)) for g in groups] for p in peers}


def plot(result: dict, path: str) -> None:
    groups, series = plot_series(result["rows"])
    where = result.get("device", "CPU")
    panels = [core.Panel(f"MX GEMM d = a @ b.T, bf16 out ({where})", "TFLOP/s", groups, series)]
    if result.get("overhead"):
        panels.append(overhead.panel(result["overhead"]))
    core.bar_plot(path, panels)


# --- CPU: the numpy reference ---------------------------------------------------------------------------------


def run_cpu(ses: Session, args: argparse.Namespace) -> None:
    """No GPU: time mxrt's numpy GEMM reference (and numpy's float32 matmul for scale) on small shapes."""
    import mxrt

    rows = ses.result["rows"]
    rng = np.random.default_rng(0)
    for m, n, k in ses.track(shapes_for(args, gpu=False), "gemm (numpy)", lambda s: shape_label(*s)):
        a32 = rng.standard_normal((m, k), dtype=np.float32)
        b32 = rng.standard_normal((n, k), dtype=np.float32)
        true = a32.astype(np.float64) @ b32.astype(np.float64).T
        t = core.host_time(lambda a=a32, b=b32: a @ b.T)
        row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": "f32", "peer": PEER_NUMPY_F32}
        rows.append(row | {"seconds": t, "tflops": tflops(m, n, k, t), "method": "wall", "check": "-"})
        for fmt_name in args.formats:
            f = FORMATS[fmt_name]
            qa, qb = mxrt.quantize_mx(a32, f, backend="numpy"), mxrt.quantize_mx(b32, f, backend="numpy")
            exact = mxrt.dequantize_mx(qa, np.float64) @ mxrt.dequantize_mx(qb, np.float64).T

            def call(qa: Any = qa, qb: Any = qb) -> Any:
                return mxrt.gemm_mx(qa, qb, out_dtype="bfloat16", backend="numpy")

            check, _ = check_block(call(), exact, true, f)
            t = core.host_time(call)
            row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": fmt_name, "peer": PEER_NUMPY}
            rows.append(row | {"seconds": t, "tflops": tflops(m, n, k, t), "method": "wall", "check": check})
            ses.log(f"  {shape_label(m, n, k):>16} {fmt_name:6} {PEER_NUMPY:28} {t * 1e3:10.3f} ms {check}")
        ses.save()
    if not args.no_overhead:
        ses.result["overhead"] = overhead.rows_cpu(ses, overhead.CPU_SHAPES)


# --- GPU --------------------------------------------------------------------------------------------------------


def run(ses: Session, args: argparse.Namespace) -> None:
    """Every shape: peers and mxrt rows, each checked then timed; then the host-overhead rows."""
    peers = core.discover_peers()
    bench = GemmBench(args, ses, peers)
    try:
        bw = core.copy_bandwidth(bench.l2)
    except Exception as e:  # the copy reference is context, not a reason to lose the GEMM rows
        bw = {}
        ses.log(f"d2d copy reference failed: {type(e).__name__}: {e}")
    res = ses.result
    res.update(device=core.device_name(), software=core.software(), peers=dataclasses.asdict(peers), copy_Bps=bw)
    res.update(copy_TBps=max(bw.values()) / 1e12 if bw else None, triton_sweep=bench.sweep, skipped=bench.skips)
    res["rows"] = bench.rows
    copy = "-" if not bw else f"{res['copy_TBps']:.2f}"
    ses.log(f"device {res['device']}, L2 {bench.l2 >> 20} MiB; d2d copy {copy} TB/s (read + write)")
    ses.log(f"peers: torch {peers.why_torch or 'yes'}; triton {peers.why_triton or 'yes'}")
    ses.log(f"mxrt GPU GEMM paths: {bench.mxrt_paths} ({bench.mxrt_reason or 'forced one by one'})")
    for m, n, k in ses.track(shapes_for(args), "gemm", lambda s: shape_label(*s)):
        if ses.budget.over():
            bench.skips.append(f"{shape_label(m, n, k)}: --budget-s {args.budget_s} spent")
            ses.log(f"shape {shape_label(m, n, k)} skipped: budget spent")
            continue
        try:
            bench.run_shape(m, n, k)
        except Exception as e:  # one shape failing (memory, a peer crash) must not lose the others
            bench.skips.append(f"{shape_label(m, n, k)}: {type(e).__name__}: {e}")
            ses.log(f"shape {shape_label(m, n, k)} failed: {type(e).__name__}: {e}")
        add_ratios(bench.rows)
        ses.save()
    bench.release()
    if not args.no_overhead:
        res["overhead"] = overhead.rows_gpu(ses, overhead.GPU_SHAPES, peers, args.reps)
    ses.save()


class GemmBench:
    def __init__(self, args: argparse.Namespace, ses: Session, peers: core.Peers):
        import cupy

        self.args, self.ses, self.peers, self.cupy = args, ses, peers, cupy
        self.torch: Any = None
        self.l2 = core.l2_bytes()
        self.rows: list[dict] = []
        self.sweep: list[dict] = []
        self.skips: list[str] = []
        self.kernel: Any = None
        self.compiled: Any = None
        self.best_triton: dict[tuple[str, bool], list[TritonConfig]] = {}
        if peers.torch:
            import torch

            self.torch = torch
            self.luts = {
                f: (torch.tensor(code_lut(f), device="cuda"), torch.tensor(scale_lut(), device="cuda"))
                for f in FORMATS.values()
            }
            # One static compile per (shape, format): 14 in a full run, over dynamo's default recompile limit (8),
            # past which it silently runs the function eagerly (seen in the first H100 run). Raise the limit, and
            # fail loudly rather than time an eager fallback where this torch has the switch.
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, 256)
            if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
                torch._dynamo.config.fail_on_recompile_limit_hit = True
            self.compiled = torch.compile(dequant_gemm, dynamic=False)
        self.mxrt_paths, self.mxrt_reason = self._mxrt_paths()

    def _time_torch(self, launches: list, reps: int) -> tuple[float, str]:
        return core.time_torch(launches, reps, log=self.ses.log)

    def _time_cupy(self, launches: list, reps: int) -> tuple[float, str]:
        return core.time_cupy(launches, reps, log=self.ses.log)

    def release(self) -> None:
        if self.torch is not None:
            self.torch.cuda.empty_cache()
        self.cupy.get_default_memory_pool().free_all_blocks()

    # -- mxrt discovery
    def _mxrt_paths(self) -> tuple[list[str], str]:
        """The GPU GEMM paths of this target, each forced in turn; ``["auto"]`` (mxrt picks) when the path table
        cannot be read, with the reason."""
        if self.args.only == "peers":
            return [], "--only peers"
        try:
            from mxrt.ops.gemm_paths import gemm_paths
            from mxrt.runtime import get_arch

            target = get_arch().target
            paths = [p.name for p in gemm_paths(target)]
            wanted = getattr(self.args, "paths", None)
            if wanted:
                keep = {w.strip() for w in str(wanted).split(",") if w.strip()}
                paths = [p for p in paths if p in keep]
        except Exception as e:  # the path table moved or failed: still time the public call
            return ["auto"], f"path table unavailable ({type(e).__name__}: {str(e)[:80]}); gemm_mx picks"
        if not paths:
            return ["auto"], f"no GPU GEMM path registered for target {target!r}; gemm_mx picks"
        return paths, ""

    # -- data
    def make_sets(self, m: int, n: int, k: int) -> tuple[list[dict], dict]:
        """Rotating input sets (all formats) and the host-side check data of set 0."""
        import mxrt

        cupy, torch = self.cupy, self.torch
        fmts = [FORMATS[f] for f in self.args.formats]
        mx_bytes = (m + n) * (k + k // 32)
        sets_n = core.n_input_sets(mx_bytes, self.l2)
        sets, host = [], {}
        rng = cupy.random.default_rng(12345 + m + n + k)
        for i in range(sets_n):
            a32 = rng.standard_normal((m, k), dtype=cupy.float32)
            b32 = rng.standard_normal((n, k), dtype=cupy.float32)
            s: dict = {"mx": {}}
            for f in fmts:
                s["mx"][f] = (mxrt.quantize_mx(a32, f, backend="gpu"), mxrt.quantize_mx(b32, f, backend="gpu"))
            if torch is not None and self.args.only != "mxrt":
                ta, tb = torch.from_dlpack(a32), torch.from_dlpack(b32)
                s["bf16"] = (ta.to(torch.bfloat16), tb.to(torch.bfloat16))
                sa, sb = ta.abs().amax() / 448.0, tb.abs().amax() / 448.0
                s["fp8"] = ((ta / sa).to(torch.float8_e4m3fn), (tb / sb).to(torch.float8_e4m3fn), sa, sb)
                del ta, tb
            if i == 0:
                r, c = min(CHECK_ROWS, m), min(CHECK_ROWS, n)
                host["a32"], host["b32"] = a32[:r].get().astype(np.float64), b32[:c].get().astype(np.float64)
                host["true"] = host["a32"] @ host["b32"].T
                host["exact"] = {}
                for f in fmts:
                    qa, qb = s["mx"][f]
                    host["exact"][f] = self._deq_rows(qa, r) @ self._deq_rows(qb, c).T
                host["r"], host["c"] = r, c
            del a32, b32
            sets.append(s)
        cupy.cuda.Device().synchronize()
        return sets, host

    @staticmethod
    def _deq_rows(q: Any, rows: int) -> np.ndarray:
        from mxrt import MXArray, dequantize_mx

        hq = MXArray(
            data=q.data[:rows].get(),
            scales=q.scales[:rows].get(),
            fmt=q.fmt,
            block_size=q.block_size,
            axis=1,
            shape=(rows, q.shape[1]),
            scale_mode=q.scale_mode,
        )
        return dequantize_mx(hq, np.float64)

    # -- rows
    def add(self, m, n, k, fmt_name, peer, fn_check, launches, timer, true_key, exact_key=None, host=None, note=""):
        row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": fmt_name, "peer": peer}
        try:
            out = fn_check()
            r, c = host["r"], host["c"]
            ref_exact = host["exact"][exact_key] if exact_key else None
            row["check"], row["check_ok"] = check_block(out[:r, :c], ref_exact, host["true"], true_key)
            del out
            t, method = timer(launches, self.args.reps)
            row.update(seconds=t, tflops=tflops(m, n, k, t), method=method, note=note)
        except Exception as e:  # a peer failing is a row with its reason, not a lost run
            row.update(seconds=None, tflops=None, note=f"{type(e).__name__}: {str(e)[:160]}")
        self.rows.append(row)
        ms = "-" if row.get("seconds") is None else f"{row['seconds'] * 1e3:.4f} ms"
        tf = "-" if row.get("tflops") is None else f"{row['tflops']:.1f} TFLOP/s"
        self.ses.log(f"  {row['shape']:>16} {fmt_name:6} {peer:28} {tf:>16} {ms:>14} {row.get('check', row['note'])}")
        return row

    def skip(self, m: int, n: int, k: int, fmt_name: str, peer: str, why: str) -> None:
        row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": fmt_name, "peer": peer}
        self.rows.append(row | {"seconds": None, "tflops": None, "note": why})

    def run_shape(self, m: int, n: int, k: int) -> None:
        torch = self.torch
        sets, host = self.make_sets(m, n, k)
        self.ses.log(f"shape {shape_label(m, n, k)}: {len(sets)} input set(s)")
        if self.args.only != "mxrt":
            if torch is None:
                self.skip(m, n, k, "bf16", PEER_BF16, self.peers.why_torch or "")
                self.skip(m, n, k, "fp8", PEER_FP8, self.peers.why_torch or "")
            else:
                bf = [s["bf16"] for s in sets]
                self.add(
                    m, n, k, "bf16", PEER_BF16, lambda: torch.matmul(bf[0][0], bf[0][1].t()),
                    [lambda a=a, b=b: torch.matmul(a, b.t()) for a, b in bf], self._time_torch, "bf16", host=host,
                )  # fmt: skip
                f8 = [s["fp8"] for s in sets]

                def smm(a, b, sa, sb):
                    return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

                self.add(
                    m, n, k, "fp8", PEER_FP8, lambda: smm(*f8[0]),
                    [lambda x=x: smm(*x) for x in f8], self._time_torch, "fp8_tensor", host=host,
                    note="per-tensor fp32 scales, no block scales",
                )  # fmt: skip
        for fmt_name in self.args.formats:
            f = FORMATS[fmt_name]
            if torch is None:
                self.skip(m, n, k, fmt_name, PEER_DEQUANT, self.peers.why_torch or "")
            else:
                ops = [self._torch_mx(s["mx"][f]) for s in sets]
                clut, slut = self.luts[f]
                self.add(
                    m, n, k, fmt_name, PEER_DEQUANT,
                    lambda o=ops[0], f=f, c=clut, s=slut: self.compiled(*o, k, f, c, s),
                    [lambda o=o, f=f, c=clut, s=slut: self.compiled(*o, k, f, c, s) for o in ops], self._time_torch,
                    f, f, host, note="torch.compile(dequant -> bf16, torch.matmul)",
                )  # fmt: skip
                if self.args.only != "mxrt":
                    if getattr(self.args, "no_triton", False):
                        self.skip(m, n, k, fmt_name, PEER_TRITON, "--no-triton")
                    elif self.peers.triton:
                        self.run_triton(m, n, k, fmt_name, f, ops, host)
                    else:
                        self.skip(m, n, k, fmt_name, PEER_TRITON, self.peers.why_triton or "")
            self.run_mxrt(m, n, k, fmt_name, f, [s["mx"][f] for s in sets], host)
        del sets
        self.release()

    def _torch_mx(self, pair):
        torch = self.torch
        qa, qb = pair
        return (
            torch.from_dlpack(qa.data),
            torch.from_dlpack(qa.scales),
            torch.from_dlpack(qb.data),
            torch.from_dlpack(qb.scales),
        )

    def _triton_launch(self, cfg: TritonConfig, ops, m, n, k, f):
        torch = self.torch
        if self.kernel is None:
            self.kernel = triton_kernel()
        a, sa, b, sb = ops
        if f == "e4m3":
            a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        grid = (-(-m // cfg.block_m) * -(-n // cfg.block_n),)

        def launch():
            self.kernel[grid](
                a, b, sa, sb, c, m, n, k, a.stride(0), b.stride(0), sa.stride(0), sb.stride(0), c.stride(0),
                FMT=f, EVEN_K=(k % cfg.block_k == 0), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            )  # fmt: skip
            return c

        return launch

    def run_triton(self, m, n, k, fmt_name, f, ops, host) -> None:
        import time

        regime = (fmt_name, m <= SMALL_M_LIMIT)
        configs, full = triton_candidates(self.best_triton.get(regime), m, self.args.quick)
        configs = fit_block_k(configs, k)
        results = []
        for cfg in configs:
            t0 = time.monotonic()
            try:
                launches = [self._triton_launch(cfg, o, m, n, k, f) for o in ops]
                launches[0]()
                self.torch.cuda.synchronize()
                out = launches[0]()
                r, c = host["r"], host["c"]
                check, ok = check_block(out[:r, :c], host["exact"][f], host["true"], f)
                t, method = self._time_torch(launches, max(3, self.args.reps // 2))
                entry = {"shape": shape_label(m, n, k), "fmt": fmt_name, "config": cfg.label, "seconds": t,
                         "tflops": tflops(m, n, k, t), "check": check, "ok": ok, "method": method,
                         "wall_s": time.monotonic() - t0}  # fmt: skip
            except Exception as e:  # a config that fails to compile or run is a sweep entry with its reason
                entry = {"shape": shape_label(m, n, k), "fmt": fmt_name, "config": cfg.label, "tflops": None,
                         "note": f"{type(e).__name__}: {str(e)[:160]}"}  # fmt: skip
            self.sweep.append(entry)
            what = entry.get("check", entry.get("note"))
            self.ses.log(f"    triton {fmt_name} {cfg.label:24} {entry.get('tflops') or 0:8.1f} {what}")
            if entry.get("tflops") is not None and entry["ok"]:
                results.append((entry["tflops"], cfg, entry))
        results.sort(key=lambda x: -x[0])
        if full:
            self.best_triton[regime] = [c for _, c, _ in results[:TRITON_KEEP]]
        row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": fmt_name}
        if results:
            tf, cfg, e = results[0]
            row.update(peer=PEER_TRITON, seconds=e["seconds"], tflops=tf, check=e["check"], check_ok=True,
                       method=e["method"], note=f"best of {len(configs)}: {cfg.label}")  # fmt: skip
        else:
            row.update(peer=PEER_TRITON, seconds=None, tflops=None, note="no config passed the check")
        self.rows.append(row)

    def run_mxrt(self, m, n, k, fmt_name, f, pairs, host) -> None:
        if self.args.only == "peers":
            return
        import mxrt
        from mxrt.config import ENV_GEMM_PATH

        variants = [(1, True)]
        if m <= SMALL_M_LIMIT:
            variants += [(s, d) for s in SPLIT_KS for d in (True, False)]
        for path in self.mxrt_paths:
            for split_k, det in variants:
                peer = f"mxrt {path} sk{split_k}{'' if det else 'a'}"

                def call(pair, path=path, split_k=split_k, det=det):
                    old = os.environ.get(ENV_GEMM_PATH)
                    if path != "auto":
                        os.environ[ENV_GEMM_PATH] = path
                    try:
                        return mxrt.gemm_mx(*pair, out_dtype="bfloat16", split_k=split_k, deterministic=det,
                                            backend="gpu")  # fmt: skip
                    finally:
                        if old is None:
                            os.environ.pop(ENV_GEMM_PATH, None)
                        else:
                            os.environ[ENV_GEMM_PATH] = old

                launches, how = self._path_launches(path, pairs, split_k, det, call)
                self.add(
                    m, n, k, fmt_name, peer, lambda call=call: call(pairs[0]),
                    launches or [lambda p=p, call=call: call(p) for p in pairs], self._time_cupy, f, f, host,
                    note=how,
                )  # fmt: skip

    def _path_launches(self, name: str, pairs, split_k: int, det: bool, call) -> tuple[list | None, str]:
        """Launch-only callables ``path.run(dg)`` over preallocated outputs (no validation or allocation per
        call), or (None, why) to time the public ``gemm_mx`` calls instead."""
        if name == "auto":
            return None, "timed via gemm_mx"
        try:
            from mxrt.ops.gemm_paths import DeviceGemm, gemm_paths
            from mxrt.problems import gemm_problem
            from mxrt.runtime import get_arch

            arch = get_arch()
            path = next(p for p in gemm_paths(arch.target) if p.name == name)
            launches = []
            d = call(pairs[0])  # the public call: its result's type and dtype are what path.run writes
            for qa, qb in pairs:
                p = gemm_problem(qa, qb, out_dtype="bfloat16", split_k=split_k, deterministic=det)
                out = self.cupy.empty_like(d)
                dg = DeviceGemm(p=p, a_codes=qa.data, b_codes=qb.data, a_scales=qa.scales, b_scales=qb.scales,
                                out=out, arch=arch)  # fmt: skip
                why = path.supports(dg)
                if why is not None:
                    return None, f"timed via gemm_mx ({why})"
                launches.append(lambda dg=dg, path=path: path.run(dg))
            return launches, "timed via path.run (launch only)"
        except Exception as e:  # internals moved: time the public call, and say so in the row
            return None, f"timed via gemm_mx (path.run: {type(e).__name__}: {str(e)[:80]})"
