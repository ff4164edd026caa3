"""Launcher of the issue-10 engine skeleton ``gemm_mx_sm90_ws`` (kernels_src/gemm/gemm_mx_sm90_ws.hip): a
persistent grid of 384-thread CTAs, one TMA producer warpgroup and two consumer warpgroups, 128 x 128 tiles.

A development kernel, not a registered :class:`~mxrt.ops.gemm_paths.GemmPath`: ``benchmarks/gemm_sm90_ws_dev.py``
checks and times it against ``sm90_wgmma`` and dequantize + cuBLAS. ``diag=1`` builds the inexact k128-promotion
timing diagnostic of the skeleton gate. Covers what :func:`supports` says (fp8 operands, row-major scales, no
split-K).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import gemm_sm90_kernels
from .gemm_paths import DeviceGemm
from .gemm_sm90 import smem_bytes, tensor_map_arg

BM = BN = 128
THREADS = 384


def staging_bytes(stages: int) -> int:
    """The scale warps' cp.async staging rings: 3 warps x WS_AHEAD stages (8 / 4 / 1 for a 4 / 5 / 6-stage tile
    ring) x 256 rows x 2 words."""
    return 3 * (8 if stages <= 4 else 4 if stages == 5 else 1) * 256 * 8


_LIMIT = 2**31


def supports(dg: DeviceGemm) -> str | None:
    """Why the skeleton cannot run ``dg`` (None: it can)."""
    p = dg.p
    if p.split_k != 1:
        return "split-K"
    if p.a_scale_layout is not None or p.b_scale_layout is not None:
        return "preshuffled scale layouts"
    if p.a_fmt not in ("e4m3", "e5m2") or p.b_fmt not in ("e4m3", "e5m2"):
        return f"formats ({p.a_fmt}, {p.b_fmt})"
    if dtype_name(p.out_dtype) not in GEMM_OUT_DTYPE_CODES:
        return f"out dtype {dtype_name(p.out_dtype)}"
    if p.k % 16:
        return f"k = {p.k}: k % 16 != 0 (TMA)"
    if dg.a_codes.data.ptr % 16 or dg.b_codes.data.ptr % 16:
        return "code bases not 16-byte aligned (TMA)"
    if dg.a_scales.data.ptr % 4 or dg.b_scales.data.ptr % 4:
        return "scale bases not 4-byte aligned (word loads)"
    if max(p.m, p.n, p.k) >= _LIMIT or max(p.m, p.n) * max(p.k_blocks, 1) >= _LIMIT:
        return "sizes of 2^31 or more"
    return None


_KERNELS: dict = {}


def _kernel(d: Any, arch: Any, stages: int) -> tuple[Any, int]:
    key = (d, arch)
    hit = _KERNELS.get(key)
    if hit is None:
        kernel = build(gemm_sm90_kernels.GEMM_MX_SM90_WS, d, arch)
        smem = smem_bytes(BM, BN, stages) + staging_bytes(stages)
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        hit = _KERNELS[key] = (kernel, smem)
    return hit


def run(dg: DeviceGemm, diag: int = 0, stages: int = 4, split: int = 1, ctas: int | None = None, mode: int = 0) -> None:
    """Launch on the current stream. ``diag=1``: the inexact timing diagnostic (``split=0`` only); ``split``: 0 the
    consumer warpgroups split the tile's rows, 1 its columns; ``ctas``: grid size (default the SM count); ``mode``
    (with ``diag=1``): 2 no promotion, 3 no math, 4 no math and no scale warps (the kernel's WS_MODE)."""
    why = supports(dg)
    if why:
        raise ValueError(f"gemm_mx_sm90_ws: {why}")
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    d = defines(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.a_fmt],
        ATOMIC=0,
        B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.b_fmt],
        BM=BM,
        BN=BN,
        DBUF=0,
        DIAG=diag,
        OUT_DTYPE=GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        SPLIT=0 if diag else split,
        STAGES=stages,
        WS_MODE=mode,
    )
    kernel, smem = _kernel(d, dg.arch, stages)
    tiles = -(-p.m // BM) * -(-p.n // BN)
    grid = max(1, min(tiles, ctas or dg.arch.num_cus))
    dev = dg.a_codes.data.device_id
    tma = tensor_map_arg(dg.a_codes.data.ptr, p.m, p.k, BM, dev)
    tmb = tensor_map_arg(dg.b_codes.data.ptr, p.n, p.k, BN, dev)
    i32 = np.int32
    args = (tma, tmb, dg.a_scales, dg.b_scales, dg.out, i32(p.m), i32(p.n), i32(p.k))
    launch(p.op, kernel, LaunchConfig((grid, 1, 1), (THREADS, 1, 1), smem), args)
