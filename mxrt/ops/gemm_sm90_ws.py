"""The Hopper (sm_90a) GEMM path ``sm90_ws``: the issue-10 engine ``gemm_mx_sm90_ws``
(kernels_src/gemm/gemm_mx_sm90_ws.hip), a persistent, warp-specialised exact MX GEMM.

Grid = min(SM count, tiles) CTAs of 384 threads walking 128 x 128 output tiles (GROUP_M 8 raster): warpgroup 2
produces (one thread issues the two TMA code tiles per stage, three scale warps turn E8M0 bytes into fp32 factors,
round robin over stages), warpgroups 0 and 1 consume (``setmaxnreg`` 224; one wgmma m64n128k32 per MX block, two
partials in flight, promoted exactly as ``sm90_wgmma`` does: fast in [64, 190], two-step outside). Measured as a
path on an H200 (benchmarks/RESULTS.md, session 8 call 3): MXFP8 383.5 / 385.6 / 349.1 / 359.9 TFLOP/s at 8192^3
and the MoE shapes (M = 4096; N, K = 4096, 7168 / 7168, 2048 / 5760, 2880), 1.27-1.40x ``sm90_wgmma``, 0.54-0.57x
compiled dequantize + cuBLAS.

Serves (exactly, bitwise-stable reruns): e4m3 / e5m2 operands, and e2m1 ones expanded to e4m3 bytes first (the
expansion of :mod:`mxrt.ops.gemm_sm90`, K padded to 16 for e2m1 x e2m1); bf16 / fp16 out, fp32 out for
e2m1 x e2m1 only; row-major scales or any preshuffled layout read in place (defines SLA / SLB: the scale warps copy
each stage's words through the layout's index map; aiter32x8 / turbo16x4 spread a stage's 4 bytes over 4 words).

Declines (:func:`supports`; the next path, ``sm90_wgmma`` then ``generic``, serves these):

- ``split_k > 1`` (no split-K epilogue yet);
- float32 output with an fp8 operand (house rule of the sm90 paths: fp8 wgmma k32 partials carry ~2-5e-5 relative
  error; the engine measured 4.6e-5);
- an fp8 operand with ``k % 16 != 0`` or a code base not 16-byte aligned (TMA), scale bases not 4-byte aligned
  (the scale warps copy 32-bit words);
- sizes of 2^31 or more, ``ceil(k/32) * max(m, n) >= 2^31``, a layout storage of 2^31 bytes or more (32-bit
  offsets), an e2m1 operand of 2^35 elements or more (the expansion kernel);
- in automatic selection only, ``m <= 64`` (:func:`auto_decline`). ``MXRT_GEMM_PATH=sm90_ws`` forces it on any
  problem it runs exactly.

CUDA graphs: the two CUtensorMaps travel by value (``__grid_constant__``), so a call captures on fresh buffers with
no host-to-device copy; with e2m1 operands the expanded codes come from CuPy's pool during the capture (as for
``sm90_wgmma``). ``benchmarks/gemm_sm90_ws_dev.py`` builds the development variants (``diag``, ``split``,
``stages``, ``mode``, ``ctas``) through :func:`run`'s keyword arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import dtype_name
from ..codes import GEMM_OUT_DTYPE_CODES
from ..config import gemm_path_override
from ..errors import UnsupportedArchError
from ..layouts import scale_layout_shape
from ..runtime.compiler import build_with_smem
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch, prepare
from . import gemm_sm90_kernels
from .gemm_paths import DeviceGemm, GemmPath, PreparedGemm, register_gemm_path
from .gemm_sm90 import (
    TensorMapMemo,
    _padded_k,
    fp8_operands,
    scale_layout_code,
    smem_bytes,
    tensor_map_arg,
)

NAME = "sm90_ws"
TARGET = "sm_90a"
#: between sm90_wgmma (20) and sm90_decode (30): decode keeps m <= 64 inside its envelope
PRIORITY = 25

BM = BN = 128
THREADS = 384
_LIMIT = 2**31
_SCATTERED = (1, 2, 5)  # aiter32x8, turbo16x4 (bytes, uint32 words): 4 staged words per row and stage

#: automatic selection: the smallest m served (below, sm90_wgmma's 64-row tile does not waste half the tensor work)
AUTO_MIN_M = 65


def auto_decline(m: int, n: int, k: int, num_sms: int) -> str | None:
    """Why automatic selection should leave ``m x n x k`` to ``sm90_wgmma`` (None: ``sm90_ws`` is expected to win).

    ``m < AUTO_MIN_M`` (65): the 128-row tile would be at least half empty, where ``sm90_wgmma`` runs a 64-row tile
    two CTAs per SM (and ``sm90_decode`` owns m <= 64 inside its envelope anyway). No grid-size rule: on an H200
    (session 8, call 3; both paths at split_k = 1) ``sm90_ws`` won below one wave too, 1024x2048x7168 (128 tiles)
    348.8 vs 137.0 TFLOP/s, 256x4096x1024 (64 tiles) 120.9 vs 67.7, 512x1024x2048 (32 tiles) 72.3 vs 34.2, as at
    13-31 tiles per SM (1.27-1.40x). ``k`` and ``num_sms`` stay in the signature for the rule later rows may call
    for (split-K, which ``sm90_ws`` lacks, is what still beats it on small grids: ``sm90_wgmma`` split_k = 2 ran
    256x4096x1024 at 130.4).
    """
    del n, k, num_sms
    if m < AUTO_MIN_M:
        return f"m = {m} < {AUTO_MIN_M}: sm90_wgmma's 64-row tile (auto_decline; MXRT_GEMM_PATH forces sm90_ws)"
    return None


def staging_bytes(stages: int, words: int = 2) -> int:
    """The scale warps' cp.async staging rings: 3 warps x WS_AHEAD stages x 256 rows x ``words`` 32-bit words
    (WS_AHEAD = 8 / 4 / 1 for a 4 / 5 / 6-stage tile ring at 2 words, halved at 4: the kernel's WS_AHEAD)."""
    ahead = (8 if stages <= 4 else 4 if stages == 5 else 1) * 2 // words
    if ahead < 1:
        raise UnsupportedArchError(f"gemm_mx_sm90_ws: a scattered scale layout needs stages <= 5, got {stages}")
    return 3 * ahead * 256 * words * 4


def _cannot(dg: DeviceGemm, scale_words: bool = True) -> str | None:
    """What the kernel cannot compute at all (run() refuses these); shared with the bf16 route
    (:mod:`mxrt.ops.gemm_sm90_bf16`: same TMA operands and limits; ``scale_words=False``: it needs no 4-byte
    aligned scale bases)."""
    p = dg.p
    if p.split_k != 1:
        return f"split_k = {p.split_k} (no split-K epilogue)"
    if p.a_fmt not in gemm_sm90_kernels.SM90_FMT_CODES or p.b_fmt not in gemm_sm90_kernels.SM90_FMT_CODES:
        return f"formats ({p.a_fmt}, {p.b_fmt})"
    if dtype_name(p.out_dtype) not in GEMM_OUT_DTYPE_CODES:
        return f"out dtype {dtype_name(p.out_dtype)}"
    kp = _padded_k(dg)
    if kp % 16:
        return f"k = {p.k}: an fp8 operand needs k % 16 == 0 (TMA row strides are 16-byte multiples)"
    for name, fmt, codes in (("a", p.a_fmt, dg.a_codes), ("b", p.b_fmt, dg.b_codes)):
        if fmt != "e2m1" and codes.data.ptr % 16:
            return f"{name} codes start at {codes.data.ptr:#x}, not 16-byte aligned (TMA)"
    for name, scales in (("a", dg.a_scales), ("b", dg.b_scales)) if scale_words else ():
        if scales.data.ptr % 4:
            return f"{name} scales start at {scales.data.ptr:#x}, not 4-byte aligned (32-bit word copies)"
    if max(p.m, p.n, kp) >= _LIMIT or max(p.m, p.n) * max(p.k_blocks, 1) >= _LIMIT:
        return "sizes of 2^31 or more"
    for rows, layout in ((p.m, p.a_scale_layout), (p.n, p.b_scale_layout)):
        if layout is not None and np.prod(scale_layout_shape(layout, rows, p.k_blocks), dtype=np.int64) >= _LIMIT:
            return f"a {layout} scale storage of 2^31 bytes or more (32-bit scale offsets)"
    if "e2m1" in (p.a_fmt, p.b_fmt) and max(p.m, p.n) * kp >= 16 * 2**31:
        return "an e2m1 operand of 2^35 elements or more (the expansion kernel's 32-bit chunk index)"
    return None


def supports(dg: DeviceGemm) -> str | None:
    """Why ``sm90_ws`` does not serve ``dg`` (None: it does); see the module docstring."""
    why = _cannot(dg)
    if why is not None:
        return why
    p = dg.p
    if dtype_name(p.out_dtype) == "float32" and not p.a_fmt == p.b_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 wgmma partials miss the 1e-5 relative bar)"
    if gemm_path_override() == NAME:
        return None  # forced: every problem the kernel runs exactly
    return auto_decline(p.m, p.n, p.k, dg.arch.num_cus)


def _kernel(d: Any, arch: Any, stages: int, words: int) -> tuple[Any, int]:
    smem = smem_bytes(BM, BN, stages) + staging_bytes(stages, words)
    return build_with_smem(gemm_sm90_kernels.GEMM_MX_SM90_WS, d, arch, smem), smem


_LAUNCHES: dict = {}  # (sizes, formats, out code, layouts, tune, arch) -> (kernel, LaunchConfig)


def _launch_entry(dg: DeviceGemm, kp: int, tune: dict) -> tuple[Any, LaunchConfig]:
    p = dg.p
    sl = (scale_layout_code(p.a_scale_layout, dg.a_scales), scale_layout_code(p.b_scale_layout, dg.b_scales))
    out_code = GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)]
    key = (p.m, p.n, kp, p.a_fmt, p.b_fmt, out_code, sl, tuple(sorted(tune.items())), dg.arch)
    hit = _LAUNCHES.get(key)
    if hit is None:
        if len(_LAUNCHES) >= 4096:
            _LAUNCHES.clear()
        hit = _LAUNCHES[key] = _launch_plan(dg, out_code, sl, **tune)
    return hit


def _launch_plan(
    dg: DeviceGemm,
    out_code: int,
    sl: tuple[int, int],
    diag: int = 0,
    stages: int = gemm_sm90_kernels.WS_STAGES,
    split: int = 0,
    ctas: int | None = None,
    mode: int = 0,
) -> tuple[Any, LaunchConfig]:
    p = dg.p
    d = defines(
        A_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.a_fmt],
        ATOMIC=0,
        B_FMT=gemm_sm90_kernels.SM90_FMT_CODES[p.b_fmt],
        BM=BM,
        BN=BN,
        DBUF=0,
        DIAG=diag,
        OUT_DTYPE=out_code,
        SLA=sl[0],
        SLB=sl[1],
        SPLIT=0 if diag else split,
        STAGES=stages,
        WS_MODE=mode,
    )
    words = 4 if sl[0] in _SCATTERED or sl[1] in _SCATTERED else 2
    kernel, smem = _kernel(d, dg.arch, stages, words)
    tiles = -(-p.m // BM) * -(-p.n // BN)
    grid = max(1, min(tiles, ctas or dg.arch.num_cus))
    return kernel, LaunchConfig((grid, 1, 1), (THREADS, 1, 1), smem)


def run(dg: DeviceGemm, **tune: int) -> None:
    """Launch on the current stream (e2m1 operands expanded first); no host synchronisation. ``tune`` (development,
    benchmarks/gemm_sm90_ws_dev.py): ``diag=1`` the inexact k128 timing diagnostic, ``split`` 0 rows / 1 columns,
    ``stages``, ``ctas`` (grid size, default the SM count), ``mode`` (the kernel's WS_MODE, with ``diag=1``)."""
    why = _cannot(dg)
    if why is not None:
        raise UnsupportedArchError(f"{dg.p.op}: GEMM path {NAME} cannot run this problem: {why}")
    p = dg.p
    if p.is_empty:
        dg.out.fill(0)
        return
    kp = _padded_k(dg)
    a, b = fp8_operands(dg, kp)
    kernel, cfg = _launch_entry(dg, kp, tune)
    dev = a.data.device_id
    tma = tensor_map_arg(a.data.ptr, p.m, kp, BM, dev)
    tmb = tensor_map_arg(b.data.ptr, p.n, kp, BN, dev)
    i32 = np.int32
    args = (tma, tmb, dg.a_scales, dg.b_scales, dg.out, i32(p.m), i32(p.n), i32(kp))
    launch(p.op, kernel, cfg, args)
    # the expanded e2m1 buffers may be dropped here: CuPy's pool reuses a block only for work queued after the free
    # on the same stream (outside a graph capture; see the module docstring)


def prepare_run(dg: DeviceGemm) -> PreparedGemm | None:
    """:func:`run` for ``dg``'s plan with the launch prepared (fp8 operands; e2m1 ones are expanded per call and
    stay on :func:`run`)."""
    p = dg.p
    if p.is_empty or "e2m1" in (p.a_fmt, p.b_fmt) or _cannot(dg) is not None:
        return None
    kp, dev = p.k, dg.a_codes.data.device_id
    kernel, cfg = _launch_entry(dg, kp, {})
    i32 = np.int32
    tma = tensor_map_arg(dg.a_codes.data.ptr, p.m, kp, BM, dev)
    pl = prepare(p.op, kernel, cfg, (tma, tma, dg.a_scales, dg.b_scales, dg.out, i32(0), i32(0), i32(0)))
    if pl is None:
        return None
    map_a, map_b = TensorMapMemo(p.m, kp, BM, dev), TensorMapMemo(p.n, kp, BN, dev)
    m, n = p.m, p.n

    def g(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, out_ptr: int) -> None:
        pl(map_a(a_ptr), map_b(b_ptr), sa_ptr, sb_ptr, out_ptr, m, n, kp)

    return PreparedGemm(g, (pl,))


register_gemm_path(GemmPath(NAME, TARGET, PRIORITY, supports, run, prepare_run))
