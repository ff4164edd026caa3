"""The AMD twin of the MoE decode GEMM (:func:`mxrt.moe_gemm_mx` on gfx950 / gfx942): ``gemm_mx_decode_gfx950_moe``
/ ``gemm_mx_decode_gfx942_moe`` (kernels_src/gemm/, the dense AMD decode kernels' mainloops with gathered token
rows; body gemm_decode_amd.h). Imports without cupy.

One CTA per (64 rows of one expert, block of sorted slots, chunk of 16 * MT slots): it reads ``expert_ids[b]`` and
``num_tokens_post_padded`` on the device (no host synchronisation; the grid's block axis is the host-known bound
``min(len(expert_ids), numel)``, as on sm_90a), gathers the chunk's token rows ``x[id // a_div]`` straight into the
MFMA operand registers, streams the expert's weight rows once, sums its 4 waves in order (deterministic) and
stores ``out[id]`` (times ``topk_weights[id]``). Blocks past ``num_tokens_post_padded``, experts outside ``[0, E)``
and padding slots are skipped; ``out`` is zeroed first.

Envelope (:func:`unsupported` says why otherwise): gfx950 / gfx942; every format pair of ``GEMM_FORMAT_PAIRS``;
row-major scales; 16-byte aligned code rows (``k % 16 == 0``, ``k % 32`` with an e2m1 operand) and code bases;
bf16 / fp16 / fp32 out; the activations' codes and one expert's weight codes below 2^31 bytes each (32-bit buffer
offsets: the weight tensor itself may be larger, its expert base moves in 64 bits); ``numel`` and the layout's
capacity below 2^31; grid y / z <= 65535. Not proven on hardware: built offline for gfx942 / gfx950 (zero
spills) and run by the wave64 host emulator against the numpy twin (tests/test_moe_gemm_amd_host.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..runtime.kernel_spec import Defines, KernelSpec
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_decode_amd_kernels as K
from .gemm_amd import _FMTS, _LIMIT, OUT_CODES, _ptr, _row_bytes

OP = "moe_gemm_mx"
SPECS = {"gfx950": K.GEMM_MX_DECODE_GFX950_MOE, "gfx942": K.GEMM_MX_DECODE_GFX942_MOE}


def mt_for(block_size: int) -> int:
    """Token tiles of 16 per CTA (define MT): the smallest build whose 16 * MT slots hold a block (64 at most)."""
    return next(t for t in K.DECODE_AMD_MT if 16 * t >= min(block_size, K.DECODE_AMD_MAX_M))


def unsupported(target: str, p: Any) -> str | None:
    """Why the ``target`` MoE decode kernel cannot run the :class:`~mxrt.problems.MoeGemmProblem` ``p``, or None."""
    if target not in SPECS:
        return f"no AMD MoE decode kernel for target {target!r}"
    if p.x_fmt not in _FMTS or p.w_fmt not in _FMTS:
        return f"formats ({p.x_fmt}, {p.w_fmt}) are not e4m3 / e5m2 / e2m1"
    out = dtype_name(p.out_dtype)
    if out not in OUT_CODES:
        return f"out dtype {out} is not float32 / bfloat16 / float16"
    for name, fmt in (("x", p.x_fmt), ("w", p.w_fmt)):
        if _row_bytes(fmt, p.k) % 16:
            return (f"{name} code rows of {_row_bytes(fmt, p.k)} bytes are not 16-byte aligned (k = {p.k}: k % 16 == 0 "
                    "for fp8, k % 32 for e2m1)")  # fmt: skip
    kb = -(-p.k // 32)
    for name, rows, fmt in (("x", p.m_act, p.x_fmt), ("one expert of w", p.n, p.w_fmt)):
        if rows * _row_bytes(fmt, p.k) >= _LIMIT or rows * kb >= _LIMIT:
            return f"{name} holds {rows * _row_bytes(fmt, p.k)} code bytes: the kernel's 32-bit offsets reach < 2^31"
    if p.numel >= _LIMIT or int(p.sorted_token_ids.size) >= _LIMIT or max(p.n, p.k, p.e, p.block_size) >= _LIMIT:
        return f"numel = {p.numel}, cap = {p.sorted_token_ids.size}: 2^31 or more"
    nblocks, chunks = min(int(p.expert_ids.size), p.numel), -(-p.block_size // (16 * mt_for(p.block_size)))
    if nblocks > MAX_GRID_YZ or chunks > MAX_GRID_YZ:
        return f"{nblocks} blocks x {chunks} chunks of slots, at most {MAX_GRID_YZ} each (grid y / z)"
    if p.device:
        for name, a in (("x", p.x_codes), ("w", p.w_codes)):
            if _ptr(a) % 16:
                return f"{name} codes at {_ptr(a):#x} are not 16-byte aligned"
    return None


@dataclass(frozen=True)
class MoeAmdPlan:
    """One call's build and grid."""

    spec: KernelSpec
    defines: Defines
    config: LaunchConfig


def plan(target: str, p: Any) -> MoeAmdPlan:
    """The :class:`MoeAmdPlan` of a supported problem with at least one block, slot, output column and K element."""
    mt = mt_for(p.block_size)
    grid = (-(-p.n // K.DECODE_AMD_ROWS), min(int(p.expert_ids.size), p.numel), -(-p.block_size // (16 * mt)))
    return MoeAmdPlan(
        spec=SPECS[target],
        defines=K.decode_amd_variant(codes.FMT_CODES[p.x_fmt], codes.FMT_CODES[p.w_fmt], mt),
        config=LaunchConfig(grid=grid, block=(K.DECODE_AMD_THREADS, 1, 1)),
    )


def scalars(p: Any) -> tuple[int, ...]:
    """The kernel's run-time arguments after the nine pointers: m_act, n, k, e_num, numel, a_div, block_size, cap,
    out_dtype."""
    out = OUT_CODES[dtype_name(p.out_dtype)]
    return (p.m_act, p.n, p.k, p.e, p.numel, p.a_div, p.block_size, int(p.sorted_token_ids.size), out)


def run(target: str, p: Any, arrays: tuple, out: Any, arch: Any) -> None:
    """Launch on the current stream: ``arrays`` = (x codes, x scales, w codes, w scales, sorted ids, expert ids,
    num_tokens_post_padded, topk weights or None) as device arrays the kernel reads as they are; ``out`` zeroed
    here first."""
    from ..runtime.compiler import build

    out.fill(0)
    if p.is_empty:
        return
    xc, xs, wc, ws, ids, eids, ntpp, tw = arrays
    pl = plan(target, p)
    kernel = build(pl.spec, pl.defines, arch)
    s = tuple(np.int32(v) for v in scalars(p))
    launch(OP, kernel, pl.config, (xc, wc, xs, ws, out, ids, eids, ntpp, np.uint64(0) if tw is None else tw, *s))
