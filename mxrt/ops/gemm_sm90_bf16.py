"""The Hopper (sm_90a) GEMM path ``sm90_bf16``: the bf16 route of the issue-10 engine, ``gemm_mx_sm90_bf16``
(kernels_src/gemm/gemm_mx_sm90_bf16.hip). Every MX element is dequantised exactly to bf16 on chip (its block scale
applied while converting) and bf16 wgmmas accumulate the whole K in fp32: no per-block promotion, and fp32 output
as accurate as the tensor core's fp32 accumulation of exact bf16 products (measured on an H200, session 9: relative
error <= 6.5e-6 against the float64 reference, where the fp8 route's k32 partials give 2-5e-5).

Grid = min(SM count, tiles) CTAs of 384 threads walking 256 x 128 output tiles (GROUP_M 8 raster): warpgroup 2
produces (one thread issues the TMA copies of the fp8 code tiles, k64 per stage; three converter warps turn each
stage's B tile into a 128B-swizzled bf16 tile and the A scales into bf16 multipliers), warpgroups 0 and 1 convert
their A rows in registers and issue m64n128k16 bf16 wgmmas with A from registers.

Exactness: the conversion is exact while every scale byte lies in the format's window (e4m3 [10, 134], e5m2
[17, 142]) or is 255 (NaN), and no NaN / Inf code sits in a block with a finite scale. A device-side check
(kernels_src/gemm/mx_gemm_window.hip, one launch per operand, reading its codes and scales) sets a gate word;
with the gate set, the kernel computes every output with an exact SIMT loop instead (slow, pathological inputs
only). No host synchronisation: CUDA-graph capturable (the gate word comes from CuPy's pool, as the e2m1
expansion's buffers).

Serves, in automatic selection, **float32 output with an fp8 operand** (which ``sm90_ws`` / ``sm90_wgmma``
decline) for m > 64; bf16 / fp16 out stay on ``sm90_ws`` (faster today: 389.7 vs 340.4 TFLOP/s at 8192^3 on an
H200, session 9 call 2) unless ``MXRT_GEMM_PATH=sm90_bf16``. Every fp8 format pair and e2m1 (expanded to e4m3
first), every scale layout read in place. Declines split-K, ``k % 16 != 0`` with an fp8 operand, code bases not
16-byte aligned (TMA), 2^31-sized problems.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES
from ..config import gemm_path_override
from ..errors import UnsupportedArchError
from ..runtime import alloc
from ..runtime.compiler import build, build_with_smem
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import gemm_sm90_kernels
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path
from .gemm_sm90 import _padded_k, fp8_operands, scale_layout_code, tensor_map_arg
from .gemm_sm90_ws import _cannot as _ws_cannot

NAME = "sm90_bf16"
TARGET = "sm_90a"
#: above sm90_ws (25): it serves what sm90_ws declines (fp32 out with an fp8 operand); below sm90_decode (30)
PRIORITY = 27
BM, BN, BK = 256, 128, 64
THREADS = 384
#: automatic selection: the smallest m served (m <= 64 stays with sm90_decode inside its envelope)
AUTO_MIN_M = 65


def smem_bytes(ring: int) -> int:
    """RING x (A 16 KB + B 8 KB fp8 codes, B 16 KB bf16, A multipliers 2 KB), 3 x RING mbarriers, 1 KB alignment."""
    return ring * (BM * BK + BN * BK + 2 * BN * BK + BM * 8) + 2 * 6 * 96 * 8 + 24 * ring + 1024


def cannot(dg: DeviceGemm) -> str | None:
    """What the kernel cannot compute at all (run() refuses these): the engine's TMA operands and 32-bit limits
    (:func:`mxrt.ops.gemm_sm90_ws._cannot`; the scale bases need no alignment here)."""
    return _ws_cannot(dg, scale_words=False)


def supports(dg: DeviceGemm) -> str | None:
    """Why ``sm90_bf16`` does not serve ``dg`` (None: it does); see the module docstring."""
    why = cannot(dg)
    if why is not None:
        return why
    if gemm_path_override() == NAME:
        return None
    p = dg.p
    if dtype_name(p.out_dtype) != "float32" or p.a_fmt == p.b_fmt == "e2m1":
        return "16-bit output and e2m1 x e2m1 run on sm90_ws (faster today; MXRT_GEMM_PATH=sm90_bf16 forces this path)"
    if p.m < AUTO_MIN_M:
        return f"m = {p.m} < {AUTO_MIN_M}: left to the decode / wgmma paths (MXRT_GEMM_PATH forces sm90_bf16)"
    return None


def _check_window(codes: Any, scales: Any, rows: int, kp: int, fmt: str, sl: int, gate: Any, arch: Any) -> None:
    """Set ``gate`` if this operand holds a scale outside the window or a NaN / Inf code in a finite-scale block."""
    kbs = -(-kp // 32)
    if rows == 0 or kbs == 0:
        return
    d = defines(SL=sl, WIN_FMT=gemm_sm90_kernels.SM90_FMT_CODES[fmt])
    kernel = build(gemm_sm90_kernels.MX_GEMM_WINDOW_CHECK, d, arch)
    cfg = LaunchConfig((-(-rows * kbs // 256), 1, 1), (256, 1, 1), 0)
    i32 = np.int32
    launch("gemm_mx", kernel, cfg, (codes, scales, gate, i32(rows), i32(kp), i32(kp), i32(kbs)))


def run(
    dg: DeviceGemm,
    gate: Any = None,
    ring: int = gemm_sm90_kernels.BF16_RING,
    ctas: int | None = None,
    regs: int = gemm_sm90_kernels.BF16_PRODUCER_REGS,
    diag: int = 0,
    prof: int = 0,
) -> None:
    """Launch on the current stream: the window check of both operands into a fresh gate word, then the kernel
    (e2m1 operands expanded first); no host synchronisation. Development (benchmarks/gemm_sm90_bf16_dev.py):
    ``gate`` a device uint32 word used as it is (no check: 0 runs the fast loop, else the exact fallback),
    ``ring``, ``ctas``, ``regs`` (the producer's setmaxnreg), ``diag`` (BF_DIAG), ``prof`` (BF_PROF)."""
    why = cannot(dg)
    if why is not None:
        raise UnsupportedArchError(f"{dg.p.op}: GEMM path {NAME} cannot run this problem: {why}")
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    kp = _padded_k(dg)
    a, b = fp8_operands(dg, kp)
    sl = (scale_layout_code(p.a_scale_layout, dg.a_scales), scale_layout_code(p.b_scale_layout, dg.b_scales))
    kfmt_a = "e4m3" if p.a_fmt == "e2m1" else p.a_fmt
    kfmt_b = "e4m3" if p.b_fmt == "e2m1" else p.b_fmt
    if gate is None:
        gate = alloc.empty(1, np.uint32)
        gate.fill(0)
        _check_window(a, dg.a_scales, p.m, kp, kfmt_a, sl[0], gate, dg.arch)
        _check_window(b, dg.b_scales, p.n, kp, kfmt_b, sl[1], gate, dg.arch)
    d = defines(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.a_fmt],
        ATOMIC=0,
        B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.b_fmt],
        BF_DIAG=diag,
        BF_PROF=prof,
        BM=256,
        BN=128,
        DBUF=0,
        DIAG=0,
        OUT_DTYPE=GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        PRODUCER_REGS=regs,
        RING=ring,
        SLA=sl[0],
        SLB=sl[1],
        STAGES=3,
    )
    kernel = build_with_smem(gemm_sm90_kernels.GEMM_MX_SM90_BF16, d, dg.arch, smem_bytes(ring))
    dev = a.data.device_id
    tma = tensor_map_arg(a.data.ptr, p.m, kp, BM, dev, box_cols=BK)
    tmb = tensor_map_arg(b.data.ptr, p.n, kp, BN, dev, box_cols=BK)
    tiles = -(-p.m // BM) * -(-p.n // BN)
    cfg = LaunchConfig((max(1, min(tiles, ctas or dg.arch.num_cus)), 1, 1), (THREADS, 1, 1), smem_bytes(ring))
    i32 = np.int32
    args = (tma, tmb, dg.a_scales, dg.b_scales, dg.out, i32(p.m), i32(p.n), i32(kp), gate, a, b)
    launch(p.op, kernel, cfg, args)


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run))
