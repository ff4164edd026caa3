"""The GPU twin of :func:`mxrt.moe_gemm_mx` (MoE decode on the vLLM ``moe_align_block_size`` layout):
``gemm_mx_decode_sm90_moe`` of kernels_src/gemm/gemm_mx_decode_sm90_moe.hip on sm_90a; on gfx950 / gfx942 the AMD
kernels of :mod:`mxrt.ops.moe_gemm_amd` (their own envelope; this module converts the arrays and zeroes ``out``).

One CTA per (16 * RT weight rows, block of sorted slots, chunk of 8 * MT slots; the build from :func:`moe_build`):
it reads ``expert_ids[b]`` and ``num_tokens_post_padded`` on the device (no host synchronisation; the grid is sized
from the host-known bound on the live blocks, ``min(len(expert_ids), numel)``), gathers the block's token rows
``x[id // a_div]`` by cp.async and streams expert ``e``'s weight rows by TMA through the decode kernel's per-warp
ring, and scatters ``out[id]`` (times ``topk_weights[id]``). Blocks past ``num_tokens_post_padded``, experts outside
``[0, E)`` (expert parallelism: -1) and padding slots exit or are skipped; ``out`` is zeroed first, so slots no
block reaches read 0.

Envelope on sm_90a (``unsupported`` says why otherwise; there is no portable MoE GEMM kernel yet): row-major
scales; ``k % 128 == 0``; 16-byte aligned codes, 4-byte aligned scales; bf16 / fp16 out (float32 only for
e2m1 x e2m1, as the dense decode path); ``E * N < 2^31`` weight rows (TMA row coordinates); grid y / z <= 65535.
Weights of 2 GB and more are fine: every offset is 64-bit and TMA addresses the weight map with 64-bit strides.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .. import codes
from .._kinds import dtype_name, is_device_array
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build_with_smem
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from ..runtime.launch import prepare as prepare_launch
from . import gemm_decode_kernels as K
from . import moe_gemm_amd
from .gemm import DEVICE_OUT_DTYPES
from .gemm_sm90 import TensorMapMemo, tensor_map_arg

OP = "moe_gemm_mx"
_LIMIT = 2**31
MOE_DEFAULT, MOE_DEFAULT_E2M1, MOE_LONG_K = K.MOE_DEFAULT, K.MOE_DEFAULT_E2M1, K.MOE_LONG_K  # the tuned builds
MOE_FEW_E2M1, MOE_FEW_BLOCKS = K.MOE_FEW_E2M1, K.MOE_FEW_BLOCKS
MOE_CHUNKED_FP8_SHORT_K = K.MOE_CHUNKED_FP8_SHORT_K


def moe_build(mt: int, w_fmt: str, k: int, blocks: int | None = None, chunks: int = 1) -> tuple[int, int, int]:
    """(kw, stages, rt) of the MoE build for MT token tiles, weights of format ``w_fmt``, reduction length k, at most
    ``blocks`` live blocks (the grid's host bound, ``min(len(expert_ids), numel)``; None: many) and ``chunks`` chunks
    per block: the tuned tables, the few-block e2m1 builds (short K: with one chunk only; RESULTS.md session 24, calls
    16-17), the fp8 short-K build with several chunks."""
    if w_fmt == "e2m1":  # the few-block short-K build (1 warp) lost beside grid chunks, the long-K one gained
        few = blocks is not None and blocks <= MOE_FEW_BLOCKS and mt in MOE_FEW_E2M1
        few = few and (chunks == 1 or k >= MOE_LONG_K)
        long_k, short_k = (MOE_FEW_E2M1 if few else MOE_DEFAULT_E2M1)[mt]
    else:
        long_k, short_k = MOE_DEFAULT[mt]
        if chunks > 1 and mt in MOE_CHUNKED_FP8_SHORT_K:
            short_k = MOE_CHUNKED_FP8_SHORT_K[mt]
    return long_k if k >= MOE_LONG_K else short_k


def live_block_bound(n_expert_ids: int, numel: int) -> int:
    """The host bound on a call's live blocks (mxrt.problems.moe_gemm): the grid's y extent."""
    return min(n_expert_ids, numel)


def live_blocks(p: Any) -> int:
    """:func:`live_block_bound` of a problem."""
    return live_block_bound(int(p.expert_ids.size), p.numel)


def _mt(block_size: int, numel: int | None = None, e: int | None = None) -> int:
    """Token tiles of 8 per CTA (the build's MT; a block of more slots runs in chunks of 8 * MT). A block holds at
    most ``block_size`` slots, but at decode sizes far fewer: with ``numel`` slots over ``e`` local experts, MT covers
    twice the mean per expert (at least 16, the blocks of 16 the builds are tuned on): blocks of 32 / 64 at T <= 64
    ran 1.1-1.9x faster this way than with MT 4 / 8 (RESULTS.md session 24, call 15). A block with more slots than a
    chunk holds runs several chunks, each streaming the expert's weights."""
    cap = min(block_size, K.DECODE_MAX_M)
    if numel is not None and e:
        cap = min(cap, max(16, 2 * -(-numel // e)))
    return next(t for t in K.DECODE_MT if 8 * t >= cap)


def plan_build(
    block_size: int, numel: int, e: int, w_fmt: str, k: int, n_expert_ids: int
) -> tuple[int, int, bool, tuple[int, int, int]]:
    """(MT, chunks, loop, (kw, stages, rt)) of a call: the token tiles per CTA (:func:`_mt`), the chunks per block,
    whether one CTA per block runs them in turn (the chunk-loop build: where a block has several chunks and the grid
    more than MOE_FEW_BLOCKS live blocks; at T = 1 a grid chunk per CTA was faster, 48.6 against 52.5 us: RESULTS.md
    session 24, call 21) and the build (:func:`moe_build`)."""
    mt = _mt(block_size, numel, e)
    chunks = -(-block_size // (8 * mt))
    blocks = live_block_bound(n_expert_ids, numel)
    return mt, chunks, chunks > 1 and blocks > MOE_FEW_BLOCKS, moe_build(mt, w_fmt, k, blocks, chunks)


def problem_build(p: Any) -> tuple[int, int, bool, tuple[int, int, int]]:
    """:func:`plan_build` of a problem (mxrt.problems.moe_gemm)."""
    return plan_build(p.block_size, p.numel, p.e, p.w_fmt, p.k, int(p.expert_ids.size))


def unsupported(p: Any) -> str | None:
    """Why the GPU cannot run ``p`` (None when it can)."""
    arch = get_arch()
    if arch.target in moe_gemm_amd.SPECS:
        return moe_gemm_amd.unsupported(arch.target, p)
    if arch.target != "sm_90a":
        return f"the MoE decode kernels run on sm_90a, gfx950 and gfx942; this device is {arch.target!r}"
    out = dtype_name(p.out_dtype)
    if out not in codes.GEMM_OUT_DTYPE_CODES:
        return f"out dtype {out}"
    if out == "float32" and not p.x_fmt == p.w_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 tensor cores' k32 partials miss the 1e-5 relative bar)"
    if p.k % 128:
        return f"k = {p.k}, expected a multiple of 128"
    if p.e * p.n >= _LIMIT or p.m_act * max(-(-p.k // 32), 1) >= _LIMIT or p.numel >= _LIMIT:
        return f"E * N = {p.e * p.n} weight rows or m_act = {p.m_act}: 2^31 or more"
    nblocks = live_blocks(p)  # the live blocks' bound (mxrt.problems.moe_gemm)
    chunks = problem_build(p)[1]  # the grid's z without the chunk loop: the bound either way
    if nblocks > MAX_GRID_YZ or chunks > MAX_GRID_YZ:
        return f"{nblocks} blocks x {chunks} chunks of slots, at most {MAX_GRID_YZ} each (grid y / z)"
    if p.device:
        for name, a, align in (("x", p.x_codes, 16), ("w", p.w_codes, 16), ("x", p.x_scales, 4), ("w", p.w_scales, 4)):
            if a.data.ptr % align:
                return f"{name} buffer at {a.data.ptr:#x} is not {align}-byte aligned"
    return None


def _as_is(a: Any, dtype: Any) -> bool:
    """Whether the kernel reads device array ``a`` as it is (dtype ``dtype``, C-contiguous)."""
    return is_device_array(a) and a.dtype == dtype and a.flags.c_contiguous


def _dev(a: Any, dtype: Any) -> Any:
    if _as_is(a, dtype):
        return a
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(a, dtype=dtype))


def _entry(p: Any, arch: Any) -> tuple[Any, LaunchConfig, tuple[int, int, int, int]]:
    """The kernel, launch configuration and weight tensor-map geometry (rows, 128-byte columns, box rows, box
    bytes) of a problem with at least one block, slot, weight row and K group."""
    name = dtype_name(p.out_dtype)
    mt, chunks, loop, (kw, stages, rt) = problem_build(p)
    fa, fb = codes.FMT_CODES[p.x_fmt], codes.FMT_CODES[p.w_fmt]
    d = K.decode_variant(fa, fb, 0, kw, mt, codes.GEMM_OUT_DTYPE_CODES[name], stages, rt, int(loop))
    smem = K.smem_bytes(fa, fb, mt, kw, stages, rt)
    kernel = build_with_smem(K.GEMM_MX_DECODE_SM90_MOE, d, arch, smem)  # repeated calls skip this: their plan
    wrow = K.row_bytes(fb)
    # at most numel blocks are live (mxrt.problems.moe_gemm): the CTA rows past them would only read
    # num_tokens_post_padded and leave (at T = 1, 53 of 61 rows: 4 us of the down GEMM's 58, RESULTS.md session 20)
    # the chunk loop: one CTA per block runs its chunks in turn (the CL build), up to its last slot; else a grid chunk
    cfg = LaunchConfig((-(-p.n // (16 * rt)), live_blocks(p), 1 if loop else chunks), (32 * kw, 1, 1), smem)
    return kernel, cfg, (p.e * p.n, p.k * wrow // 128, 16 * rt, wrow)


def _scalars(p: Any) -> tuple:
    u32 = np.uint32
    return (u32(p.n), u32(p.k), u32(p.e), u32(p.numel), u32(p.a_div), u32(p.block_size),
            np.uint64(p.sorted_token_ids.size))  # fmt: skip


def _run_sm90(p: Any, arch: Any, arrays: tuple, out: Any) -> None:
    out.fill(0)
    if p.is_empty:
        return
    xc, xs, wc, ws, ids, eids, ntpp, tw = arrays
    kernel, cfg, geo = _entry(p, arch)
    tmw = tensor_map_arg(wc.data.ptr, geo[0], geo[1], geo[2], wc.data.device_id, geo[3])
    launch(OP, kernel, cfg, (tmw, xc, xs, ws, out, ids, eids, ntpp, np.uint64(0) if tw is None else tw, *_scalars(p)))


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
    arrays = (xc, xs, wc, ws, ids, eids, ntpp, tw)
    if arch.target in moe_gemm_amd.SPECS:
        moe_gemm_amd.run(arch.target, p, arrays, out, arch)
    else:
        _run_sm90(p, arch, arrays, out)
    if p.device:
        return out
    host = out.get()
    return host.view(ml_dtypes.bfloat16) if name == "bfloat16" else host


class PreparedMoe:
    """The launch of one call signature with everything but the pointers fixed (:func:`prepare`): ``out`` is zeroed
    by cudaMemsetAsync and the kernel launched through a :class:`~mxrt.runtime.launch.PreparedLaunch`, the weight
    tensor map memoised by pointer. Call :meth:`usable` first (the launch route and device it was made for)."""

    __slots__ = ("_launch", "_map_w", "_memset", "_nbytes", "_scalars", "_stream")

    def __init__(self, pl: Any, map_w: TensorMapMemo, scalars: tuple, nbytes: int) -> None:
        import cupy

        self._launch, self._map_w, self._nbytes = pl, map_w, nbytes
        self._scalars = tuple(int(v) for v in scalars)
        self._memset, self._stream = cupy.cuda.runtime.memsetAsync, cupy.cuda.get_current_stream

    def usable(self) -> bool:
        return self._launch is None or self._launch.usable()

    def __call__(self, xc: int, xs: int, wc: int, ws: int, out: int, ids: int, eids: int, ntpp: int, tw: int) -> None:
        """Device pointers (``tw`` 0 without routing weights) on CuPy's current stream."""
        self._memset(out, 0, self._nbytes, self._stream().ptr)
        if self._launch is not None:
            self._launch(self._map_w(wc), xc, xs, ws, out, ids, eids, ntpp, tw, *self._scalars)


def prepare(p: Any, out: Any) -> PreparedMoe | None:
    """The :class:`PreparedMoe` of a device problem whose arrays the kernel reads as they are (no conversion in
    :func:`moe_gemm_mx_gpu`), with ``out`` a sample output of its dtype and shape; None where the launch goes
    through CuPy's call (ROCm, ``MXRT_LAUNCH=cupy``) or an array would be converted."""
    if not p.device or get_arch().target != "sm_90a":
        return None
    pairs = [(p.x_codes, np.uint8), (p.x_scales, np.uint8), (p.w_codes, np.uint8), (p.w_scales, np.uint8)]
    pairs += [(a, np.int32) for a in (p.sorted_token_ids, p.expert_ids, p.num_tokens_post_padded)]
    if p.topk_weights is not None:
        pairs.append((p.topk_weights, np.float32))
    if not all(_as_is(a, dtype) for a, dtype in pairs):
        return None
    nbytes = int(out.nbytes)
    if p.is_empty:
        return PreparedMoe(None, None, (), nbytes)  # type: ignore[arg-type]
    kernel, cfg, geo = _entry(p, get_arch())
    dev = p.w_codes.data.device_id
    tmw = tensor_map_arg(p.w_codes.data.ptr, geo[0], geo[1], geo[2], dev, geo[3])
    sample = (tmw, p.x_codes, p.x_scales, p.w_scales, out, p.sorted_token_ids, p.expert_ids,
              p.num_tokens_post_padded, np.uint64(0), *_scalars(p))  # fmt: skip
    pl = prepare_launch(OP, kernel, cfg, sample)
    if pl is None:
        return None
    return PreparedMoe(pl, TensorMapMemo(geo[0], geo[1], geo[2], dev, geo[3]), _scalars(p), nbytes)
