"""The AMD small-M (decode) GEMM paths ``gfx950_decode`` (kernels_src/gemm/gemm_mx_decode_gfx950.hip,
``v_mfma_scale_f32_16x16x128_f8f6f4``) and ``gfx942_decode`` (gemm_mx_decode_gfx942.hip, fp8 MFMA 16x16x32 with
per-32 promotion, OCP -> FNUZ as the dense gfx942 path). Imports without cupy.

Decode multiplies a few tokens by a large weight: the time is the weight read. A CTA owns 64 weight rows and every
token (m <= 64, token tiles of 16: define MT), streams its K range once from global memory straight into the MFMA
operand registers, its 4 waves split the K steps and are summed in wave order (body: gemm_decode_amd.h). The dense
``gfx950_mfma_scale`` / ``gfx942_mfma_fp8`` kernels tile 128 rows of tokens (at m <= 64 most of their MFMA work is
padding) and give only ceil(n / 128) CTAs.

Envelope (everything inside runs here; the dense AMD paths serve the rest): ``m <= 64``; e4m3 / e5m2 / e2m1
operands (every pair of ``GEMM_FORMAT_PAIRS``); scales row-major, ``aiter32x8`` or ``turbo16x4`` (uint8 or the
uint32 form); 16-byte aligned code rows (base address and row pitch: ``k % 16 == 0`` for fp8, ``k % 32`` for
e2m1), which is what lets the kernel drop the byte-load path; weight codes row-major or in aiter's 16x16 layout
(``b_weight_layout="aiter16x16"``, :func:`mxrt.preshuffle_weight`); bf16 / fp16 / fp32 out; code buffers below
2^31 bytes (for shuffled weights their padded ``[ceil(n/16)*16, kk]`` buffer). Split-K: ``split_k > 1`` is
honoured; with ``split_k == 1`` (the default) the path splits K itself when ``ceil(n / 64)`` CTAs would leave CUs
idle (:func:`plan`). Deterministic splits write fp32 slices ``[split, m, n]`` summed in order by the shared reduce
kernel (:mod:`mxrt.ops.gemm_splitk`); ``deterministic=False`` adds with fp32 atomics (into ``out`` for fp32, else
into a zeroed fp32 workspace, converted by the reduce).

Weight codes in the aiter 16x16 layout (define WLB = 1) are read in place: the layout keeps every 16-byte chunk of a
row contiguous (and so its 8- and 4-byte pieces), so the kernels load the same chunks at other offsets
(``dec_off`` in gemm_decode_amd.h); tokens, scales and everything else are unchanged. Row-major builds are the same
code as before (no WLB define). The MoE twins read row-major expert weights only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..layouts.weights import weight_layout_shape
from ..problems.gemm import GemmProblem
from ..runtime.kernel_spec import Defines, KernelSpec
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig, launch
from . import gemm_decode_amd_kernels as K
from .gemm_amd import _FMTS, _LIMIT, OUT_CODES, _ptr, _row_bytes, _scale_code
from .gemm_paths import DeviceGemm, GemmPath, register_gemm_path
from .gemm_splitk import F32, launch_reduce, workspace

NAMES = {"gfx950": "gfx950_decode", "gfx942": "gfx942_decode"}
DENSE = {"gfx950": "gfx950_mfma_scale", "gfx942": "gfx942_mfma_fp8"}
PRIORITY = 30  # above the dense AMD paths (20): inside its envelope the decode kernel reads the weight once
SPECS = {"gfx950": K.GEMM_MX_DECODE_GFX950, "gfx942": K.GEMM_MX_DECODE_GFX942}
MODE_STORE, MODE_ATOMIC = codes.GEMM_MODE_STORE, codes.GEMM_MODE_ATOMIC
#: the path's own K split (split_k=1 calls): at most this many ways, each at least MIN_SPLIT_BLOCKS MX blocks
#: (4 steps of 128 K: one per wave), aiming at CTAS_PER_CU CTAs per CU
MAX_SPLIT, MIN_SPLIT_BLOCKS, CTAS_PER_CU = 16, 16, 2


def unsupported(target: str, p: GemmProblem, a_codes: Any, b_codes: Any, a_scales: Any, b_scales: Any) -> str | None:
    """Why the ``target`` decode kernel cannot run this problem (a short reason naming the path that serves it),
    or None."""
    dense = DENSE.get(target, "generic")
    if target not in SPECS:
        return f"no AMD decode kernel for target {target!r}"
    if p.m > K.DECODE_AMD_MAX_M:
        return f"m = {p.m} > {K.DECODE_AMD_MAX_M} (the decode envelope; {dense} serves it)"
    if p.a_fmt not in _FMTS or p.b_fmt not in _FMTS:
        return f"formats ({p.a_fmt}, {p.b_fmt}) are not e4m3 / e5m2 / e2m1"
    for name, layout, s in (("a", p.a_scale_layout, a_scales), ("b", p.b_scale_layout, b_scales)):
        if _scale_code(layout, s) is None:
            return f"{name}_scale_layout={layout!r} is not read by this kernel (row-major, 'aiter32x8' or 'turbo16x4')"
    for name, c, fmt in (("a", a_codes, p.a_fmt), ("b", b_codes, p.b_fmt)):
        if _ptr(c) % 16 or _row_bytes(fmt, p.k) % 16:
            return (
                f"{name} code rows are not 16-byte aligned (base {_ptr(c):#x}, {_row_bytes(fmt, p.k)} bytes per row; "
                f"k % 16 == 0 for fp8, k % 32 for e2m1): {dense} serves it with byte loads"
            )
    for name, rows, fmt in (("a", p.m, p.a_fmt), ("b", p.n, p.b_fmt)):
        size = code_bytes(p, name, rows, fmt)
        if size >= _LIMIT:
            return f"{name} codes hold {size} bytes, the kernel's 32-bit offsets reach < 2^31"
    if max(p.m, p.n, p.k) >= _LIMIT:
        return f"m={p.m} n={p.n} k={p.k} beyond 32-bit sizes"
    if p.split_k > MAX_GRID_YZ:
        return f"split_k = {p.split_k}, at most {MAX_GRID_YZ} (grid z)"
    out_name = dtype_name(p.out_dtype)
    if out_name not in OUT_CODES:
        return f"out_dtype {out_name} is not float32 / bfloat16 / float16"
    return None


def code_bytes(p: GemmProblem, name: str, rows: int, fmt: str) -> int:
    """The bytes of operand ``name``'s code buffer that the kernel's buffer resource covers: ``rows`` x the row
    bytes, or for weights in a layout (``p.b_weight_layout``) its padded buffer (:func:`weight_layout_shape`)."""
    row = _row_bytes(fmt, p.k)
    if name == "b" and p.b_weight_layout is not None:
        np_, kk = weight_layout_shape(p.b_weight_layout, rows, row)
        return np_ * kk
    return rows * row


@dataclass(frozen=True)
class DecodeAmdPlan:
    """One call's build, grid and K split (``split`` may exceed ``p.split_k`` for a split_k=1 call)."""

    spec: KernelSpec
    defines: Defines
    config: LaunchConfig
    split: int


def split_for(p: GemmProblem, num_cus: int) -> int:
    """The K split of a call: the caller's ``split_k`` when > 1; else enough splits for :data:`CTAS_PER_CU` CTAs
    per CU when ``ceil(n / 64)`` CTAs are fewer, each split keeping at least :data:`MIN_SPLIT_BLOCKS` MX blocks."""
    if p.split_k > 1:
        return p.split_k
    ctas = -(-p.n // K.DECODE_AMD_ROWS)
    want = CTAS_PER_CU * max(num_cus, 1)
    if ctas >= want:
        return 1
    return max(1, min(-(-want // ctas), p.k_blocks // MIN_SPLIT_BLOCKS, MAX_SPLIT))


def wlb(p: GemmProblem) -> int:
    """Define WLB of a call: 0 for row-major weight codes, else the layout's code (mxrt.codes.WEIGHT_LAYOUT_CODES)."""
    return codes.WEIGHT_LAYOUT_CODES[p.b_weight_layout]


def plan(target: str, p: GemmProblem, num_cus: int) -> DecodeAmdPlan:
    """The :class:`DecodeAmdPlan` of a supported, non-empty problem (see :func:`unsupported`)."""
    mt = next(t for t in K.DECODE_AMD_MT if 16 * t >= p.m)
    split = split_for(p, num_cus)
    return DecodeAmdPlan(
        spec=SPECS[target],
        defines=K.decode_amd_variant(codes.FMT_CODES[p.a_fmt], codes.FMT_CODES[p.b_fmt], mt, wlb(p)),
        config=LaunchConfig(grid=(-(-p.n // K.DECODE_AMD_ROWS), 1, split), block=(K.DECODE_AMD_THREADS, 1, 1)),
        split=split,
    )


def scalars(p: GemmProblem, split: int, a_scales: Any, b_scales: Any, out_code: int, mode: int) -> tuple[int, ...]:
    """The kernel's run-time arguments after the five pointers: m, n, k, split_k, a_layout, b_layout, out_dtype,
    mode."""
    la, lb = _scale_code(p.a_scale_layout, a_scales), _scale_code(p.b_scale_layout, b_scales)
    return (p.m, p.n, p.k, split, la, lb, out_code, mode)


def _supports(target: str):
    def supports(dg: DeviceGemm) -> str | None:
        return unsupported(target, dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales)

    return supports


def _run(target: str):
    def run(dg: DeviceGemm) -> None:
        from ..runtime.compiler import build

        p = dg.p
        if p.is_empty:
            dg.out.fill(0)
            return
        pl = plan(target, p, dg.arch.num_cus)
        kernel = build(pl.spec, pl.defines, dg.arch)
        out_code = OUT_CODES[dtype_name(p.out_dtype)]

        def go(dst: Any, code: int, mode: int) -> None:
            s = tuple(np.int32(v) for v in scalars(p, pl.split, dg.a_scales, dg.b_scales, code, mode))
            launch(p.op, kernel, pl.config, (dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dst, *s))

        if pl.split == 1:
            go(dg.out, out_code, MODE_STORE)
        elif p.deterministic:  # fp32 slices, summed in split order by the shared reduce kernel
            ws = workspace((pl.split, p.m, p.n), zero=False)
            go(ws, F32, MODE_STORE)
            launch_reduce(dg, ws, pl.split, out_code)
        elif out_code == F32:
            dg.out.fill(0)
            go(dg.out, F32, MODE_ATOMIC)
        else:  # 16-bit out: fp32 atomics into a zeroed workspace, converted by the reduce
            ws = workspace((1, p.m, p.n), zero=True)
            go(ws, F32, MODE_ATOMIC)
            launch_reduce(dg, ws, 1, out_code)

    return run


#: the weight code layouts both paths read in place (select_gemm_path offers them only these besides row-major)
WEIGHT_LAYOUTS = tuple(name for name in codes.WEIGHT_LAYOUT_CODES if name is not None)
GFX950_DECODE_PATH = GemmPath(
    NAMES["gfx950"], "gfx950", PRIORITY, _supports("gfx950"), _run("gfx950"), weight_layouts=WEIGHT_LAYOUTS
)
GFX942_DECODE_PATH = GemmPath(
    NAMES["gfx942"], "gfx942", PRIORITY, _supports("gfx942"), _run("gfx942"), weight_layouts=WEIGHT_LAYOUTS
)
register_gemm_path(GFX950_DECODE_PATH)
register_gemm_path(GFX942_DECODE_PATH)
