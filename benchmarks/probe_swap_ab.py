"""Probe (session 11): decode at M = 32 / 64 as a swap-AB GEMM on the existing Hopper tiles. ``d^T [N, M] =
W [N, K] @ X [M, K]^T`` puts the weights on the wgmma M side (128 / 256-row tiles) and the tokens on its N side.
Times ``mxrt.gemm_mx(W, X)`` forced onto ``sm90_wgmma`` (split_k 1 / 2 / 4) and ``sm90_ws`` against the auto decode
path ``mxrt.gemm_mx(X, W)`` and cuBLAS bf16 (``torch.matmul``), CUDA-graph replays over weight sets larger than
3x the L2 (mxrt.bench.core), same run.

    python benchmarks/probe_swap_ab.py
"""

from __future__ import annotations

import os

import cupy
import torch

import mxrt
from mxrt.bench import core

CELLS = [(7168, 4096), (4608, 7168), (8192, 8192), (7168, 2048)]


def quant(rows, k, fmt, seed):
    x = cupy.random.default_rng(seed).standard_normal((rows, k), dtype=cupy.float32)
    return x, mxrt.quantize_mx(x, fmt)


def main() -> None:
    l2 = core.l2_bytes()
    for n, k in CELLS:
        w32, qw = quant(n, k, "e4m3", 1)
        sets = core.n_input_sets(qw.data.nbytes + qw.scales.nbytes, l2)
        ws = [qw] + [quant(n, k, "e4m3", 2 + i)[1] for i in range(sets - 1)]
        wb = torch.from_dlpack(w32).to(torch.bfloat16)
        wbs = [wb] + [torch.randn_like(wb) for _ in range(core.n_input_sets(wb.numel() * 2, l2) - 1)]
        for m in (32, 64):
            x32, qx = quant(m, k, "e4m3", 9)
            xb = torch.from_dlpack(x32).to(torch.bfloat16)
            t_cb, _ = core.time_torch([lambda w=w, xb=xb: torch.matmul(xb, w.t()) for w in wbs], 7, log=print)
            t_auto, _ = core.time_cupy([lambda w=w, qx=qx: mxrt.gemm_mx(qx, w) for w in ws], 7, log=print)
            row = f"N={n} K={k} M={m}: cuBLAS bf16 {t_cb * 1e6:6.1f} us | auto decode {t_auto * 1e6:6.1f}"
            ref = mxrt.gemm_mx(qx, qw, out_dtype="float32")
            for path, split in (("sm90_wgmma", 1), ("sm90_wgmma", 2), ("sm90_wgmma", 4), ("sm90_ws", 1)):
                os.environ["MXRT_GEMM_PATH"] = path
                try:
                    fns = [lambda w=w, qx=qx, s=split: mxrt.gemm_mx(w, qx, split_k=s) for w in ws]
                    t, _ = core.time_cupy(fns, 7, log=print)
                    got = mxrt.gemm_mx(qw, qx, split_k=split).view(cupy.uint16).astype(cupy.uint32) << 16
                    err = float(mxrt.calc_diff(got.view(cupy.float32).T.get(), ref.get()))
                    row += f" | swap {path} s{split} {t * 1e6:6.1f} (cd {err:.1e})"
                except Exception as e:
                    row += f" | swap {path} s{split}: {type(e).__name__} {str(e)[:60]}"
                finally:
                    del os.environ["MXRT_GEMM_PATH"]
            print(row, flush=True)
        del ws, wbs


if __name__ == "__main__":
    main()
