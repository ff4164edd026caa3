"""The Hopper (sm_90a) bf16 route of the issue-10 engine: ``gemm_mx_sm90_bf16``
(kernels_src/gemm/gemm_mx_sm90_bf16.hip). Every MX element is dequantised exactly to bf16 on chip (its block scale
applied while converting) and one bf16 wgmma accumulates the whole K in fp32: no per-block promotion, and fp32
output as accurate as the tensor core's fp32 accumulation (the fp8 route's k32 partials are not).

Grid = min(SM count, tiles) CTAs of 384 threads walking 256 x 128 output tiles (GROUP_M 8 raster): warpgroup 2
produces (one thread issues the TMA copies of the fp8 code tiles, k64 per stage; three converter warps turn each
stage's B tile into a swizzled bf16 tile and the A scales into bf16 multipliers), warpgroups 0 and 1 convert their
A rows in registers and issue m64n128k16 bf16 wgmmas (A from registers).

Exact while every scale byte lies in the format's window (e4m3 [10, 134], e5m2 [17, 142]) or is 255 (NaN).
Development state (session 9): :func:`run` launches the kernel alone (``gate`` word 0); the device-side window
check and the exact fallback come next.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES
from ..errors import UnsupportedArchError
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import gemm_sm90_kernels
from .gemm_paths import DeviceGemm
from .gemm_sm90 import _padded_k, fp8_operands, tensor_map_arg

NAME = "sm90_bf16"
TARGET = "sm_90a"
BM, BN, BK = 256, 128, 64
THREADS = 384
_LIMIT = 2**31


def smem_bytes(ring: int) -> int:
    """RING x (A 16 KB + B 8 KB fp8 codes, B 16 KB bf16, A multipliers 2 KB), 3 x RING mbarriers, 1 KB alignment."""
    return ring * (BM * BK + BN * BK + 2 * BN * BK + BM * 8) + 24 * ring + 1024


def cannot(dg: DeviceGemm) -> str | None:
    """What the kernel cannot compute at all."""
    p = dg.p
    if p.split_k != 1:
        return f"split_k = {p.split_k} (no split-K epilogue)"
    if p.a_scale_layout is not None or p.b_scale_layout is not None:
        return "preshuffled scale layouts (row-major scales only, for now)"
    if dtype_name(p.out_dtype) not in GEMM_OUT_DTYPE_CODES:
        return f"out dtype {dtype_name(p.out_dtype)}"
    kp = _padded_k(dg)
    if kp % 16:
        return f"k = {p.k}: an fp8 operand needs k % 16 == 0 (TMA row strides are 16-byte multiples)"
    for name, fmt, codes in (("a", p.a_fmt, dg.a_codes), ("b", p.b_fmt, dg.b_codes)):
        if fmt != "e2m1" and codes.data.ptr % 16:
            return f"{name} codes start at {codes.data.ptr:#x}, not 16-byte aligned (TMA)"
    if max(p.m, p.n, kp) >= _LIMIT or max(p.m, p.n) * max(p.k_blocks, 1) >= _LIMIT:
        return "sizes of 2^31 or more"
    return None


_KERNELS: dict = {}


def _kernel(dg: DeviceGemm, ring: int, regs: int, diag: int = 0) -> Any:
    p = dg.p
    d = defines(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.a_fmt],
        ATOMIC=0,
        B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.b_fmt],
        BF_DIAG=diag,
        BM=256,
        BN=128,
        DBUF=0,
        DIAG=0,
        OUT_DTYPE=GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        PRODUCER_REGS=regs,
        RING=ring,
        SLA=0,
        SLB=0,
        STAGES=3,
    )
    key = (d, dg.arch)
    hit = _KERNELS.get(key)
    if hit is None:
        hit = build(gemm_sm90_kernels.GEMM_MX_SM90_BF16, d, dg.arch)
        smem = smem_bytes(ring)
        if hit.max_dynamic_shared_size_bytes < smem:
            hit.max_dynamic_shared_size_bytes = smem
        _KERNELS[key] = hit
    return hit


def run(
    dg: DeviceGemm,
    gate: Any = None,
    ring: int = gemm_sm90_kernels.BF16_RING,
    ctas: int | None = None,
    regs: int = gemm_sm90_kernels.BF16_PRODUCER_REGS,
    diag: int = 0,
) -> None:
    """Launch on the current stream (e2m1 operands expanded first); ``gate``: a device uint32 word, the kernel
    returns at once unless it holds 0 (default: a fresh zero word)."""
    why = cannot(dg)
    if why is not None:
        raise UnsupportedArchError(f"{dg.p.op}: GEMM path {NAME} cannot run this problem: {why}")
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    import cupy

    kp = _padded_k(dg)
    a, b = fp8_operands(dg, kp)
    kernel = _kernel(dg, ring, regs, diag)
    dev = a.data.device_id
    tma = tensor_map_arg(a.data.ptr, p.m, kp, BM, dev, box_cols=BK)
    tmb = tensor_map_arg(b.data.ptr, p.n, kp, BN, dev, box_cols=BK)
    if gate is None:
        gate = cupy.zeros(1, cupy.uint32)
    tiles = -(-p.m // BM) * -(-p.n // BN)
    cfg = LaunchConfig((max(1, min(tiles, ctas or dg.arch.num_cus)), 1, 1), (THREADS, 1, 1), smem_bytes(ring))
    i32 = np.int32
    launch(p.op, kernel, cfg, (tma, tmb, dg.a_scales, dg.b_scales, dg.out, i32(p.m), i32(p.n), i32(kp), gate))
