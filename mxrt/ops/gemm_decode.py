"""The small-M (decode) GEMM path ``sm90_decode`` on sm_90a: kernels_src/gemm/gemm_mx_decode_sm90.hip.

Decode multiplies a few tokens by a large weight: the time is the weight read. The kernel streams every weight
byte once (swap-AB: 16 weight rows are the M side of one ``mma.sync m16n8k32`` per MX block, up to 64 tokens the
N side in tiles of 8), keeps the partials of a block in registers, promotes them with the block's scales, and sums
the K-splitting warps of a CTA in shared memory in a fixed order. e2m1 operands are widened in registers (tokens to
e4m3, weights to f16 for two chained ``m16n8k16`` f16 HMMAs: no fp8 unpacks), so MXFP4 weights are read at half the
bytes of MXFP8.

Envelope (everything inside runs here; ``sm90_wgmma`` or ``generic`` serve the rest): ``m <= 64``; row-major
scales or any preshuffled layout (``aiter32x8``, ``turbo16x4`` bytes or uint32 words, ``cublas128x4``,
``deepgemm_ue8m0``, per operand) read in place; weight codes row-major or ``aiter16x16``; ``k % 128 == 0``; 16-byte
aligned code bases and 4-byte aligned scales; bf16 / fp16 out (float32 out only for e2m1 x e2m1, as on
``sm90_wgmma``: the fp8 tensor cores' k32 partials carry ~2-5e-5 relative error); sizes below 2^31 (a layout's
storage too: 32-bit scale offsets).

Weight codes in the aiter 16x16 layout (``b_weight_layout="aiter16x16"``, define WLB = 1) are read in place: a
16-row tile's stage is a run of 256-byte chunk columns in that layout, one 3-D TMA box copies it unswizzled
(:func:`mxrt.ops.gemm_sm90.tensor_map_w16`) and the fragment reads address the layout's order.
The hand-over to the wgmma decode kernel (which reads the layout too) is as for row-major weights; a tuned-table entry
naming a path that does not read the layout is not followed.

Scale layouts (defines SLA / SLB, :data:`gemm_decode_kernels.DECODE_LAYOUTS`; the index maps of
kernels_src/common/scale_layouts.h): a stage's 4 scale bytes of a row are one aligned word in row-major,
``cublas128x4`` and ``deepgemm_ue8m0`` storage, so those copy one word per row as row-major does; ``aiter32x8`` and
``turbo16x4`` scatter them over 4 words (one per block), staged and gathered with byte permutes. Row-major builds
are the same code as before the layouts existed (SLA = SLB = 0 compile the layout branches out).

Memory-level parallelism without registers or issue slots: each warp streams its 16 * RT rows x its share of the
CTA's K range through a private ring of shared-memory stages of 4 MX blocks (two TMA tiles per stage issued by one
lane, scale words by cp.async), so many KB per SM are in flight while the warp multiplies the oldest stage. A CTA
owns 16 * RT weight rows (RT row tiles share each token fragment: the token tile a CTA loads from L2 serves RT times
more weight bytes); ``KW`` warps split its K range and are summed in shared memory in a fixed order.
``split_k > 1`` splits K across CTAs on top, with the shared deterministic / atomic modes
(:mod:`mxrt.ops.gemm_splitk`); with ``split_k == 1`` (the default) the path splits K itself when its CTAs
would leave SMs idle (:func:`plan`; still deterministic unless ``deterministic=False``).

Tuned table (:mod:`mxrt.ops.decode_table`): a cell (target, device, N, K, M bucket, weight format: fp8 or e2m1) with
an entry runs the entry's build and split (a ``split_k=1`` call, or one whose split_k equals the entry's); an entry
naming another GEMM path makes :func:`supports` decline the cell with "tuned table routes it to <path>" (when that
path supports it), so the selection falls through to it. Absent an entry, the envelope defaults of :func:`plan` run;
e2m1 weights without an e2m1 entry run the cell's fp8 entry's build (an fp8 entry never routes them elsewhere).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..codes import SCALE_LAYOUT_CODES
from ..config import gemm_path_override
from ..layouts import scale_layout_shape
from ..runtime.compiler import build
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch, prepare
from . import decode_table, gemm_decode_wg
from . import gemm_decode_kernels as K
from .gemm_paths import (
    DeviceGemm,
    GemmPath,
    PreparedGemm,
    gemm_paths,
    invalidate_plans,
    register_gemm_path,
    weight_layout_reason,
)
from .gemm_sm90 import TensorMapMemo, scale_layout_code, tensor_map_arg, tensor_map_w16_arg
from .gemm_splitk import prepare_split_k, run_split_k

NAME = "sm90_decode"
TARGET = "sm_90a"
PRIORITY = 30  # above sm90_wgmma (20): inside its envelope the decode kernel is the faster one (RESULTS.md)
_LIMIT = 2**31
_READS = "aiter32x8, turbo16x4 (bytes or uint32 words), cublas128x4, deepgemm_ue8m0"
#: e2m1 weights in the aiter 16x16 layout stay on this kernel up to this token count (row-major ones: up to
#: gemm_decode_wg.E2M1_MIN_M): at M 16 on 7168 x 4096 (H100, session 22) this kernel's shuffled build takes 15.3 us
#: (call 6), the wgmma kernel's ~16.0 (its row-major twin's 15.2 x the 1.049 ncu measured after the staging mend,
#: call 9; 19.1 us before it, call 5); at M 64 the wgmma kernel wins (23.0 us against 38.1, call 5)
E2M1_W16_MIN_M = 16


def supports(dg: DeviceGemm) -> str | None:
    p = dg.p
    if p.m > K.DECODE_MAX_M:
        return f"m = {p.m} > {K.DECODE_MAX_M} (the decode envelope)"
    if p.split_k > MAX_GRID_YZ:
        return f"split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)"
    for name, rows, layout, s in (("a", p.m, p.a_scale_layout, dg.a_scales), ("b", p.n, p.b_scale_layout, dg.b_scales)):
        if layout is None:
            continue
        if layout not in SCALE_LAYOUT_CODES or scale_layout_code(layout, s) not in K.DECODE_LAYOUTS:
            return f"{name}_scale_layout={layout!r} is not read by this kernel (row-major or {_READS})"
        if np.prod(scale_layout_shape(layout, rows, p.k_blocks), dtype=np.int64) >= _LIMIT:
            return f"a {layout} scale storage of 2^31 elements or more (32-bit scale offsets)"
    out = dtype_name(p.out_dtype)
    if out not in codes.GEMM_OUT_DTYPE_CODES:
        return f"out dtype {out}"
    if out == "float32" and not p.a_fmt == p.b_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 tensor cores' k32 partials miss the 1e-5 relative bar)"
    if p.k % 128:
        return f"k = {p.k}, expected a multiple of 128 (the kernel streams groups of 4 MX blocks)"
    for name, c, align in (("a", dg.a_codes, 16), ("b", dg.b_codes, 16), ("a", dg.a_scales, 4), ("b", dg.b_scales, 4)):
        if c.data.ptr % align:
            what = "codes" if align == 16 else "scales"
            return f"{name} {what} start at {c.data.ptr:#x}, not {align}-byte aligned (cp.async)"
    if max(p.m, p.n, p.k) >= _LIMIT or max(p.m, p.n) * p.k_blocks >= _LIMIT:
        return "sizes of 2^31 or more"
    return _routed(dg)


def _routed(dg: DeviceGemm) -> str | None:
    """The tuned table's decline: the entry of the cell for the call's weight format names another path that
    supports the call, or with no entry the envelope default hands the call to the wgmma kernel (fp8 weights above
    ``gemm_decode_wg.DEFAULT_MIN_M`` tokens, e2m1 weights above ``gemm_decode_wg.E2M1_MIN_M``). Not when
    ``MXRT_GEMM_PATH`` forces this path."""
    p, arch = dg.p, getattr(dg, "arch", None)
    if arch is None:  # a shape-only stand-in (tests/test_decode_guards.py): no device, no table
        return None
    if gemm_path_override() == NAME:
        return None

    def wg_above(min_m: int | None) -> bool:  # the wgmma kernel, registered here, takes m > min_m and this call
        wg = next((q for q in gemm_paths(arch.target) if q.name == gemm_decode_wg.NAME), None)
        return (
            min_m is not None
            and p.m > min_m
            and wg is not None
            and weight_layout_reason(wg, dg) is None
            and gemm_decode_wg.supports(dg) is None
        )

    entry = decode_table.lookup(arch.target, arch.name, p.n, p.k, p.m, p.b_fmt)
    if entry is None:  # the envelope default: the wgmma kernel above its token count, where it serves the call
        if p.b_fmt == "e2m1":  # MXFP4 weights: a measured token threshold of their own
            e2m1_min = gemm_decode_wg.E2M1_MIN_M
            if p.b_weight_layout is not None and e2m1_min is not None:
                e2m1_min = max(e2m1_min, E2M1_W16_MIN_M)
            if wg_above(e2m1_min):
                return f"m = {p.m} > {e2m1_min} with e2m1 weights: routed to {gemm_decode_wg.NAME}"
            return None
        wg_min = gemm_decode_wg.DEFAULT_MIN_M
        if wg_above(wg_min):
            return f"m = {p.m} > {wg_min}: the envelope default routes it to {gemm_decode_wg.NAME}"
        return None
    if entry.path == NAME:
        return None
    other = next((q for q in gemm_paths(arch.target) if q.name == entry.path), None)
    if other is None or weight_layout_reason(other, dg) is not None or other.supports(dg) is not None:
        return None  # the routed path is not registered here or declines the call: the decode path serves it
    return f"tuned table routes it to {entry.path}"


@dataclass(frozen=True)
class DecodeConfig:
    """Tuning defines of one gemm_mx_decode_sm90 build (see the kernel header)."""

    mt: int
    kw: int
    stages: int
    rt: int = 1

    @property
    def threads(self) -> int:
        return 32 * self.kw


#: (kw, stages) per MT: the best of the sweep at 7168 x 4096 on an H100 (RESULTS.md, session 5 call 6)
DEFAULT = {1: (2, 3), 2: (4, 3), 4: (2, 2), 8: (2, 2)}
#: weight row tiles of 16 per CTA (define RT) per MT: the token tile a CTA loads serves 16 * RT rows
RT_DEFAULT = {1: 1, 2: 2, 4: 4, 8: 2}
#: warps the grid should hold (~7 per SM on 132 SMs: the 7168 x 4096 optimum); fewer CTAs get more warps each
GRID_WARPS = 896


@functools.lru_cache(maxsize=4096)
def plan(
    m: int,
    n: int,
    k: int,
    split_k: int,
    sms: int = 132,
    target: str | None = None,
    device: str = "",
    layouts: tuple[int, int] = (0, 0),
    fmts: tuple[str, str] = ("e4m3", "e4m3"),
) -> tuple[DecodeConfig, int]:
    """The build and the split of one problem: the smallest token tile that holds ``m``. With ``target`` given,
    the tuned table's decode entry for (target, device, n, k, M bucket, weight format ``fmts[1]``; e2m1 weights
    without an e2m1 entry take the fp8 entry's build) when it has one, ``split_k`` is 1 or the entry's split, and its
    rings fit in shared memory with the operand formats ``fmts`` (tokens, weights) and the scale layouts ``layouts``
    (SLA, SLB). Else the envelope defaults: warps and ring depth from the sweep (RESULTS.md, session 5); with
    ``split_k == 1`` (the default) and fewer CTAs (of 16 * RT rows) than SMs, K is split across CTAs
    (deterministic: fp32 slices reduced in order), at most 16 ways and 4 groups of 4 MX blocks per split; then more
    K warps per CTA while the grid holds fewer than :data:`GRID_WARPS` warps, each warp keeps at least two groups
    and the rings fit in shared memory (sized for e4m3 x e4m3 whatever ``fmts``: the defaults are the same build for
    every format pair)."""
    mt = next(t for t in K.DECODE_MT if 8 * t >= m)
    if target is not None:
        e = decode_table.lookup(target, device, n, k, m, fmts[1])
        if e is None and decode_table.table_w_fmt(fmts[1]) != decode_table.FP8_W_FMT:
            # no entry of the weight format: the fp8 entry's build (4.6% off the e2m1 optimum at the median on an
            # H100, the envelope defaults 15.6%: benchmarks/results_s21_fmtkey.md), as before the table had the key
            e = decode_table.lookup(target, device, n, k, m, decode_table.FP8_W_FMT)
        if e is not None and e.path == NAME and split_k in (1, e.split):
            assert e.kw is not None and e.stages is not None and e.split is not None
            fa, fb = codes.FMT_CODES[fmts[0]], codes.FMT_CODES[fmts[1]]
            if K.smem_bytes(fa, fb, mt, e.kw, e.stages, e.rt or 1, *layouts) <= K.DECODE_SMEM_MAX:
                return DecodeConfig(mt, e.kw, e.stages, e.rt or 1), e.split
    kw, stages = DEFAULT[mt]
    rt = RT_DEFAULT[mt]
    ctas, groups = -(-n // (16 * rt)), max(1, k // 128)
    split = split_k
    if split_k == 1 and ctas < sms:
        split = max(1, min(-(-2 * sms // ctas), groups // 4, 16))
    while (
        ctas * split * kw < GRID_WARPS
        and kw < max(K.DECODE_KW)
        and groups // (split * kw * 2) >= 2
        and K.smem_bytes(K.E4M3, K.E4M3, mt, 2 * kw, stages, rt, *layouts) <= K.DECODE_SMEM_MAX
    ):
        kw *= 2
    return DecodeConfig(mt, kw, stages, rt), split


_KERNELS: dict = {}
_LAUNCHES: dict = {}  # (sizes, formats, layouts, out code, atomic, tune, arch) -> (kernel, LaunchConfig, map boxes)


def _layouts(dg: DeviceGemm) -> tuple[int, int]:
    """Defines SLA, SLB of a call: its scale layout codes (0 row-major, 5 turbo16x4 as uint32 words)."""
    p = dg.p
    return scale_layout_code(p.a_scale_layout, dg.a_scales), scale_layout_code(p.b_scale_layout, dg.b_scales)


def _wlb(dg: DeviceGemm) -> int:
    """Define WLB of a call (K.weight_layout_define)."""
    return K.weight_layout_define(dg.p.b_weight_layout)


def _plan(dg: DeviceGemm) -> tuple[DecodeConfig, int]:
    p, a = dg.p, dg.arch
    return plan(p.m, p.n, p.k, p.split_k, a.num_cus, a.target, a.name, _layouts(dg), (p.a_fmt, p.b_fmt))


def _kernel(d: Any, arch: Any, smem: int) -> Any:
    key = (d, arch)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = build(K.GEMM_MX_DECODE_SM90, d, arch)
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        _KERNELS[key] = kernel
    return kernel


def _launch_plan(dg: DeviceGemm, out_code: int, atomic: bool, tune: dict) -> tuple[Any, LaunchConfig, tuple]:
    p = dg.p
    c, _ = _plan(dg)
    c = DecodeConfig(*(tune.get(f, getattr(c, f)) for f in ("mt", "kw", "stages", "rt")))
    fa, fb = codes.FMT_CODES[p.a_fmt], codes.FMT_CODES[p.b_fmt]
    sla, slb = _layouts(dg)
    d = K.dense_variant(fa, fb, int(atomic), c.kw, c.mt, out_code, c.stages, c.rt, sla, slb, _wlb(dg))
    smem = K.smem_bytes(fa, fb, c.mt, c.kw, c.stages, c.rt, sla, slb)
    kernel = _kernel(d, dg.arch, smem)
    cfg = LaunchConfig((-(-p.n // (16 * c.rt)), 1, p.split_k), (c.threads, 1, 1), smem)
    return kernel, cfg, (K.row_bytes(fa), K.row_bytes(fb), c.mt, c.rt)


def _launch_entry(dg: DeviceGemm, out_code: int, atomic: bool, tune: dict) -> tuple[Any, LaunchConfig, tuple]:
    p = dg.p
    key = (
        p.m,
        p.n,
        p.k,
        p.split_k,
        p.a_fmt,
        p.b_fmt,
        _layouts(dg),
        _wlb(dg),
        out_code,
        atomic,
        tuple(sorted(tune.items())),
        dg.arch,
    )
    hit = _LAUNCHES.get(key)
    if hit is None:
        if len(_LAUNCHES) >= 4096:
            _LAUNCHES.clear()
        hit = _LAUNCHES[key] = _launch_plan(dg, out_code, atomic, tune)
    return hit


def _launch(dg: DeviceGemm, dst: Any, out_code: int, atomic: bool, tune: dict) -> None:
    p = dg.p
    kernel, cfg, (xrow, wrow, mt, rt) = _launch_entry(dg, out_code, atomic, tune)
    dev = dg.a_codes.data.device_id
    tmx = tensor_map_arg(dg.a_codes.data.ptr, p.m, p.k * xrow // 128, 8 * mt, dev, xrow)
    if p.b_weight_layout is None:
        tmw = tensor_map_arg(dg.b_codes.data.ptr, p.n, p.k * wrow // 128, 16 * rt, dev, wrow)
    else:  # the aiter16x16 buffer [np_, kk]: the 5-D map whose box is the row-major tile
        np_, kk = (int(v) for v in dg.b_codes.shape)
        tmw = tensor_map_w16_arg(dg.b_codes.data.ptr, np_, kk, wrow, rt, dev)
    u32 = np.uint32
    args = (tmx, tmw, dg.a_scales, dg.b_scales, dst, u32(p.m), u32(p.n), u32(p.k), u32(p.split_k))
    launch(p.op, kernel, cfg, args)


def run(dg: DeviceGemm, **tune: int) -> None:
    """Launch on the current stream (split-K reduce / zeroing included). ``tune`` overrides the defines ``mt``,
    ``kw``, ``stages``, ``rt`` (benchmarks/bench_decode.py, ``mxrt tune gemm``) and ``split``, the K split of the call;
    no host synchronisation."""
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    split = tune.pop("split", 0) or _plan(dg)[1]
    if split != p.split_k:  # the path's own split of a split_k=1 call (plan)
        dg = dataclasses.replace(dg, p=dataclasses.replace(p, split_k=split))
    run_split_k(dg, lambda dst, out_code, atomic: _launch(dg, dst, out_code, atomic, tune))


def prepare_run(dg: DeviceGemm) -> PreparedGemm | None:
    """:func:`run` (untuned) for ``dg``'s plan with the split chosen and the launches prepared once."""
    p = dg.p
    if p.is_empty or p.b_weight_layout is not None:  # weight-layout calls have no plans (mxrt.api.gemm)
        return None
    split = _plan(dg)[1]
    if split != p.split_k:
        dg = dataclasses.replace(dg, p=dataclasses.replace(p, split_k=split))
        p = dg.p
    dev = dg.a_codes.data.device_id

    def prepare_gemm(out_code: int, atomic: bool) -> tuple[Any, Any] | None:
        kernel, cfg, (xrow, wrow, mt, rt) = _launch_entry(dg, out_code, atomic, {})
        u32 = np.uint32
        map_x = TensorMapMemo(p.m, p.k * xrow // 128, 8 * mt, dev, xrow)
        map_w = TensorMapMemo(p.n, p.k * wrow // 128, 16 * rt, dev, wrow)
        tmx = tensor_map_arg(dg.a_codes.data.ptr, p.m, p.k * xrow // 128, 8 * mt, dev, xrow)
        sample = (tmx, tmx, dg.a_scales, dg.b_scales, dg.out, u32(0), u32(0), u32(0), u32(0))
        pl = prepare(p.op, kernel, cfg, sample)
        if pl is None:
            return None
        m, n, k, s = p.m, p.n, p.k, p.split_k

        def g(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, dst_ptr: int) -> None:
            pl(map_x(a_ptr), map_w(b_ptr), sa_ptr, sb_ptr, dst_ptr, m, n, k, s)

        return g, pl

    return prepare_split_k(dg, prepare_gemm)


def reload_table() -> None:
    """Forget the memoised tuned tables and every plan made from them (``mxrt tune gemm`` wrote a table)."""
    decode_table.clear()
    plan.cache_clear()
    _LAUNCHES.clear()
    invalidate_plans()  # gemm_mx's plans hold the old table's path choice and split


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run, prepare_run, K.WEIGHT_LAYOUTS))
