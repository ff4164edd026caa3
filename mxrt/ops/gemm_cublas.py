"""The Hopper GEMM path ``sm90_cublas``: exact dequantisation of both MX operands to bf16
(kernels_src/quant/dequantize_mx.hip, one pass each into pooled ``[rows, round_up(k, 8)]`` workspaces, K padding
zeroed) and one cuBLAS bf16 GEMM with fp32 accumulation (:mod:`mxrt.runtime.cublas`: ctypes on CuPy's libcublas).

It is the compiled "dequantize + cuBLAS" baseline done by mxrt, made exact for every input: the dequantisation
pass also raises a device gate word where a block's scale byte lies outside the window in which bf16 operands and
fp32 accumulation are exact (e4m3 / e2m1 [10, 134], e5m2 [17, 142], 255 allowed; the ``sm90_bf16`` route's window)
or where a NaN / Inf code sits in a finite block; a gated ``gemm_mx_generic`` launch then recomputes every output
exactly (its CTAs return at once while the gate is 0). No host synchronisation; CUDA-graph capturable.

Serves every format pair, any k, every scale layout and every out dtype (float16: cuBLAS writes an fp32 workspace
that the split-K reduce kernel rounds to fp16; cublasGemmEx has no bf16 x bf16 -> fp16). Memory: the two bf16
workspaces, ``2 * (m + n) * round_up(k, 8)`` bytes, as the workaround it replaces (plus ``4 * m * n`` for fp16 out).

Automatic selection (H200, session 10 call 5, n, k = 7168, 4096, MXFP8, TFLOP/s): every m > 64 (at or above
``sm90_ws`` at every m measured: 80 vs 73 at m = 65, 148 vs 142 at 128, 279 vs 278 at 256, 427 vs 300 at 512, 662 vs
364 at 2048; far above ``sm90_bf16`` for fp32 out: 79 vs 38 at 65, 653 vs 321 at 2048); fp32 out with an fp8 operand
at every m (the decode and fp8 paths decline it; it ran on ``generic`` below 65); any m where the fp8 engines cannot
run (k % 16 != 0 with an fp8 operand, code bases not 16-byte aligned; ``generic`` otherwise). m <= 64 with 16-bit out
stays with ``sm90_decode`` / ``sm90_wgmma``. ``MXRT_GEMM_PATH=sm90_cublas`` forces it for any m.
"""

from __future__ import annotations

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES
from ..config import gemm_path_override
from ..errors import ShapeError, UnsupportedArchError
from ..problems.gemm import GEMM_FORMAT_PAIRS
from ..runtime import alloc, cublas
from ..runtime.launch import prepare
from .dequant import check_dequant_limits, dequant_entry, launch_dequant
from .gemm_generic import gated_entry, run_gated
from .gemm_paths import DeviceGemm, GemmPath, PreparedGemm, register_gemm_path
from .gemm_sm90_ws import _cannot as _ws_cannot
from .gemm_splitk import launch_reduce, workspace

NAME = "sm90_cublas"
TARGET = "sm_90a"
#: above sm90_bf16 (27) and sm90_ws (25) where it runs; below sm90_decode (30)
PRIORITY = 28
#: automatic selection: the smallest m served with 16-bit out where sm90_ws can run (m <= 64: sm90_decode / wgmma)
AUTO_MIN_M = 65
_LIMIT = 2**31
OUT_DTYPES = ("bfloat16", "float32", "float16")


def padded_k(k: int) -> int:
    """The workspaces' row length: k rounded up to 8 bf16 elements (16-byte rows for cuBLAS)."""
    return -(-k // 8) * 8


def cannot(dg: DeviceGemm) -> str | None:
    """What the path cannot run at all."""
    p = dg.p
    if not cublas.available():
        return "cuBLAS is not available (no CuPy, ROCm, or no libcublas found: mxrt.runtime.cublas.available())"
    if p.split_k != 1:
        return f"split_k = {p.split_k} (cuBLAS picks its own split)"
    if (p.a_fmt, p.b_fmt) not in GEMM_FORMAT_PAIRS:
        return f"formats ({p.a_fmt}, {p.b_fmt})"
    if dtype_name(p.out_dtype) not in OUT_DTYPES:
        return f"out dtype {dtype_name(p.out_dtype)}"
    if max(p.m, p.n, padded_k(p.k)) >= _LIMIT:
        return "sizes of 2^31 or more (cuBLAS int dimensions)"
    for rows, layout in ((p.m, p.a_scale_layout), (p.n, p.b_scale_layout)):
        try:
            check_dequant_limits(p.op, rows, p.k, layout)
        except ShapeError as e:  # the reason, not an error, while choosing a path
            return str(e)
    return None


def supports(dg: DeviceGemm) -> str | None:
    """Why ``sm90_cublas`` does not serve ``dg`` (None: it does); see the module docstring."""
    why = cannot(dg)
    if why is not None:
        return why
    if gemm_path_override() == NAME:
        return None
    p = dg.p
    if dtype_name(p.out_dtype) == "float32":
        return None
    if p.m < AUTO_MIN_M and _ws_cannot(dg) is None:
        return f"m = {p.m} < {AUTO_MIN_M}: left to the decode / wgmma paths (MXRT_GEMM_PATH forces sm90_cublas)"
    return None


def run(dg: DeviceGemm) -> None:
    """Launch on the current stream: dequantise a and b (gate raised where bf16 is not exact), cuBLAS, the gated
    exact fallback. No host synchronisation."""
    why = cannot(dg)
    if why is not None:
        raise UnsupportedArchError(f"{dg.p.op}: GEMM path {NAME} cannot run this problem: {why}")
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    kp = padded_k(p.k)
    out = dtype_name(p.out_dtype)
    wa = alloc.empty((p.m, kp), np.uint16)
    wb = alloc.empty((p.n, kp), np.uint16)
    gate = alloc.empty(1, np.uint32)
    gate.fill(0)
    bf = "bfloat16"
    launch_dequant(p.op, dg.a_codes, dg.a_scales, wa, p.m, p.k, kp, p.a_fmt, p.a_scale_layout, bf, dg.arch, gate)
    launch_dequant(p.op, dg.b_codes, dg.b_scales, wb, p.n, p.k, kp, p.b_fmt, p.b_scale_layout, bf, dg.arch, gate)
    if out == "float16":  # cuBLAS into fp32, then one RNE rounding to fp16 (the split-K reduce of one slice)
        ws = workspace((1, p.m, p.n), zero=False)
        cublas.gemm_bf16_nt(p.m, p.n, kp, wa.data.ptr, kp, wb.data.ptr, kp, ws.data.ptr, p.n, "float32")
        launch_reduce(dg, ws, 1, GEMM_OUT_DTYPE_CODES["float16"])
    else:
        cublas.gemm_bf16_nt(p.m, p.n, kp, wa.data.ptr, kp, wb.data.ptr, kp, dg.out.data.ptr, p.n, out)
    run_gated(dg, gate)


def prepare_run(dg: DeviceGemm) -> PreparedGemm | None:
    """:func:`run` for ``dg``'s plan with its three launches prepared (bf16 / fp32 out; fp16 out stays on
    :func:`run`): a call allocates the workspaces and the gate word from the pool, zeroes the gate
    (``cudaMemsetAsync``), launches both dequantisations, cuBLAS and the gated fallback."""
    p = dg.p
    out = dtype_name(p.out_dtype)
    if p.is_empty or out == "float16" or cannot(dg) is not None:
        return None
    import cupy

    kp, m, n, arch = padded_k(p.k), p.m, p.n, dg.arch
    ws_aligned = 1 << 20  # the pool's blocks are 512-byte aligned: the workspaces' vector flag is on
    ka, cfga, sa_ = dequant_entry(
        dg.a_codes.data.ptr, ws_aligned, dg.a_scales, m, p.k, kp, p.a_fmt, p.a_scale_layout, "bfloat16", arch, True
    )
    kb, cfgb, sb_ = dequant_entry(
        dg.b_codes.data.ptr, ws_aligned, dg.b_scales, n, p.k, kp, p.b_fmt, p.b_scale_layout, "bfloat16", arch, True
    )
    kg, cfgg, sg_ = gated_entry(dg)
    ptr = np.uint64(0)
    pa = prepare(p.op, ka, cfga, (dg.a_codes, dg.a_scales, ptr, ptr, *sa_))
    pb = prepare(p.op, kb, cfgb, (dg.b_codes, dg.b_scales, ptr, ptr, *sb_))
    pg = prepare(p.op, kg, cfgg, (dg.a_codes, dg.a_scales, dg.b_codes, dg.b_scales, ptr, *sg_, ptr))
    if pa is None or pb is None or pg is None:
        return None
    va, vb, vg = (tuple(int(x) for x in t) for t in (sa_, sb_, sg_))
    memset = cupy.cuda.runtime.memsetAsync
    stream = cupy.cuda.get_current_stream

    def g(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, out_ptr: int) -> None:
        wa = alloc.empty((m, kp), np.uint16)
        wb = alloc.empty((n, kp), np.uint16)
        gate = alloc.empty(1, np.uint32)
        gp = gate.data.ptr
        memset(gp, 0, 4, stream().ptr)
        pa(a_ptr, sa_ptr, wa.data.ptr, gp, *va)
        pb(b_ptr, sb_ptr, wb.data.ptr, gp, *vb)
        cublas.gemm_bf16_nt(m, n, kp, wa.data.ptr, kp, wb.data.ptr, kp, out_ptr, n, out)
        pg(a_ptr, sa_ptr, b_ptr, sb_ptr, out_ptr, *vg, gp)

    return PreparedGemm(g, (pa, pb, pg))


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run, prepare_run))
