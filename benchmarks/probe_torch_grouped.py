"""Probe (session 11, call 1): can ``torch._grouped_mm`` serve mxrt's grouped MX GEMMs after an exact dequantisation
to bf16, and what would that path cost against ``torch._grouped_mm`` on bf16 inputs?

    python benchmarks/probe_torch_grouped.py

Prints: the semantics the path depends on (offs past the last group, empty groups, float32 out in both forms, the
2-D x 2-D wgrad with a row-major A [n, Mc] and a column-major B view, K / N alignment, behaviour under a CuPy stream
capture), then per Primus-Turbo #330 shape (balanced): fwd / dgrad / wgrad times of dequant(a) + dequant(b) +
``torch._grouped_mm`` vs ``torch._grouped_mm`` alone (events, median of 5, eager).
"""

from __future__ import annotations

import traceback

import cupy
import numpy as np
import torch

import mxrt
from mxrt.bench import core


def t_ms(fn, reps=5):
    """Median milliseconds of ``fn`` by CUDA events after one warm call (mxrt.bench.core.torch_median_time)."""
    fn()
    torch.cuda.synchronize()
    return core.torch_median_time(fn, reps) * 1e3


def bf(x):  # CuPy uint16 bits -> torch bf16 (no copy)
    return torch.from_dlpack(x.view(cupy.int16)).view(torch.bfloat16)


def probe(name, fn):
    try:
        r = fn()
        print(f"PROBE {name}: ok {r}")
    except Exception as e:
        print(f"PROBE {name}: {type(e).__name__}: {str(e)[:300]}")


def semantics():
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(), flush=True)
    dev = "cuda"
    a = torch.randn(96, 64, device=dev).bfloat16()
    w = torch.randn(3, 40, 64, device=dev).bfloat16()

    def past_last():
        offs = torch.tensor([16, 16, 48], dtype=torch.int32, device=dev)  # rows 48.. past the last group
        torch.cuda.synchronize()
        outs = []
        for _ in range(3):
            junk = torch.full((96, 40), 7.0, device=dev, dtype=torch.bfloat16)
            del junk
            o = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
            outs.append(o[48:].float().abs().max().item())
        ref = torch.cat([a[:16] @ w[0].T, a[16:48] @ w[2].T]).float()
        err = (o[:48].float() - ref).abs().max().item()
        return f"rows past offs[-1] max|.| per try {outs}; err on groups {err:.3g}; shape {tuple(o.shape)}"

    probe("fwd_past_last_and_empty", past_last)
    probe("fwd_out_f32", lambda: torch._grouped_mm(
        a, w.transpose(-2, -1), offs=torch.tensor([32, 64, 96], dtype=torch.int32, device=dev),
        out_dtype=torch.float32).dtype)  # fmt: skip
    # wgrad: a_bf [n, Mc] row-major, b_bf [k, Mc] row-major -> b view [Mc, k] column-major
    n, k, mc = 48, 40, 96
    ga = torch.randn(n, mc, device=dev).bfloat16()
    gb = torch.randn(k, mc, device=dev).bfloat16()
    offs_k = torch.tensor([32, 32, 96], dtype=torch.int32, device=dev)

    def wgrad(out_dtype=None):
        o = torch._grouped_mm(ga, gb.t(), offs=offs_k, out_dtype=out_dtype)
        ref = torch.stack([ga[:, :32].float() @ gb[:, :32].float().T, torch.zeros(n, k, device=dev),
                           ga[:, 32:].float() @ gb[:, 32:].float().T])  # fmt: skip
        return (
            f"{tuple(o.shape)} {o.dtype} max err {(o.float() - ref).abs().max().item():.3g} (empty group max "
            f"{o[1].float().abs().max().item()})"
        )

    probe("wgrad_rowA_colB_bf16", wgrad)
    probe("wgrad_rowA_colB_f32", lambda: wgrad(torch.float32))
    probe("wgrad_offs_16", lambda: torch._grouped_mm(
        ga, gb.t(), offs=torch.tensor([16, 48, 96], dtype=torch.int32, device=dev)).shape)  # fmt: skip
    probe("fwd_k_not_mult8", lambda: torch._grouped_mm(
        torch.randn(96, 60, device=dev).bfloat16(), torch.randn(3, 40, 60, device=dev).bfloat16().transpose(-2, -1),
        offs=torch.tensor([32, 64, 96], dtype=torch.int32, device=dev)).shape)  # fmt: skip
    probe("fwd_k_padded_view", lambda: torch._grouped_mm(
        torch.randn(96, 64, device=dev).bfloat16()[:, :60],
        torch.randn(3, 40, 64, device=dev).bfloat16()[:, :, :60].transpose(-2, -1),
        offs=torch.tensor([32, 64, 96], dtype=torch.int32, device=dev)).shape)  # fmt: skip
    probe("fwd_n_not_mult8", lambda: torch._grouped_mm(
        a, torch.randn(3, 36, 64, device=dev).bfloat16().transpose(-2, -1),
        offs=torch.tensor([32, 64, 96], dtype=torch.int32, device=dev)).shape)  # fmt: skip
    probe("fwd_G1_offs", lambda: torch._grouped_mm(
        a, w[:1].transpose(-2, -1), offs=torch.tensor([96], dtype=torch.int32, device=dev)).shape)  # fmt: skip
    probe("fwd_G300", lambda: torch._grouped_mm(
        a, torch.randn(300, 40, 64, device=dev).bfloat16().transpose(-2, -1),
        offs=torch.linspace(0, 96, 300, device=dev).to(torch.int32)).shape)  # fmt: skip

    def capture():
        s = cupy.cuda.Stream(non_blocking=True)
        offs = torch.tensor([32, 64, 96], dtype=torch.int32, device=dev)
        with s:
            ext = torch.cuda.ExternalStream(s.ptr)
            with torch.cuda.stream(ext):
                torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
            s.synchronize()
            s.begin_capture()
            try:
                with torch.cuda.stream(ext):
                    o = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
            finally:
                g = s.end_capture()
            g.launch(s)
            s.synchronize()
        return f"captured, out {tuple(o.shape)}, capturing query {cupy.cuda.runtime.streamIsCapturing(s.ptr)}"

    probe("cupy_capture", capture)


def timing():
    shapes = [("DeepSeek-V3", "GateUp", b, m, 4096, 7168) for b in (16, 32) for m in (2048, 4096)]
    shapes += [("DeepSeek-V3", "Down", b, m, 7168, 2048) for b in (16, 32) for m in (2048, 4096)]
    shapes += [("gpt-oss-20B", "GateUp", b, m, 5760, 2880) for b in (4, 32) for m in (2048, 4096)]
    shapes += [("gpt-oss-20B", "Down", b, m, 2880, 2880) for b in (4, 32) for m in (2048, 4096)]
    print("| shape | B | M | pass | dequant a ms | dequant b ms | grouped_mm ms | path / peer |")
    for model, name, b, m, n, k in shapes:
        try:
            mt = b * m
            lens = np.full(b, m, np.int64)
            lens_d = cupy.asarray(lens)
            x = cupy.random.standard_normal((mt, k), dtype=cupy.float32)
            w = cupy.random.standard_normal((b, n, k), dtype=cupy.float32)
            dy = cupy.random.standard_normal((mt, n), dtype=cupy.float32)
            qx, qdy = mxrt.quantize_mx(x), mxrt.quantize_mx(dy)
            qw = mxrt.quantize_mx_dual_grouped(w)
            qdy_c = mxrt.quantize_mx_grouped(dy, lens_d, colwise=True, col_align=32).col
            qx_c = mxrt.quantize_mx_grouped(x, lens_d, colwise=True, col_align=32).col
            del x, w, dy
            offs = torch.from_numpy(np.cumsum(lens).astype(np.int32)).cuda()
            cases = {
                "fwd": (qx, qw.row, lambda A, B, o=offs: torch._grouped_mm(A, B.transpose(-2, -1), offs=o)),
                "dgrad": (qdy, qw.col, lambda A, B, o=offs: torch._grouped_mm(A, B.transpose(-2, -1), offs=o)),
                "wgrad": (qdy_c, qx_c, lambda A, B, o=offs: torch._grouped_mm(A, B.t(), offs=o)),
            }
            for p, (qa, qb, mm) in cases.items():
                A = bf(mxrt.dequantize_mx(qa, "bfloat16"))
                B = bf(mxrt.dequantize_mx(qb, "bfloat16"))
                ta = t_ms(lambda qa=qa: mxrt.dequantize_mx(qa, "bfloat16"))
                tb = t_ms(lambda qb=qb: mxrt.dequantize_mx(qb, "bfloat16"))
                tg = t_ms(lambda A=A, B=B, mm=mm: mm(A, B))
                print(f"| {model} {name} | {b} | {m} | {p} | {ta:.3f} | {tb:.3f} | {tg:.3f} | "
                      f"{tg / (ta + tb + tg):.3f} |", flush=True)  # fmt: skip
                del A, B
            del qx, qdy, qw, qdy_c, qx_c
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
        except Exception:
            traceback.print_exc()


if __name__ == "__main__":
    semantics()
    timing()
