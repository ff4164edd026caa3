"""The Hopper grouped MX GEMM kernel (kernels_src/gemm/gemm_mx_grouped_sm90.hip): which problems it takes, its tile
and launch geometry (pure host math, no cupy), and its launch (:func:`launch_sm90`, from
:func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu`).

It runs the dense ``sm90_wgmma`` kernel's CTA tile (kernels_src/gemm/gemm_sm90_tile.h: one fp8 wgmma per MX block,
exact promotion, TMA ring) under the generic grouped kernel's device-side schedule: ``"lens"`` (forward / dgrad by
device ``group_lens``), DeepGEMM's ``"indices"`` (contiguous layout, per-row ids; the psum layout arrives here as
ids), ``"masked"`` and the variable-K ``"wgrad"`` (grid z = the group; its padded column range comes from the device
lens and the tile's main loop runs over those MX blocks only; ``out[g]`` written, or added to with ``accumulate``).
A as one TMA map ``[M, kp]`` (a tile's box starts at its first row: rows of the next group come along and are never
stored), B as one map ``[G * n, kp]`` (wgrad ``[n, kp]``) over the row stride of ``b`` (a tile's box at row
``g * n + n0``; columns past n likewise), stores masked to the group's rows and to n, so ``out`` stays tight.
Tensor maps travel by value, group sizes stay on the device: capture-safe, as the dense path.

e2m1 operands are expanded to e4m3 bytes first (as the dense path, :func:`mxrt.ops.gemm_sm90._expand_e2m1`, into
pool buffers: see the dense path's note on captures). Declined (the generic kernel runs these, :func:`unsupported`
says why): DeepGEMM's k-grouped wgrad (float32 out only), float32 scales (DeepGEMM's Hopper recipe), float32 output
with an fp8 operand (the fp8 wgmma partials miss the 1e-5 relative bar, as the dense path; this includes the
wgrad's default float32 out: ask for bfloat16 to run it here), k == 0, an fp8 operand with ``k % 16`` or a base /
row stride that is not 16-byte aligned (TMA), sizes of 2^31 or more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..problems.grouped_gemm import GroupedGemmProblem
from ..runtime.kernel_spec import Defines, defines
from ..runtime.launch import MAX_GRID_X, MAX_GRID_YZ, LaunchConfig
from .grouped_gemm_kernels import (
    GEMM_MX_GROUPED_SM90,
    GROUPED_GEMM_MODES,
    GROUPED_SM90_KINDS,
    SM90_GROUPED_IDS,
    SM90_GROUPED_LARGE,
    SM90_GROUPED_MEDIUM,
)

TARGET = "sm_90a"
THREADS = 256  # both tiles: two consumer warpgroups
_FMTS = ("e4m3", "e5m2", "e2m1")
#: fp8 codes of the kernel's A_FMT / B_FMT (e2m1 operands are expanded to e4m3 first)
_KERNEL_FMT = {"e4m3": codes.FMT_CODES["e4m3"], "e5m2": codes.FMT_CODES["e5m2"], "e2m1": codes.FMT_CODES["e4m3"]}
_LIMIT = 2**31
#: average rows per group from which 16-bit lens problems take the 256-row tile
LARGE_ROWS_PER_GROUP = 512
FLAG_PAIRS, FLAG_I64 = 1, 2


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _kb(p: GroupedGemmProblem) -> int:
    return int(p.b.shape[-1])


def _b_rows(p: GroupedGemmProblem) -> int:
    """Rows of B's tensor map: every group's n rows, or n for the wgrad (one b shared by the groups' K ranges)."""
    return p.n if p.kind == "wgrad" else p.num_groups * p.n


def padded_k(p: GroupedGemmProblem) -> int:
    """K extent of the codes the kernel reads: k, or k rounded up to 16 when both operands are expanded e2m1."""
    return _cdiv(p.k, 16) * 16 if p.a_fmt == p.b_fmt == "e2m1" else p.k


def tile(p: GroupedGemmProblem) -> tuple[int, int, int, int]:
    """(BM, BN, STAGES, DBUF): 256 x 128 for 16-bit lens problems with >= LARGE_ROWS_PER_GROUP rows per group on
    average (the dense path's large tile), else 128 x 128 (fp32 out, small groups, DeepGEMM's 128-row layouts; the
    ids mode with one partial in flight)."""
    if p.kind == "indices":
        return SM90_GROUPED_IDS
    if p.kind == "wgrad":  # the dense path's rule: 256 rows for 16-bit out past 128 rows
        return SM90_GROUPED_LARGE if dtype_name(p.out_dtype) != "float32" and p.m > 128 else SM90_GROUPED_MEDIUM
    wide_out = dtype_name(p.out_dtype) != "float32"
    if p.kind == "lens" and wide_out and p.m >= LARGE_ROWS_PER_GROUP * max(p.num_groups, 1):
        return SM90_GROUPED_LARGE
    return SM90_GROUPED_MEDIUM


def tiles_m(p: GroupedGemmProblem, bm: int) -> int:
    """Row tiles of the launch: lens ``ceil(m/BM) + G + 1`` (every group's tiles and the tail tile), indices
    ``ceil(m/BM)``, masked ``ceil(max_m/BM)`` (per group, grid z), wgrad ``ceil(m/BM)`` (per group, grid z)."""
    if p.kind == "lens":
        return _cdiv(p.m, bm) + p.num_groups + 1
    if p.kind in ("indices", "wgrad"):
        return max(1, _cdiv(p.m, bm))
    return max(1, _cdiv(p.max_m, bm))


def grid(p: GroupedGemmProblem) -> tuple[int, int, int]:
    bm, bn, _, _ = tile(p)
    return (max(1, _cdiv(p.n, bn)) * tiles_m(p, bm), 1, p.num_groups if p.kind in ("masked", "wgrad") else 1)


def unsupported(target: str, p: GroupedGemmProblem, f32_scales: bool = False) -> str | None:
    """Why the Hopper grouped kernel does not run ``p`` on ``target`` (a short reason), or None when it does.
    Device pointers are checked only for device problems (a host problem is uploaded to fresh, aligned buffers).
    ``f32_scales``: float32 scales are taken (the grouped engine's own check of them, which shares the rest)."""
    if target != TARGET:
        return f"no Hopper grouped GEMM kernel for target {target!r} (it needs {TARGET})"
    if p.kind == "kgrouped":
        return (
            "kind 'kgrouped' (DeepGEMM's k-grouped wgrad writes float32, which the fp8 wgmma partials cannot meet at "
            "1e-5; per-group row strides would need tensor maps made on the device): the sm90_bf16 route runs it"
        )
    if p.kind not in GROUPED_SM90_KINDS:
        return f"kind {p.kind!r}: the sm90 grouped kernel runs {GROUPED_SM90_KINDS} (the generic kernel the others)"
    if (p.scale_f32 or p.sf_k128) and not f32_scales:
        return "float32 scales or UE8M0 per 128 K (DeepGEMM's recipe) run on the grouped engine or the generic kernel"
    if p.a_fmt not in _FMTS or p.b_fmt not in _FMTS:
        return f"formats ({p.a_fmt}, {p.b_fmt}) are not e4m3 / e5m2 / e2m1"
    if dtype_name(p.out_dtype) == "float32" and not p.a_fmt == p.b_fmt == "e2m1":
        return "float32 output with an fp8 operand (the fp8 wgmma partials miss the 1e-5 relative bar)"
    if p.k == 0:
        return "k = 0 (nothing to reduce: the generic kernel writes the zeros)"
    kp, kb = padded_k(p), _kb(p)
    if kp % 16:
        return f"k = {p.k}: an fp8 operand needs k % 16 == 0 (TMA row strides are 16-byte multiples)"
    if p.b_fmt != "e2m1" and kb % 16:
        return f"b's row of {kb} codes is not a multiple of 16 bytes (TMA row stride)"
    if p.kind in ("lens", "wgrad") and p.num_groups > codes.GROUPED_MAX_GROUPS:
        return f"{p.num_groups} groups, the kernel's schedule takes at most {codes.GROUPED_MAX_GROUPS}"
    b_rows = _b_rows(p)
    if p.kind == "wgrad" and (p.align % 32 or p.num_groups * p.m * p.n >= _LIMIT):
        return f"wgrad align = {p.align} (needs a multiple of 32) or G * m * n = {p.num_groups * p.m * p.n} >= 2^31"
    if max(p.m, b_rows) >= _LIMIT or max(p.m, b_rows) * max(_cdiv(kb, 32), 1) >= _LIMIT:
        return f"sizes m = {p.m}, G * n = {b_rows} (or their scale bytes) reach 2^31 (32-bit TMA rows)"
    if "e2m1" in (p.a_fmt, p.b_fmt) and max(p.m * kp, b_rows * _cdiv(kb, 16) * 16) >= 16 * 2**31:
        return "an e2m1 operand of 2^35 elements or more (the expansion kernel's 32-bit chunk index)"
    g = grid(p)
    if g[0] > MAX_GRID_X or g[2] > MAX_GRID_YZ:
        return f"grid {g} beyond the limits ({MAX_GRID_X}, 65535, 65535)"
    if p.device:
        for name, fmt, x in (("a", p.a_fmt, p.a.data), ("b", p.b_fmt, p.b.data)):
            if fmt != "e2m1" and x.data.ptr % 16:
                return f"{name} codes start at {x.data.ptr:#x}, not 16-byte aligned (TMA)"
    return None


def kernel_defines(p: GroupedGemmProblem) -> Defines:
    bm, bn, stages, dbuf = tile(p)
    return defines(
        A_FMT=_KERNEL_FMT[p.a_fmt],
        ACCUM=int(p.accumulate),
        B_FMT=_KERNEL_FMT[p.b_fmt],
        BM=bm,
        BN=bn,
        DBUF=dbuf,
        MODE=GROUPED_GEMM_MODES[p.kind],
        OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        STAGES=stages,
    )


def _kernel(d: Defines, arch: Any, smem: int) -> Any:
    from ..runtime.compiler import build_with_smem

    return build_with_smem(GEMM_MX_GROUPED_SM90, d, arch, smem)


def smem_bytes(bm: int, bn: int, stages: int) -> int:
    """Dynamic shared memory of a launch (the dense kernel's stage ring; the lens schedule lives inside it)."""
    stage = bm * 128 + bn * 128 + 4 * bm * 4 + 4 * 4 * (bn // 4 + 4) * 4
    return stages * stage + 20 * stages + 1024


def tensor_maps(p: GroupedGemmProblem, arch: Any, bm: int, bn: int) -> tuple[Any, Any]:
    """The A map ``[m, kp]`` (box ``bm`` rows) and the B map over every group's rows (box ``bn`` rows, B's row stride),
    e2m1 operands expanded to e4m3 bytes first (into pool buffers)."""
    from .gemm_sm90 import _expand_e2m1, tensor_map_arg

    kp, kb, b_rows = padded_k(p), _kb(p), _b_rows(p)
    a = _expand_e2m1(p.a.data, p.m, p.k, kp, arch) if p.a_fmt == "e2m1" else p.a.data
    if p.b_fmt == "e2m1":  # the whole padded row (kb), so the map's stride is the expanded row
        kpb = _cdiv(kb, 16) * 16
        b, b_stride = _expand_e2m1(p.b.data, b_rows, kb, kpb, arch), kpb
    else:
        b, b_stride = p.b.data, kb
    dev = a.data.device_id
    tma = tensor_map_arg(a.data.ptr, p.m, kp, bm, dev)
    tmb = tensor_map_arg(b.data.ptr, b_rows, kp, bn, dev, stride=b_stride)
    return tma, tmb


def launch_flags(p: GroupedGemmProblem, groups: Any, out: Any) -> int:
    """FLAG_PAIRS where output pairs may be stored as one word (n even, ``out`` aligned to a pair), FLAG_I64 for
    int64 group lengths (the ids are int32)."""
    elt = 4 if dtype_name(p.out_dtype) == "float32" else 2
    flags = FLAG_PAIRS if p.n % 2 == 0 and out.data.ptr % (2 * elt) == 0 else 0
    if p.kind != "indices" and dtype_name(groups.dtype) == "int64":
        flags |= FLAG_I64
    return flags


def launch_sm90(p: GroupedGemmProblem, groups: Any, out: Any, arch: Any) -> None:
    """Launch ``p`` (a device problem :func:`unsupported` accepted, ``out`` non-empty, bfloat16 as uint16) on the
    current stream; no host synchronisation."""
    from ..runtime.launch import launch

    bm, bn, stages, _ = tile(p)
    kb = _kb(p)
    tma, tmb = tensor_maps(p, arch, bm, bn)
    smem = smem_bytes(bm, bn, stages)
    kernel = _kernel(kernel_defines(p), arch, smem)
    flags = launch_flags(p, groups, out)
    u32 = np.uint32
    tm = tiles_m(p, bm)
    args = (tma, tmb, p.a.scales, p.b.scales, out, groups)
    args += (u32(p.m), u32(p.n), u32(p.k), u32(_cdiv(p.k, 32)), u32(_cdiv(kb, 32)), u32(p.num_groups))
    args += (u32(p.align if p.kind == "wgrad" else p.max_m), u32(tm), u32(flags))
    cfg = LaunchConfig(grid=grid(p), block=(THREADS, 1, 1), shared_mem=smem)
    launch(p.op, kernel, cfg, args)
