"""The small-M (decode) GEMM path ``sm90_decode`` on sm_90a: kernels_src/gemm/gemm_mx_decode_sm90.hip.

Decode multiplies a few tokens by a large weight: the time is the weight read. The kernel streams every weight
byte once (swap-AB: 16 weight rows are the M side of one ``mma.sync m16n8k32`` per MX block, up to 64 tokens the
N side in tiles of 8), keeps the partials of a block in registers, promotes them with the block's scales, and sums
the K-splitting warps of a CTA in shared memory in a fixed order. e2m1 operands are widened to e4m3 in registers,
so MXFP4 weights are read at half the bytes of MXFP8.

Envelope (everything inside runs here, the ``generic`` path serves the rest): ``m <= 64``; row-major scales;
``k % 32 == 0``; 16-byte aligned code bases; bf16 / fp16 out (float32 out only for e2m1 x e2m1, as on
``sm90_wgmma``: the fp8 tensor cores' k32 partials carry ~2-5e-5 relative error); sizes below 2^31.

Parallelism without a workspace: a CTA owns 16 weight rows and ``KW`` warps split its K range; ``KW`` (4, 8 or 16)
is chosen so that the grid holds enough warps to keep the weight stream busy (:func:`plan`). ``split_k > 1``
splits K across CTAs on top, with the shared deterministic / atomic modes (:mod:`mxrt.ops.gemm_splitk`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_decode_kernels as K
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path
from .gemm_splitk import run_split_k

NAME = "sm90_decode"
TARGET = "sm_90a"
PRIORITY = 30  # above sm90_wgmma (20): inside its envelope the decode kernel is the faster one (RESULTS.md)
_LIMIT = 2**31
#: warps the grid should hold to keep the weight stream busy: 132 SMs x ~16 warps in flight (RESULTS.md)
TARGET_WARPS = 2048


def supports(dg: DeviceGemm) -> str | None:
    p = dg.p
    if p.m > K.DECODE_MAX_M:
        return f"m = {p.m} > {K.DECODE_MAX_M} (the decode envelope)"
    if p.split_k > MAX_GRID_YZ:
        return f"split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)"
    if p.a_scale_layout is not None or p.b_scale_layout is not None:
        return "preshuffled scale layouts (this path reads row-major [rows, k/32] scales)"
    out = dtype_name(p.out_dtype)
    if out not in codes.GEMM_OUT_DTYPE_CODES:
        return f"out dtype {out}"
    if out == "float32" and not p.a_fmt == p.b_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 tensor cores' k32 partials miss the 1e-5 relative bar)"
    if p.k % 32:
        return f"k = {p.k}, expected a multiple of 32 (whole MX blocks per row)"
    for name, c in (("a", dg.a_codes), ("b", dg.b_codes)):
        if c.data.ptr % 16:
            return f"{name} codes start at {c.data.ptr:#x}, not 16-byte aligned"
    if max(p.m, p.n, p.k) >= _LIMIT or max(p.m, p.n) * p.k_blocks >= _LIMIT:
        return "sizes of 2^31 or more"
    return None


@dataclass(frozen=True)
class DecodeConfig:
    """Tuning defines of one gemm_mx_decode_sm90 build (see the kernel header)."""

    mt: int
    rw: int
    kw: int
    u: int

    @property
    def threads(self) -> int:
        return 32 * self.rw * self.kw

    @property
    def rows(self) -> int:
        return 16 * self.rw


def plan(m: int, n: int, k: int, split_k: int) -> DecodeConfig:
    """The smallest token tile that holds ``m``; as many K warps per CTA as the grid needs to reach
    :data:`TARGET_WARPS` warps, but no fewer than ``U`` blocks per warp."""
    mt = next(t for t in K.DECODE_MT if 8 * t >= m)
    ctas = -(-n // (16 * K.DECODE_RW)) * split_k
    blocks = max(1, k // 32 // split_k)
    u = K.DECODE_U[mt]
    kw = K.DECODE_KW[0]
    for cand in K.DECODE_KW:
        if ctas * K.DECODE_RW * kw >= TARGET_WARPS or blocks < cand * u or cand > K.DECODE_KW_MAX[mt]:
            break
        kw = cand
    return DecodeConfig(mt, K.DECODE_RW, kw, u)


_LAUNCHES: dict = {}  # (sizes, formats, out code, atomic, tune, arch) -> (kernel, LaunchConfig)


def _launch_plan(dg: DeviceGemm, out_code: int, atomic: bool, tune: dict) -> tuple[Any, LaunchConfig]:
    p = dg.p
    c = plan(p.m, p.n, p.k, p.split_k)
    c = DecodeConfig(*(tune.get(f, getattr(c, f)) for f in ("mt", "rw", "kw", "u")))
    d = defines(
        A_FMT=codes.FMT_CODES[p.a_fmt],
        ATOMIC=int(atomic),
        B_FMT=codes.FMT_CODES[p.b_fmt],
        KW=c.kw,
        MT=c.mt,
        OUT_DTYPE=out_code,
        RW=c.rw,
        U=c.u,
    )
    kernel = build(K.GEMM_MX_DECODE_SM90, d, dg.arch)
    return kernel, LaunchConfig((-(-p.n // c.rows), 1, p.split_k), (c.threads, 1, 1))


def _launch(dg: DeviceGemm, dst: Any, out_code: int, atomic: bool, tune: dict) -> None:
    p = dg.p
    key = (p.m, p.n, p.k, p.split_k, p.a_fmt, p.b_fmt, out_code, atomic, tuple(sorted(tune.items())), dg.arch)
    hit = _LAUNCHES.get(key)
    if hit is None:
        if len(_LAUNCHES) >= 4096:
            _LAUNCHES.clear()
        hit = _LAUNCHES[key] = _launch_plan(dg, out_code, atomic, tune)
    kernel, cfg = hit
    u32 = np.uint32
    args = (dg.a_codes, dg.a_scales, dg.b_codes, dg.b_scales, dst, u32(p.m), u32(p.n), u32(p.k), u32(p.split_k))
    launch(p.op, kernel, cfg, args)


def run(dg: DeviceGemm, **tune: int) -> None:
    """Launch on the current stream (split-K reduce / zeroing included). ``tune`` overrides the defines ``mt``,
    ``rw``, ``kw``, ``u`` (benchmarks/bench_decode.py); no host synchronisation."""
    if dg.p.is_empty:
        dg.out.fill(0)
        return
    run_split_k(dg, lambda dst, out_code, atomic: _launch(dg, dst, out_code, atomic, tune))


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run))
