"""The GPU twin of :func:`mxrt.moe_gemm_mx` (MoE decode on the vLLM ``moe_align_block_size`` layout):
``gemm_mx_decode_sm90_moe`` of kernels_src/gemm/gemm_mx_decode_sm90.hip on sm_90a.

One CTA per (16 weight rows, block of sorted slots, chunk of 8 * MT slots): it reads ``expert_ids[b]`` and
``num_tokens_post_padded`` on the device (no host synchronisation; the grid is sized from the host-known bound on
the live blocks, ``min(len(expert_ids), numel)``), gathers the block's token rows ``x[id // a_div]`` by cp.async and
streams expert ``e``'s weight rows by TMA through the decode kernel's per-warp ring, and scatters ``out[id]`` (times
``topk_weights[id]``). Blocks past ``num_tokens_post_padded``, experts outside ``[0, E)`` (expert parallelism: -1)
and padding slots exit or are skipped; ``out`` is zeroed first, so slots no block reaches read 0.

Envelope (``unsupported`` says why otherwise; there is no portable MoE GEMM kernel yet): sm_90a; row-major
scales; ``k % 128 == 0``; 16-byte aligned codes, 4-byte aligned scales; bf16 / fp16 out (float32 only for
e2m1 x e2m1, as the dense decode path); ``E * N < 2^31`` weight rows (TMA row coordinates); grid y / z <= 65535.
Weights of 2 GB and more are fine: every offset is 64-bit and TMA addresses the weight map with 64-bit strides.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_decode_kernels as K
from .gemm import DEVICE_OUT_DTYPES
from .gemm_sm90 import tensor_map_arg

OP = "moe_gemm_mx"
_LIMIT = 2**31
MOE_DEFAULT, MOE_DEFAULT_E2M1, MOE_LONG_K = K.MOE_DEFAULT, K.MOE_DEFAULT_E2M1, K.MOE_LONG_K  # the tuned builds


def moe_build(mt: int, w_fmt: str, k: int) -> tuple[int, int, int]:
    """(kw, stages, rt) of the MoE build for MT token tiles, weights of format ``w_fmt`` and reduction length k."""
    long_k, short_k = (MOE_DEFAULT_E2M1 if w_fmt == "e2m1" else MOE_DEFAULT)[mt]
    return long_k if k >= MOE_LONG_K else short_k


def _mt(block_size: int) -> int:
    return next(t for t in K.DECODE_MT if 8 * t >= min(block_size, K.DECODE_MAX_M))


def unsupported(p: Any) -> str | None:
    """Why the GPU cannot run ``p`` (None when it can)."""
    arch = get_arch()
    if arch.target != "sm_90a":
        return f"the MoE decode kernel runs on sm_90a, this device is {arch.target!r}"
    out = dtype_name(p.out_dtype)
    if out not in codes.GEMM_OUT_DTYPE_CODES:
        return f"out dtype {out}"
    if out == "float32" and not p.x_fmt == p.w_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 tensor cores' k32 partials miss the 1e-5 relative bar)"
    if p.k % 128:
        return f"k = {p.k}, expected a multiple of 128"
    if p.e * p.n >= _LIMIT or p.m_act * max(-(-p.k // 32), 1) >= _LIMIT or p.numel >= _LIMIT:
        return f"E * N = {p.e * p.n} weight rows or m_act = {p.m_act}: 2^31 or more"
    nblocks = min(int(p.expert_ids.size), p.numel)  # the live blocks' bound (mxrt.problems.moe_gemm)
    chunks = -(-p.block_size // (8 * _mt(p.block_size)))
    if nblocks > MAX_GRID_YZ or chunks > MAX_GRID_YZ:
        return f"{nblocks} blocks x {chunks} chunks of slots, at most {MAX_GRID_YZ} each (grid y / z)"
    if p.device:
        for name, a, align in (("x", p.x_codes, 16), ("w", p.w_codes, 16), ("x", p.x_scales, 4), ("w", p.w_scales, 4)):
            if a.data.ptr % align:
                return f"{name} buffer at {a.data.ptr:#x} is not {align}-byte aligned"
    return None


def _dev(a: Any, dtype: Any) -> Any:
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(a, dtype=dtype))


_KERNELS: dict = {}


def moe_gemm_mx_gpu(p: Any) -> Any:
    """Run a validated :class:`~mxrt.problems.MoeGemmProblem` on the GPU: device operands -> device ``out``
    (``p.out`` when given, zeroed first), host operands -> uploaded, host result. No host synchronisation."""
    arch = get_arch()
    name = dtype_name(p.out_dtype)
    u8 = np.uint8
    xc, xs, wc, ws = (_dev(a, u8) for a in (p.x_codes, p.x_scales, p.w_codes, p.w_scales))
    ids, eids, ntpp = (_dev(a, np.int32) for a in (p.sorted_token_ids, p.expert_ids, p.num_tokens_post_padded))
    tw = None if p.topk_weights is None else _dev(p.topk_weights, np.float32).reshape(-1)
    out = p.out if (p.device and p.out is not None) else alloc.empty((p.numel, p.n), DEVICE_OUT_DTYPES[name])
    out.fill(0)
    nblocks = int(eids.size)
    if p.numel and p.n and nblocks and p.k:
        mt = _mt(p.block_size)
        kw, stages, rt = moe_build(mt, p.w_fmt, p.k)
        fa, fb = codes.FMT_CODES[p.x_fmt], codes.FMT_CODES[p.w_fmt]
        out_code = codes.GEMM_OUT_DTYPE_CODES[name]
        d = K.decode_variant(fa, fb, 0, kw, mt, out_code, stages, rt)
        smem = K.smem_bytes(fa, fb, mt, kw, stages, rt)
        key = (d, arch)
        kernel = _KERNELS.get(key)
        if kernel is None:
            kernel = build(K.GEMM_MX_DECODE_SM90_MOE, d, arch)
            if kernel.max_dynamic_shared_size_bytes < smem:
                kernel.max_dynamic_shared_size_bytes = smem
            _KERNELS[key] = kernel
        wrow = K.row_bytes(fb)
        tmw = tensor_map_arg(wc.data.ptr, p.e * p.n, p.k * wrow // 128, 16 * rt, wc.data.device_id, wrow)
        chunks = -(-p.block_size // (8 * mt))
        # at most numel blocks are live (mxrt.problems.moe_gemm): the CTA rows past them would only read
        # num_tokens_post_padded and leave (at T = 1, 53 of 61 rows; ~25% of the call, RESULTS.md session 20)
        cfg = LaunchConfig((-(-p.n // (16 * rt)), min(nblocks, p.numel), chunks), (32 * kw, 1, 1), smem)
        u32 = np.uint32
        args = (tmw, xc, xs, ws, out, ids, eids, ntpp, np.uint64(0) if tw is None else tw, u32(p.n), u32(p.k),
                u32(p.e), u32(p.numel), u32(p.a_div), u32(p.block_size), np.uint64(ids.size))  # fmt: skip
        launch(OP, kernel, cfg, args)
    if p.device:
        return out
    host = out.get()
    return host.view(ml_dtypes.bfloat16) if name == "bfloat16" else host
