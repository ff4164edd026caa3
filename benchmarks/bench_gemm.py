"""Dense MX GEMM ``d = a @ b.T`` (bf16 out): mxrt against the H100 peers, in one process (not a test).

Peers (issue 5, performance section), each checked against a float64 reference on a sub-block first:

* ``cuBLAS bf16``        ``torch.matmul`` on bf16 copies of the unquantized inputs.
* ``cuBLAS fp8 tensor``  ``torch._scaled_mm``: e4m3 operands with ONE fp32 scale per tensor (amax / 448), out
  bf16. It applies no block scales at all: a speed ceiling for fp8 tensor cores, not an MX GEMM.
* ``Triton dot_scaled``  a Triton kernel written here around ``tl.dot_scaled`` (uint8 E8M0 scales [M, K/32] and
  [N, K/32]; e2m1 operands packed two per byte along K), best of a block-config sweep. On sm_90 Triton emulates
  it (upcast to bf16, bf16 wgmma). Checked exact against mxrt's float64 reference of the dequantized inputs.
* ``deq+cuBLAS compiled`` what an H100 user does today: MX -> bf16 (code lookup table x 2^(scale-127)) then
  ``torch.matmul``, the whole function under ``torch.compile``; the baseline of the issue's ">= 1.4x" target.
* ``mxrt <path> sk<s>[a]`` ``mxrt.gemm_mx(a, b, out_dtype="bfloat16", backend="gpu")`` per registered GPU GEMM
  path of the device's target (forced with ``MXRT_GEMM_PATH``); at small M also ``split_k`` 2/4/8,
  deterministic and atomic (``a``). Skipped, with the reason, when mxrt has no GPU GEMM backend.

Inputs: N(0, 1) float32 drawn on the GPU, quantized by mxrt's GPU ``quantize_mx`` (RCEIL); torch sees the same
device buffers through DLPack. Timing: each peer's calls are captured into a CUDA graph (torch.cuda.CUDAGraph
for torch/Triton, a CuPy stream capture for mxrt), round-robin over input sets that together exceed 3x the L2
(one set when a set alone is 2x the L2), and the graph replays are timed with CUDA events: median of ``--reps``
replays / calls per graph. When a capture fails, CUDA events around back-to-back calls (column ``method``).
TFLOP/s = 2 M N K / t.

``python benchmarks/bench_gemm.py [--quick] [--only peers|mxrt] [--json FILE] [--budget-s S]``
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

# (M, N, K). 8192^3 and the seeds' MoE shapes (M = 4096 tokens; [N, K] = [4096, 7168], [7168, 2048],
# [5760, 2880]: DeepSeek-V3 / Qwen-MoE / gpt-oss expert projections).
MAIN_SHAPES = [(8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)]
# Small M (decode / small expert batches) against a [7168, 4096] weight: at M <= 128 a 128-wide N tiling gives
# 7168 / 128 = 56 output tiles for 132 SMs, so split-K 2-4 is what fills the chip, and K = 4096 = 128 scale
# blocks still leaves 16 of them per split at split_k = 8. The weight (29 MB fp8) fits the 50 MB L2, so the
# input sets rotate.
SMALL_M_SHAPES = [(16, 7168, 4096), (64, 7168, 4096), (256, 7168, 4096)]
QUICK_SHAPES = [(4096, 7168, 2048), (64, 7168, 4096)]
FORMATS = {"mxfp8": "e4m3", "mxfp4": "e2m1"}
SPLIT_KS = (2, 4, 8)
SMALL_M_LIMIT = 256  # shapes with M <= this get the split-K rows

PEER_BF16 = "cuBLAS bf16"
PEER_FP8 = "cuBLAS fp8 tensor"
PEER_TRITON = "Triton dot_scaled"
PEER_DEQUANT = "deq+cuBLAS compiled"

# Correctness thresholds (issue 5 Tests): MX peers vs the float64 GEMM of the dequantized inputs (bf16 out) and
# vs the unquantized inputs; bf16 / fp8-per-tensor peers vs the unquantized inputs only.
EXACT_TOL = 1e-5
TRUE_TOL = {"e4m3": 1e-3, "e2m1": 2e-2, "bf16": 1e-4, "fp8_tensor": 1e-3}
CHECK_ROWS = 256


@dataclass(frozen=True)
class TritonConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8

    @property
    def label(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"


# Swept in full on the first shape of each regime (M > SMALL_M_LIMIT, and small M with TRITON_SMALL_M added) per
# format; the best TRITON_KEEP of that sweep are reused on the regime's other shapes (see triton_candidates).
# Shared memory stays under 228 KB for fp8 at every entry (stages x (BM + BN) x BK bytes).
TRITON_CONFIGS = [
    TritonConfig(128, 128, 128, 8, 3),
    TritonConfig(128, 128, 128, 4, 3),
    TritonConfig(128, 128, 64, 4, 4),
    TritonConfig(128, 256, 64, 8, 3),
    TritonConfig(128, 256, 128, 8, 3),
    TritonConfig(256, 128, 64, 8, 3),
    TritonConfig(64, 128, 128, 4, 4),
    TritonConfig(128, 64, 128, 4, 4),
]
TRITON_SMALL_M = [TritonConfig(64, 128, 128, 4, 4), TritonConfig(64, 64, 128, 4, 4), TritonConfig(64, 128, 256, 4, 3)]
TRITON_KEEP = 3


# --- pure-Python parts (tested on the CPU by tests/test_bench_gemm.py) -------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two shapes, three Triton configs")
    ap.add_argument("--only", choices=("peers", "mxrt"), help="peers: skip mxrt; mxrt: mxrt + the compiled baseline")
    ap.add_argument("--json", metavar="PATH", help="write every row, the Triton sweep and the skips here")
    ap.add_argument("--reps", type=int, default=10, help="timed graph replays per row (median)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting new shapes after this many seconds")
    ap.add_argument("--formats", default="mxfp8,mxfp4", help="comma list of mxfp8, mxfp4")
    ap.add_argument("--shapes", help="comma list of MxNxK (default: 8192^3, the MoE shapes, the small-M sweep)")
    a = ap.parse_args(argv)
    fmts = [f.strip() for f in a.formats.split(",") if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        ap.error(f"--formats {a.formats!r}: expected a comma list of {sorted(FORMATS)}")
    a.formats = fmts
    try:
        a.shapes = [parse_shape(x) for x in a.shapes.split(",")] if a.shapes else None
    except ValueError as e:
        ap.error(f"--shapes {a.shapes!r}: {e}")
    if a.reps < 1:
        ap.error("--reps must be >= 1")
    return a


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.strip().lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"{text!r} is not MxNxK with positive integers")
    m, n, k = (int(p) for p in parts)
    if k % 32:
        raise ValueError(f"{text!r}: K must be a multiple of 32 (the Triton peer's scale tiles)")
    return m, n, k


def shapes_for(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    if args.shapes:
        return list(args.shapes)
    return list(QUICK_SHAPES) if args.quick else MAIN_SHAPES + SMALL_M_SHAPES


def tflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e12


def n_input_sets(bytes_per_set: int, l2_bytes: int, cap: int = 4) -> int:
    """Input sets to rotate so that together they exceed 3x the L2 (at most ``cap``); one set when it alone is at
    least twice the L2 (its operands cannot stay resident between calls)."""
    if bytes_per_set >= 2 * l2_bytes:
        return 1
    return max(1, min(cap, -(-3 * l2_bytes // max(1, bytes_per_set))))


def shape_label(m: int, n: int, k: int) -> str:
    return f"{m}x{n}x{k}"


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


def _fmt_num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def fit_block_k(configs: list[TritonConfig], k: int) -> list[TritonConfig]:
    """Each config with BLOCK_K lowered to the largest power of two <= it that divides ``k`` (>= 32), so the
    kernel's unmasked EVEN_K loop runs (K = 2880 = 64 x 45 takes BLOCK_K 64); duplicates dropped, order kept."""
    out: list[TritonConfig] = []
    for c in configs:
        bk = c.block_k
        while bk > 32 and k % bk:
            bk //= 2
        c = dataclasses.replace(c, block_k=bk)
        if c not in out:
            out.append(c)
    return out


def triton_candidates(best: list[TritonConfig] | None, m: int, quick: bool) -> tuple[list[TritonConfig], bool]:
    """The Triton configs to try for a shape, and whether that is a full sweep (whose best are then kept): the
    regime's kept best when there are any, else every config (plus TRITON_SMALL_M at small M); --quick: 3."""
    if quick:
        return TRITON_CONFIGS[:3], False
    small = TRITON_SMALL_M if m <= SMALL_M_LIMIT else []
    if best:
        return list(best), False
    return TRITON_CONFIGS + [c for c in small if c not in TRITON_CONFIGS], True


def format_table(rows: list[dict]) -> str:
    """A markdown table: shape, format, peer, TFLOP/s, ms, ratios, check, timing method."""
    head = "| shape MxNxK | format | peer | TFLOP/s | ms | vs deq+cuBLAS | vs Triton | check | method |"
    lines = [head, "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        ms = None if r.get("seconds") is None else r["seconds"] * 1e3
        check = r.get("check") or ""
        if r.get("tflops") is None:
            check = f"skipped: {r.get('note', '')}".strip()
        lines.append(
            f"| {r['shape']} | {r['fmt']} | {r['peer']} | {_fmt_num(r.get('tflops'), '.1f')} | "
            f"{_fmt_num(ms, '.4f')} | {_fmt_num(r.get('vs_dequant'), '.2f')} | {_fmt_num(r.get('vs_triton'), '.2f')} | "
            f"{check} | {r.get('method') or '-'} |"
        )
    return "\n".join(lines)


def splitk_summary(rows: list[dict]) -> list[str]:
    """Per (shape, format, mxrt path): the best split-K row against that path's split_k = 1 row."""
    out = []
    groups: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in rows:
        if r.get("tflops") is None or not r["peer"].startswith("mxrt "):
            continue
        path, variant = r["peer"].split()[1], r["peer"].split()[2]
        groups.setdefault((r["shape"], r["fmt"], path), {})[variant] = r["tflops"]
    for (shape, fmt, path), v in groups.items():
        if "sk1" not in v or len(v) < 2:
            continue
        best = max((x for x in v if x != "sk1"), key=v.get)
        out.append(
            f"{shape} {fmt} {path}: sk1 {v['sk1']:.1f} TFLOP/s, best {best} {v[best]:.1f} ({v[best] / v['sk1']:.2f}x)"
        )
    return out


def scale_lut() -> np.ndarray:
    """float32 [256]: E8M0 byte -> 2^(byte - 127); 0xFF -> NaN (2^-127 is an fp32 subnormal, exact)."""
    lut = np.ldexp(np.float64(1.0), np.arange(255) - 127).astype(np.float32)
    return np.append(lut, np.float32(np.nan))


def code_lut(fmt: str) -> np.ndarray:
    """float32 [2^bits]: element code -> value, from mxrt's decode table."""
    from mxrt.formats.codecs import decode_table

    return np.array(decode_table(fmt), dtype=np.float32)


def torch_dequant(codes, scales, k: int, fmt: str, codes_lut, scales_lut):
    """MX -> bf16 in torch, as an H100 user writes it: ``lut[code] * 2^(scale - 127)``, rounded once to bf16.

    codes : uint8 ``[rows, k]`` (e4m3) or ``[rows, ceil(k/2)]`` (e2m1, even element in the low nibble).
    scales : uint8 ``[rows, ceil(k/32)]``. codes_lut / scales_lut : float32 tensors of :func:`code_lut` /
    :func:`scale_lut` on the same device. The fp32 product is exact for every value whose result is an fp32
    normal, so the bf16 result equals ``mxrt.dequantize_mx(q, bfloat16)`` there.
    """
    import torch

    if fmt == "e2m1":
        codes = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(codes.shape[0], -1)
    rows, nb = scales.shape
    vals = codes_lut[codes.long()]
    if nb * 32 != vals.shape[1]:
        vals = torch.nn.functional.pad(vals, (0, nb * 32 - vals.shape[1]))
    vals = vals.reshape(rows, nb, 32) * scales_lut[scales.long()].unsqueeze(-1)
    return vals.reshape(rows, nb * 32)[:, :k].to(torch.bfloat16)


def dequant_gemm(a_codes, a_scales, b_codes, b_scales, k: int, fmt: str, codes_lut, scales_lut):
    """The compiled baseline's body: dequantize both operands to bf16, then cuBLAS ``a @ b.T``."""
    a = torch_dequant(a_codes, a_scales, k, fmt, codes_lut, scales_lut)
    b = torch_dequant(b_codes, b_scales, k, fmt, codes_lut, scales_lut)
    return a @ b.t()


# --- device parts -------------------------------------------------------------------------------------------


class Budget:
    def __init__(self, seconds: float):
        self.t0 = time.monotonic()
        self.seconds = seconds

    def over(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self.t0 > self.seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def _median_event_time(run, reps: int, torch) -> float:
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    return statistics.median(times)


def _calls_per_graph(t_one: float, n_sets: int, target_s: float = 0.02, cap: int = 200) -> int:
    calls = max(n_sets, min(cap, math.ceil(target_s / max(t_one, 1e-7))))
    return -(-calls // n_sets) * n_sets


def time_torch(launches, reps: int, torch) -> tuple[float, str]:
    """Seconds per call of torch/Triton launches: torch CUDA graph replays, else events around a loop."""
    torch.cuda.synchronize()
    for f in launches:  # compile / autotune / warm outside the capture
        f()
    torch.cuda.synchronize()
    t_one = _median_event_time(launches[0], 3, torch)
    calls = _calls_per_graph(t_one, len(launches))
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for f in launches:
                f()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="relaxed"):
            for i in range(calls):
                launches[i % len(launches)]()
        g.replay()
        torch.cuda.synchronize()
        t = _median_event_time(g.replay, reps, torch) / calls
        del g
        return t, "graph"
    except Exception as e:
        torch.cuda.synchronize()
        print(f"    graph capture failed ({type(e).__name__}: {str(e)[:120]}); events around {calls} calls")

        def loop():
            for i in range(calls):
                launches[i % len(launches)]()

        return _median_event_time(loop, reps, torch) / calls, "events"


def time_cupy(launches, reps: int, torch) -> tuple[float, str]:
    """Seconds per call of CuPy-stream launches (mxrt): CuPy stream-capture graph, else events around a loop."""
    import cupy

    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for f in launches:
            f()
        stream.synchronize()
        t0 = time.perf_counter()
        launches[0]()
        stream.synchronize()
        calls = _calls_per_graph(time.perf_counter() - t0, len(launches))
        try:
            stream.begin_capture()
            try:
                for i in range(calls):
                    launches[i % len(launches)]()
            finally:
                graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            times = []
            for _ in range(reps):
                e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
                e0.record(stream)
                graph.launch(stream)
                e1.record(stream)
                e1.synchronize()
                times.append(cupy.cuda.get_elapsed_time(e0, e1) / 1e3)
            return statistics.median(times) / calls, "graph"
        except Exception as e:
            print(f"    cupy capture failed ({type(e).__name__}: {str(e)[:120]}); events around {calls} calls")
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        times = []
        for _ in range(reps):
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record(stream)
            for i in range(calls):
                launches[i % len(launches)]()
            e1.record(stream)
            e1.synchronize()
            times.append(cupy.cuda.get_elapsed_time(e0, e1) / 1e3)
    return statistics.median(times) / calls, "events"


def _to_f64(x) -> np.ndarray:
    """A torch tensor / CuPy array / numpy array (bf16 as ml_dtypes or raw uint16 bits) -> float64 numpy."""
    import ml_dtypes

    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy().astype(np.float64)
    if type(x).__module__.split(".", 1)[0] == "cupy":
        x = x.get()
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(ml_dtypes.bfloat16)
    return x.astype(np.float64)


def _check(out_block, ref_exact, ref_true, true_key: str) -> tuple[str, bool]:
    from mxrt.reference.metrics import calc_diff

    y = _to_f64(out_block)
    parts, ok = [], bool(np.isfinite(y).all())
    if ref_exact is not None:
        d = calc_diff(y, ref_exact)
        ok &= d <= EXACT_TOL
        parts.append(f"exact {d:.1e}")
    d = calc_diff(y, ref_true)
    ok &= d <= TRUE_TOL[true_key]
    parts.append(f"true {d:.1e}")
    return ("ok " if ok else "FAIL ") + " ".join(parts), ok


TRITON_SRC_NOTE = "kernel: _mx_dot_scaled_kernel in this file"


def _triton_kernel():
    """The Triton MX GEMM peer (compiled on first launch). ``tl`` is bound as a module global because Triton
    resolves the names a kernel body uses through its globals."""
    global tl
    import triton
    import triton.language as tl

    @triton.jit
    def _mx_dot_scaled_kernel(
        a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
        stride_a, stride_b, stride_sa, stride_sb, stride_c,
        FMT: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ):  # fmt: skip
        PACK: tl.constexpr = 2 if FMT == "e2m1" else 1
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BLOCK_M)
        num_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * num_n
        first_m = (pid // in_group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % in_group) % size_m
        pid_n = (pid % in_group) // size_m
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K // PACK)
        offs_s = tl.arange(0, BLOCK_K // 32)
        a_ptrs = a_ptr + offs_m[:, None] * stride_a + offs_k[None, :]
        b_ptrs = b_ptr + offs_n[:, None] * stride_b + offs_k[None, :]
        sa_ptrs = sa_ptr + offs_m[:, None] * stride_sa + offs_s[None, :]
        sb_ptrs = sb_ptr + offs_n[:, None] * stride_sb + offs_s[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                sa = tl.load(sa_ptrs)
                sb = tl.load(sb_ptrs)
            else:
                k_left = K - kt * BLOCK_K
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left // PACK, other=0)
                b = tl.load(b_ptrs, mask=offs_k[None, :] < k_left // PACK, other=0)
                sa = tl.load(sa_ptrs, mask=offs_s[None, :] < (k_left + 31) // 32, other=127)
                sb = tl.load(sb_ptrs, mask=offs_s[None, :] < (k_left + 31) // 32, other=127)
            acc = tl.dot_scaled(a, sa, FMT, tl.trans(b), sb, FMT, acc=acc)
            a_ptrs += BLOCK_K // PACK
            b_ptrs += BLOCK_K // PACK
            sa_ptrs += BLOCK_K // 32
            sb_ptrs += BLOCK_K // 32
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows[:, None] * stride_c + cols[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rows[:, None] < M) & (cols[None, :] < N))

    return _mx_dot_scaled_kernel


class Bench:
    def __init__(self, args: argparse.Namespace):
        import cupy
        import torch

        self.args, self.torch, self.cupy = args, torch, cupy
        self.dev = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(self.dev, "L2_cache_size", 50 << 20))
        self.rows: list[dict] = []
        self.sweep: list[dict] = []
        self.skips: list[str] = []
        self.luts = {
            f: (torch.tensor(code_lut(f), device="cuda"), torch.tensor(scale_lut(), device="cuda"))
            for f in FORMATS.values()
        }
        # One static compile per (shape, format): 14 in a full run, over dynamo's default recompile limit (8), past
        # which it silently runs the function eagerly (seen in the first H100 run). Raise the limit, and fail
        # loudly rather than time an eager fallback where this torch has the switch.
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, 256)
        if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
            torch._dynamo.config.fail_on_recompile_limit_hit = True
        self.compiled = torch.compile(dequant_gemm, dynamic=False)
        self.kernel = None
        self.best_triton: dict[tuple[str, bool], list[TritonConfig]] = {}
        self.mxrt_paths, self.mxrt_reason = self._mxrt_paths()

    # -- mxrt discovery
    def _mxrt_paths(self) -> tuple[list, str]:
        if self.args.only == "peers":
            return [], "--only peers"
        try:
            from mxrt.gemm import GEMM_BACKENDS

            import mxrt.ops  # noqa: F401  registers the GPU ops and GEMM paths
            from mxrt.ops.gemm_paths import gemm_paths
            from mxrt.runtime.arch import get_arch
        except Exception as e:
            return [], f"import failed: {type(e).__name__}: {e}"
        if "gpu" not in GEMM_BACKENDS:
            return [], "mxrt.gemm_mx has no GPU backend yet (GEMM_BACKENDS has no 'gpu')"
        target = get_arch().target
        paths = gemm_paths(target)
        if not paths:
            return [], f"no GPU GEMM path registered for target {target!r}"
        return [p.name for p in paths], ""

    # -- data
    def make_sets(self, m: int, n: int, k: int) -> tuple[list[dict], dict]:
        """Rotating input sets (all formats) and the host-side check data of set 0."""
        import mxrt

        cupy, torch = self.cupy, self.torch
        fmts = [FORMATS[f] for f in self.args.formats]
        mx_bytes = (m + n) * (k + k // 32)
        sets_n = n_input_sets(mx_bytes, self.l2)
        sets, host = [], {}
        rng = cupy.random.default_rng(12345 + m + n + k)
        for i in range(sets_n):
            a32 = rng.standard_normal((m, k), dtype=cupy.float32)
            b32 = rng.standard_normal((n, k), dtype=cupy.float32)
            s: dict = {"mx": {}}
            for f in fmts:
                s["mx"][f] = (mxrt.quantize_mx(a32, f, backend="gpu"), mxrt.quantize_mx(b32, f, backend="gpu"))
            ta, tb = torch.from_dlpack(a32), torch.from_dlpack(b32)
            if self.args.only != "mxrt":
                s["bf16"] = (ta.to(torch.bfloat16), tb.to(torch.bfloat16))
                sa, sb = ta.abs().amax() / 448.0, tb.abs().amax() / 448.0
                s["fp8"] = ((ta / sa).to(torch.float8_e4m3fn), (tb / sb).to(torch.float8_e4m3fn), sa, sb)
            if i == 0:
                r, c = min(CHECK_ROWS, m), min(CHECK_ROWS, n)
                host["a32"], host["b32"] = a32[:r].get().astype(np.float64), b32[:c].get().astype(np.float64)
                host["true"] = host["a32"] @ host["b32"].T
                host["exact"] = {}
                for f in fmts:
                    qa, qb = s["mx"][f]
                    host["exact"][f] = self._deq_rows(qa, r) @ self._deq_rows(qb, c).T
                host["r"], host["c"] = r, c
            del a32, b32, ta, tb
            sets.append(s)
        torch.cuda.synchronize()
        return sets, host

    @staticmethod
    def _deq_rows(q, rows: int) -> np.ndarray:
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
            row["check"], row["check_ok"] = _check(out[:r, :c], ref_exact, host["true"], true_key)
            del out
            t, method = timer(launches, self.args.reps, self.torch)
            row.update(seconds=t, tflops=tflops(m, n, k, t), method=method, note=note)
        except Exception as e:
            row.update(seconds=None, tflops=None, note=f"{type(e).__name__}: {str(e)[:160]}")
        self.rows.append(row)
        ms = "-" if row.get("seconds") is None else f"{row['seconds'] * 1e3:.4f} ms"
        tf = "-" if row.get("tflops") is None else f"{row['tflops']:.1f} TFLOP/s"
        print(f"  {row['shape']:>16} {fmt_name:6} {peer:28} {tf:>16} {ms:>14} {row.get('check', row.get('note'))}")
        return row

    def run_shape(self, m: int, n: int, k: int) -> None:
        torch = self.torch
        sets, host = self.make_sets(m, n, k)
        print(f"shape {shape_label(m, n, k)}: {len(sets)} input set(s)")
        if self.args.only != "mxrt":
            bf = [s["bf16"] for s in sets]
            self.add(
                m, n, k, "bf16", PEER_BF16, lambda: torch.matmul(bf[0][0], bf[0][1].t()),
                [lambda a=a, b=b: torch.matmul(a, b.t()) for a, b in bf], time_torch, "bf16", host=host,
            )  # fmt: skip
            f8 = [s["fp8"] for s in sets]

            def smm(a, b, sa, sb):
                return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

            self.add(
                m, n, k, "fp8", PEER_FP8, lambda: smm(*f8[0]),
                [lambda x=x: smm(*x) for x in f8], time_torch, "fp8_tensor", host=host,
                note="per-tensor fp32 scales, no block scales",
            )  # fmt: skip
        for fmt_name in self.args.formats:
            f = FORMATS[fmt_name]
            ops = [self._torch_mx(s["mx"][f]) for s in sets]
            clut, slut = self.luts[f]
            self.add(
                m, n, k, fmt_name, PEER_DEQUANT,
                lambda o=ops[0], f=f, c=clut, s=slut: self.compiled(*o, k, f, c, s),
                [lambda o=o, f=f, c=clut, s=slut: self.compiled(*o, k, f, c, s) for o in ops], time_torch, f, f, host,
                note="torch.compile(dequant -> bf16, torch.matmul)",
            )  # fmt: skip
            if self.args.only != "mxrt":
                self.run_triton(m, n, k, fmt_name, f, ops, host)
            self.run_mxrt(m, n, k, fmt_name, f, [s["mx"][f] for s in sets], host)
        del sets
        torch.cuda.empty_cache()
        self.cupy.get_default_memory_pool().free_all_blocks()

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
            self.kernel = _triton_kernel()
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
                check, ok = _check(out[:r, :c], host["exact"][f], host["true"], f)
                t, method = time_torch(launches, max(3, self.args.reps // 2), self.torch)
                entry = {"shape": shape_label(m, n, k), "fmt": fmt_name, "config": cfg.label, "seconds": t,
                         "tflops": tflops(m, n, k, t), "check": check, "ok": ok, "method": method,
                         "wall_s": time.monotonic() - t0}  # fmt: skip
            except Exception as e:
                entry = {"shape": shape_label(m, n, k), "fmt": fmt_name, "config": cfg.label, "tflops": None,
                         "note": f"{type(e).__name__}: {str(e)[:160]}"}  # fmt: skip
            self.sweep.append(entry)
            what = entry.get("check", entry.get("note"))
            print(f"    triton {fmt_name} {cfg.label:24} {entry.get('tflops') or 0:8.1f} {what}")
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
        if not self.mxrt_paths:
            row = {"shape": shape_label(m, n, k), "m": m, "n": n, "k": k, "fmt": fmt_name, "peer": "mxrt",
                   "seconds": None, "tflops": None, "note": self.mxrt_reason}  # fmt: skip
            self.rows.append(row)
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
                    launches or [lambda p=p, call=call: call(p) for p in pairs], time_cupy, f, f, host,
                    note=how,
                )  # fmt: skip

    def _path_launches(self, name: str, pairs, split_k: int, det: bool, call) -> tuple[list | None, str]:
        """Launch-only callables ``path.run(dg)`` over preallocated outputs (no validation or allocation per
        call), or (None, why) to time the public ``gemm_mx`` calls instead."""
        try:
            from mxrt.ops.gemm_paths import DeviceGemm, gemm_paths
            from mxrt.problems import gemm_problem
            from mxrt.runtime.arch import get_arch

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
        except Exception as e:
            return None, f"timed via gemm_mx (path.run: {type(e).__name__}: {str(e)[:80]})"

    def copy_bandwidth(self) -> float:
        torch = self.torch
        n = 1 << 30
        src, dst = torch.ones(n, dtype=torch.uint8, device="cuda"), torch.empty(n, dtype=torch.uint8, device="cuda")
        dst.copy_(src)
        t = _median_event_time(lambda: dst.copy_(src), 10, torch)
        return 2 * n / t


def software() -> dict:
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in ("torch", "triton", "cupy", "mxrt"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:
            out[name] = f"missing ({type(e).__name__})"
    try:
        import inspect

        import triton.language as tl

        out["tl.dot_scaled"] = str(inspect.signature(tl.dot_scaled))
    except Exception as e:
        out["tl.dot_scaled"] = f"unavailable ({type(e).__name__})"
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budget = Budget(args.budget_s)
    import torch

    if not torch.cuda.is_available():
        print("bench_gemm: no CUDA device", file=sys.stderr)
        return 2
    sw = software()
    print(json.dumps(sw, indent=1))
    bench = Bench(args)
    dev = torch.cuda.get_device_name(0)
    bw = bench.copy_bandwidth()
    print(
        f"device {dev}, {bench.dev.multi_processor_count} SMs, L2 {bench.l2 >> 20} MiB; d2d copy {bw / 1e12:.2f} TB/s"
    )
    print(f"mxrt GPU GEMM paths: {bench.mxrt_paths or bench.mxrt_reason}")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "device": dev,
              "argv": sys.argv[1:] if argv is None else argv, "software": sw, "copy_TBps": bw / 1e12}  # fmt: skip

    def dump():
        add_ratios(bench.rows)
        result.update(rows=bench.rows, triton_sweep=bench.sweep, skipped=bench.skips, wall_s=budget.elapsed())
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(result, fh, indent=1, default=str)

    for m, n, k in shapes_for(args):
        if budget.over():
            bench.skips.append(f"{shape_label(m, n, k)}: --budget-s {args.budget_s} spent")
            print(f"shape {shape_label(m, n, k)} skipped: budget spent")
            continue
        try:
            bench.run_shape(m, n, k)
        except Exception as e:
            bench.skips.append(f"{shape_label(m, n, k)}: {type(e).__name__}: {e}")
            print(f"shape {shape_label(m, n, k)} failed: {type(e).__name__}: {e}")
        dump()
    dump()
    print(f"\nwall {budget.elapsed():.0f} s; device {dev}; d2d copy {bw / 1e12:.2f} TB/s (read + write)")
    for line in bench.skips:
        print(f"skipped {line}")
    for line in splitk_summary(bench.rows):
        print(f"split-K {line}")
    print(format_table(bench.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
