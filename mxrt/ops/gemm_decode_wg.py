"""The wgmma decode GEMM path ``sm90_decode_wg`` on sm_90a: kernels_src/gemm/gemm_mx_decode_sm90_wg.hip.

At m = 17..64 tokens the ``mma.sync`` decode kernel (:mod:`mxrt.ops.gemm_decode`) runs out of issue slots: fp8
``mma.sync`` is emulated on sm_90a (fp8 -> f16 unpacks and two HMMAs per m16n8k32). This path puts the weights on
the M side of native fp8 ``wgmma`` (swap-AB: a CTA owns 64 weight rows, every token is a column of one
``m64nNTk32`` per MX block, NT = 16 / 32 / 64), so a block's product costs one tensor-core instruction per warpgroup
and the exact promotion (``acc = fma(P * 2^(sx-127), 2^(sw-127), acc)``, two FP32 instructions per accumulator
element) is the only per-element work. PW producer warps stream stages of 4 MX blocks (TMA code tiles with the
128-byte swizzle, cp.async scale words) and prepare each stage (token factors in fragment layout, the stage's fast
flag) before its mbarrier completes; NC consumer warpgroups take the stages in
turn and are summed in warpgroup order (deterministic); ``split_k`` splits K across CTAs on top, with the shared
deterministic / atomic modes (:mod:`mxrt.ops.gemm_splitk`). A ``split_k=1`` call whose one-CTA-per-slab grid would
leave SMs idle runs on a stream-K grid instead (``SK`` builds, :func:`sk_ctas`): one CTA per SM, equal runs of
(slab, group) units, slabs shared by two CTAs finished by the one launched last of them (deterministic, counters that
reset themselves; :func:`_sk_buffers`).

e2m1 weights (MXFP4) take the same kernel: the producer warp of a stage copies its packed tile and scale words by
cp.async into its own staging slots, ``PF - 1`` of its stages ahead (no memory latency in its period), and widens
the tile into the one the wgmmas read (TMA's 128-byte swizzle) as e4m3 bytes holding 2^-6 times
the e2m1 values (code ``s.e.m`` -> ``s.000.e.m00``: shifts and masks, ~9 instructions per 8 codes); the promotion
multiplies 2^6 back into the weight factor (exact), so the results equal the fp8 route's. The weight bytes read halve;
the widening makes the producer warps the limit (session 13), so MXFP4 runs here above :data:`E2M1_MIN_M` tokens.

Envelope: ``m <= 64``; e4m3 / e5m2 tokens, e4m3 / e5m2 / e2m1 weights (e2m1 tokens stay on ``sm90_decode``);
row-major scales; ``k % 128 == 0``;
16-byte aligned codes, 4-byte aligned scales; bf16 / fp16 out (fp32 out declines, as on every fp8 tensor-core path:
the k32 partials carry ~2-5e-5 relative error); m, n, k below 2^31 (offsets past 2^31 bytes are 64-bit).

Selection: priority 29, between ``sm90_decode`` (30) and ``sm90_cublas`` (28). It serves the cells that
``sm90_decode`` hands to it: a tuned-table entry naming ``sm90_decode_wg``, or, for a cell without an entry, the
envelope default (m > :data:`DEFAULT_MIN_M`, measured; e2m1 weights above :data:`E2M1_MIN_M` tokens, their cells
read the table's e2m1 entries only); ``MXRT_GEMM_PATH=sm90_decode_wg`` forces it.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..runtime.compiler import build
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch, prepare
from . import gemm_decode_kernels as K
from .gemm_paths import DeviceGemm, GemmPath, PreparedGemm, register_gemm_path
from .gemm_sm90 import TensorMapMemo, tensor_map_arg, tensor_map_w16_arg
from .gemm_splitk import prepare_split_k, run_split_k

NAME = "sm90_decode_wg"
TARGET = "sm_90a"
PRIORITY = 29  # below sm90_decode (30), which hands cells over; above sm90_cublas (28)
_LIMIT = 2**31
_FP8 = ("e4m3", "e5m2")
#: calls of more tokens than this run here when the tuned table has no entry for their cell (sm90_decode's
#: envelope default; at M = 16 / 32 / 64 on 7168 x 4096 this path took 12.5 / 14.0 / 19.7 us against sm90_decode's
#: 15.7 / 24.8 / 38.8, session 12 call 14); None: only table entries and MXRT_GEMM_PATH route here
DEFAULT_MIN_M: int | None = 8
#: e2m1 weights (MXFP4) run here above this token count when the tuned table has no e2m1 entry for their cell (the
#: envelope default of MXFP4 weights; fp8 entries never route them): at M 32 / 64 this path beat sm90_decode
#: on all 15 of the seed's cells (session 13 calls 3, 6, 8); at M 16, with the shift widening and 8 producer warps,
#: on 11 of 15 on an H200 (median 1.35x cuBLAS bf16 against sm90_decode's 1.28x, call 11); at M 8 sm90_decode won 14
#: of 15 (H100, call 8). None: only e2m1 table entries and MXRT_GEMM_PATH route e2m1 weights here
E2M1_MIN_M: int | None = 8


def supports(dg: DeviceGemm) -> str | None:
    p = dg.p
    if p.m > K.DECODE_MAX_M:
        return f"m = {p.m} > {K.DECODE_MAX_M} (the decode envelope)"
    if p.a_fmt not in _FP8 or p.b_fmt not in (*_FP8, "e2m1"):
        return f"formats ({p.a_fmt}, {p.b_fmt}): fp8 tokens, fp8 or e2m1 weights (e2m1 tokens run on sm90_decode)"
    if p.split_k > MAX_GRID_YZ:
        return f"split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)"
    if p.a_scale_layout is not None or p.b_scale_layout is not None:
        return "preshuffled scales (this kernel reads row-major scales; sm90_decode reads the layouts in place)"
    out = dtype_name(p.out_dtype)
    if out not in codes.GEMM_OUT_DTYPE_CODES:
        return f"out dtype {out}"
    if out == "float32":
        return "float32 output with an fp8 operand (the fp8 tensor cores' k32 partials miss the 1e-5 relative bar)"
    if p.k % 128:
        return f"k = {p.k}, expected a multiple of 128 (the kernel streams groups of 4 MX blocks)"
    for name, c, align in (("a", dg.a_codes, 16), ("b", dg.b_codes, 16), ("a", dg.a_scales, 4), ("b", dg.b_scales, 4)):
        if c.data.ptr % align:
            what = "codes" if align == 16 else "scales"
            return f"{name} {what} start at {c.data.ptr:#x}, not {align}-byte aligned (TMA / cp.async)"
    if max(p.m, p.n, p.k) >= _LIMIT:
        return "m, n or k of 2^31 or more"
    return None


@dataclass(frozen=True)
class WgConfig:
    """Tuning defines of one gemm_mx_decode_sm90_wg build (see the kernel header)."""

    nt: int
    nc: int
    stages: int
    ns: int = 1
    pw: int = 1
    #: e2m1 weights: staging slots per producer warp (0: the build's default, ``wg_pf``)
    pf: int = 0

    @property
    def threads(self) -> int:
        return 128 * self.nc + 32 * self.pw


#: the envelope default build: two consumer warpgroups taking the stages in turn, 8 stages, 4 producer warps (e2m1
#: weights with a token tile of at most 32: 8, ``gemm_decode_kernels.wg_default_pw``)
DEFAULT_NC, DEFAULT_NS, DEFAULT_STAGES, DEFAULT_PW = 2, 1, 8, K.WG_DEFAULT_PW


#: stream-K (``SK`` builds): a ``split_k=1`` call runs on one CTA per SM sharing the units (slab of 64 weight rows x
#: group of 4 MX blocks) evenly where the older grid (one CTA per slab) leaves SMs idle: more than a quarter of them
#: in its only wave, or a tail wave under 90% full after full ones, and each CTA keeps >= SK_MIN_UNITS units. Measured
#: (H100, session 14 call 5, old / new, MXFP8 and MXFP4 at M 16 / 64): 10240 x 8192 (1.21 waves) 1.07-1.43x, 36864 x
#: 7168 (4.4 waves) 1.01-1.22x, 4608 x 7168 (72 slabs) 1.01-1.15x. Elsewhere it loses: grids the older one already
#: fills (7168 / 8192 rows: 0.86-1.05x; 57344 x 8192: 0.98-1.14x), short K (<= 3584: 0.53-0.90x) and the narrow cells
#: that the older grid splits (M 64: 0.45-0.69x), where the fix-ups of slabs shared by many CTAs cost more than the
#: idle SMs. None: never.
SK_MIN_UNITS: int | None = 24
SK_MAX_FILL, SK_MAX_TAIL_FILL = 0.75, 0.9


def sk_ctas(n: int, k: int, sms: int) -> int:
    """The stream-K grid of a ``split_k=1`` call, or 0 for the older grid (see :data:`SK_MIN_UNITS`)."""
    if SK_MIN_UNITS is None:
        return 0
    slabs, groups = -(-n // K.WG_ROWS), max(1, k // 128)
    units = slabs * groups
    fill = slabs / (-(-slabs // sms) * sms)  # the older grid's busy share of its waves' SM slots
    idle = fill < SK_MAX_FILL or (slabs > sms and fill < SK_MAX_TAIL_FILL)
    if units >= 2**31 or 2 * slabs < sms or not idle or units < SK_MIN_UNITS * sms:
        return 0
    return sms


@functools.lru_cache(maxsize=4096)
def plan(m: int, n: int, k: int, split_k: int, sms: int = 132) -> tuple[WgConfig, int]:
    """The build and the split of one problem: the smallest token tile that holds ``m``; with ``split_k == 1``
    (the default) K is split across CTAs only when the 64-row slabs cover less than half the SMs (one slab per SM
    streams its K range; at 7168 rows a split of 2 was always slower, session 12): as many ways as keep every CTA in
    one wave (one CTA per SM: slabs x split <= SMs; on 20 slabs 8 ways took 1.5x the time of 6, and the earlier
    rounding up chose 7, also two waves: session 13 call 1), at most 8, each keeping >= 4 groups of 4 MX blocks."""
    nt = next(t for t in K.WG_NT if t >= m)
    c = WgConfig(nt, DEFAULT_NC, DEFAULT_STAGES, DEFAULT_NS, DEFAULT_PW)
    split = split_k
    if split_k == 1:
        slabs, groups = -(-n // K.WG_ROWS), max(1, k // 128)
        if 2 * slabs < sms:
            split = max(1, min(sms // slabs, groups // 4, 8))
    return c, split


_KERNELS: dict = {}
_LAUNCHES: dict = {}


def _plan(dg: DeviceGemm) -> tuple[WgConfig, int]:
    p = dg.p
    return plan(p.m, p.n, p.k, p.split_k, dg.arch.num_cus)


def _kernel(d: Any, arch: Any, smem: int) -> Any:
    key = (d, arch)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = build(K.GEMM_MX_DECODE_SM90_WG, d, arch)
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        _KERNELS[key] = kernel
    return kernel


def _launch_entry(dg: DeviceGemm, out_code: int, atomic: bool, tune: dict, ctas: int) -> tuple[Any, LaunchConfig, int]:
    p = dg.p
    wlb = K.weight_layout_define(p.b_weight_layout)
    key = (
        p.m,
        p.n,
        p.k,
        p.split_k,
        p.a_fmt,
        p.b_fmt,
        wlb,
        out_code,
        atomic,
        tuple(sorted(tune.items())),
        ctas,
        dg.arch,
    )
    hit = _LAUNCHES.get(key)
    if hit is None:
        c, _ = _plan(dg)
        c = WgConfig(*(tune.get(f, getattr(c, f)) for f in ("nt", "nc", "stages", "ns", "pw", "pf")))
        w4 = p.b_fmt == "e2m1"
        pw4 = K.wg_default_pw(c.nt, w4)
        if w4 and "pw" not in tune and K.wg_valid(c.nt, c.nc, c.stages, c.ns, pw4, w4):
            c = dataclasses.replace(c, pw=pw4)
        if w4 and not c.pf:
            c = dataclasses.replace(c, pf=K.wg_pf(c.nt, c.nc, c.stages, c.ns, c.pw))
        if not K.wg_valid(c.nt, c.nc, c.stages, c.ns, c.pw, w4, c.pf) or c.nt < p.m:
            raise ValueError(f"{NAME}: no build {c} for m={p.m}" + (" with e2m1 weights" if w4 else ""))
        fa, fb = codes.FMT_CODES[p.a_fmt], codes.FMT_CODES[p.b_fmt]
        d = K.wg_variant(fa, fb, int(atomic), c.nt, c.nc, out_code, c.stages, c.ns, c.pw, c.pf, int(ctas > 0), wlb)
        smem = K.wg_smem_bytes(c.nt, c.nc, c.stages, c.ns, w4, c.pw, c.pf)
        grid = (ctas, 1, 1) if ctas else (-(-p.n // K.WG_ROWS), 1, p.split_k)
        cfg = LaunchConfig(grid, (c.threads, 1, 1), smem)
        if len(_LAUNCHES) >= 4096:
            _LAUNCHES.clear()
        # the stream-K part of one CTA: its warpgroups' accumulators (128 threads x NT / NS / 2 each)
        floats = c.nc * 128 * (c.nt // c.ns // 2)
        hit = _LAUNCHES[key] = (_kernel(d, dg.arch, smem), cfg, (c.nt, K.WG_ROWS, floats))
        if ctas:  # the older grid's build too, for _launch's fallback under a capture (no module loads inside one)
            _launch_entry(dg, out_code, atomic, tune, 0)
    return hit


_SK_BUFFERS: dict = {}
_SK_STREAMS_MAX = 16


def _sk_buffers(dev: int, floats: int, n: int) -> tuple[int, int] | None:
    """Device addresses of the stream-K parts (``floats``: C x NC x 128 threads x NT / NS / 2 accumulators, never read
    before written) and slab counters (one u32 per 64-row slab, zeroed when allocated; every launch leaves them 0)
    for the current stream, or None where they would have to be allocated while the stream is being captured (the
    zeroing would only run when the graph does): the caller then launches the older grid. Kept per device and stream
    (launches on one stream are ordered, so they may share them; CuPy's pool reuses a stream's freed blocks on that
    stream only, so evicting the oldest of more than 16 streams is safe)."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    key = (dev, stream.ptr)
    parts, counts = _SK_BUFFERS.get(key, (None, None))
    slabs = -(-n // K.WG_ROWS)
    if parts is None or parts.size < floats or counts.size < slabs:
        if stream.is_capturing():
            return None
        parts = cupy.empty(max(floats, 132 * 2 * 64 * 64), dtype=cupy.float32)
        counts = cupy.zeros(max(slabs, 1024), dtype=cupy.uint32)
        _SK_BUFFERS.pop(key, None)
        if len(_SK_BUFFERS) >= _SK_STREAMS_MAX:
            _SK_BUFFERS.pop(next(iter(_SK_BUFFERS)))
        _SK_BUFFERS[key] = (parts, counts)
    return parts.data.ptr, counts.data.ptr


def _sk(dg: DeviceGemm) -> int:
    """The stream-K grid of a call (0: the older grid): only for ``split_k=1`` (:func:`run`'s ``ctas`` overrides)."""
    return sk_ctas(dg.p.n, dg.p.k, dg.arch.num_cus) if dg.p.split_k == 1 else 0


def _launch(dg: DeviceGemm, dst: Any, out_code: int, atomic: bool, tune: dict, ctas: int) -> None:
    p = dg.p
    kernel, cfg, (nt, rows, floats) = _launch_entry(dg, out_code, atomic, tune, ctas)
    dev = dg.a_codes.data.device_id
    tmx = tensor_map_arg(dg.a_codes.data.ptr, p.m, p.k, nt, dev)
    # e2m1 weights are copied by cp.async from b_codes (wq); their tensor-map slot takes the tokens' map, unread
    if p.b_fmt == "e2m1":
        tmw = tmx
    elif p.b_weight_layout is None:
        tmw = tensor_map_arg(dg.b_codes.data.ptr, p.n, p.k, rows, dev)
    else:  # the aiter16x16 buffer: one 16-byte chunk column of the CTA's 4 row tiles per box (8 boxes a stage)
        np_, kk = (int(v) for v in dg.b_codes.shape)
        tmw = tensor_map_w16_arg(dg.b_codes.data.ptr, np_, kk, 16, rows // 16, dev)
    skw = skc = 0
    if ctas:
        bufs = _sk_buffers(dev, ctas * floats, p.n)
        if bufs is None:  # first use on a stream under capture: the older grid (the same split_k = 1 call)
            _launch(dg, dst, out_code, atomic, tune, 0)
            return
        skw, skc = bufs
    u32, u64 = np.uint32, np.uint64
    args = (tmx, tmw, dg.a_scales, dg.b_scales, dg.b_codes, dst, u32(p.m), u32(p.n), u32(p.k), u32(p.split_k),
            u64(skw), u64(skc))  # fmt: skip
    launch(p.op, kernel, cfg, args)


def run(dg: DeviceGemm, **tune: int) -> None:
    """Launch on the current stream (split-K reduce / zeroing included). ``tune`` overrides the defines ``nt``,
    ``nc``, ``stages``, ``ns``, ``pw``, ``pf`` (benchmarks/bench_decode.py), ``split``, the K split of the call
    (the older grid), and ``ctas``, the stream-K grid (0: the older grid); no host synchronisation."""
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    ctas = tune.pop("ctas", None)
    split = tune.pop("split", 0)
    if ctas is None and not split:
        ctas = _sk(dg)
    ctas = ctas or 0
    if not ctas:
        split = split or _plan(dg)[1]
        if split != p.split_k:  # the path's own split of a split_k=1 call (plan)
            dg = dataclasses.replace(dg, p=dataclasses.replace(p, split_k=split))
    run_split_k(dg, lambda dst, out_code, atomic: _launch(dg, dst, out_code, atomic, tune, ctas))


def prepare_run(dg: DeviceGemm) -> PreparedGemm | None:
    """:func:`run` (untuned) for ``dg``'s plan with the split chosen and the launches prepared once."""
    p = dg.p
    if p.is_empty or p.b_weight_layout is not None:  # weight-layout calls have no plans (mxrt.api.gemm)
        return None
    ctas = _sk(dg)
    split = 1 if ctas else _plan(dg)[1]
    if split != p.split_k:
        dg = dataclasses.replace(dg, p=dataclasses.replace(p, split_k=split))
        p = dg.p
    dev = dg.a_codes.data.device_id

    def prepare_gemm(out_code: int, atomic: bool) -> tuple[Any, Any] | None:
        kernel, cfg, (nt, rows, floats) = _launch_entry(dg, out_code, atomic, {}, ctas)
        u32, u64 = np.uint32, np.uint64
        map_x = TensorMapMemo(p.m, p.k, nt, dev)
        map_w = None if p.b_fmt == "e2m1" else TensorMapMemo(p.n, p.k, rows, dev)
        tmx = tensor_map_arg(dg.a_codes.data.ptr, p.m, p.k, nt, dev)
        sample = (
            tmx,
            tmx,
            dg.a_scales,
            dg.b_scales,
            dg.b_codes,
            dg.out,
            u32(0),
            u32(0),
            u32(0),
            u32(0),
            u64(0),
            u64(0),
        )
        pl = prepare(p.op, kernel, cfg, sample)
        # stream-K: also the older grid's launch, for a first call on a stream under capture (_sk_buffers)
        pl0 = prepare(p.op, *_launch_entry(dg, out_code, atomic, {}, 0)[:2], sample) if ctas else None
        if pl is None or (ctas and pl0 is None):
            return None
        m, n, k, s = p.m, p.n, p.k, p.split_k

        def g(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, dst_ptr: int) -> None:
            tx = map_x(a_ptr)
            tw = tx if map_w is None else map_w(b_ptr)
            bufs = _sk_buffers(dev, ctas * floats, n) if ctas else (0, 0)
            if bufs is None:
                pl0(tx, tw, sa_ptr, sb_ptr, b_ptr, dst_ptr, m, n, k, s, 0, 0)
            else:
                pl(tx, tw, sa_ptr, sb_ptr, b_ptr, dst_ptr, m, n, k, s, *bufs)

        return g, pl

    return prepare_split_k(dg, prepare_gemm)


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run, prepare_run, K.WEIGHT_LAYOUTS))
