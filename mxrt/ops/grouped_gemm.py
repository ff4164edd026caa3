"""The GPU twin of the grouped MX GEMMs (:mod:`mxrt.problems.grouped_gemm`): the portable ``generic`` kernel
(kernels_src/gemm/gemm_mx_grouped_generic.hip, whose main loop is the dense generic kernel's); on gfx950 / gfx942
the AMD grouped kernels for the lens and wgrad problems (:mod:`mxrt.ops.grouped_gemm_amd`; same arguments, the
dense AMD kernels' main loops); on sm_90a the Hopper grouped engine for the lens, DeepGEMM ids and masked problems
with 16-bit out (:mod:`mxrt.ops.grouped_gemm_sm90_ws`; the issue-10 engine walking a device-built work list) and the
older Hopper grouped kernel for the wgrad and what the engine declines (:mod:`mxrt.ops.grouped_gemm_sm90`; the dense
sm90_wgmma tile); tensor maps by value on both. :func:`choose_kernel` picks one per problem and target
(``MXRT_GROUPED_GEMM_KERNEL`` forces one). Before any of them, on sm_90a with torch present, the torch route
(:mod:`mxrt.ops.grouped_gemm_torch`: exact dequantisation + ``torch._grouped_mm``, a gated generic fallback) takes
the bf16-out forward / dgrad / wgrad when no CUDA graph is being captured (:func:`torch_route_reason`), and the bf16
route (:mod:`mxrt.ops.grouped_wgrad_bf16`: exact dequantisation + a bf16 wgmma kernel, the same gated fallback)
every other wgrad it can run (float32 out, accumulate, no torch, a capture) and the float32-out forward / dgrad.

The group description stays on the device and is never read back: the kernel turns ``group_lens`` into row (or,
for wgrad, padded column) offsets and row tiles itself, and the launch grid comes from host-known bounds
(:func:`grouped_plan`): ``sum_g ceil(M_g / 128) <= ceil(M / 128) + G`` row tiles, plus one tail tile for the rows
past the last group. So a launch is capture-safe (a CUDA graph replays it with new ``group_lens``).

What the kernel does with device group descriptions the host cannot check without a read-back (the numpy twin
and the host-input path check them and raise): lengths are clamped to ``[0, M]`` and groups are cut at ``M``
(like :mod:`mxrt.ops.grouped`); rows of ``out`` past the last group are zeros (``"lens"``); ids outside
``[0, G)`` count as -1 (``"indices"``: rows left untouched); ``masked_m`` is clamped to ``[0, max_m]``; wgrad
column ranges are cut at the operands' width.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..config import ENV_GROUPED_GEMM_KERNEL, grouped_gemm_kernel_override
from ..errors import ShapeError, UnsupportedArchError
from ..problems.grouped_gemm import GroupedGemmProblem
from ..runtime.kernel_spec import Defines, KernelSpec, defines, select
from ..runtime.launch import MAX_GRID_YZ, LaunchConfig
from . import (
    gemm_kernels,
    grouped_gemm_amd,
    grouped_gemm_kernels,
    grouped_gemm_sm90,
    grouped_gemm_sm90_ws,
    grouped_gemm_torch,
    grouped_wgrad_bf16,
)

_U32 = 2**32
_I31 = 2**31
DEVICE_OUT_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}
#: a call plan's prepared launches of the engine / the bf16 route (prepare_route), called with raw pointers
PREPARED = (grouped_gemm_sm90_ws.PreparedEngine, grouped_wgrad_bf16.PreparedBf16)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class GroupedPlan:
    """Build defines, launch config and the scalar arguments of one grouped launch (pure host math)."""

    defines: Defines
    cfg: LaunchConfig
    spec: KernelSpec
    m: int
    n: int
    k: int
    kb: int
    num_groups: int
    extra: int


def _row_bytes(fmt: str, k: int) -> int:
    return _cdiv(k, 2) if fmt == "e2m1" else k


_SM90, _SM90_WS = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90, grouped_gemm_kernels.GEMM_MX_GROUPED_SM90_WS
#: MXRT_GROUPED_GEMM_KERNEL values that name a target's own kernels, in the order they are tried: "sm90" the Hopper
#: grouped engine where it takes the problem, else the older Hopper kernel; "sm90_ws" / "sm90_wgmma" one of them
#: (A/B timings: benchmarks/bench_grouped_gemm.py --kernel)
_FORCED = {"sm90": (_SM90_WS, _SM90), "sm90_ws": (_SM90_WS,), "sm90_wgmma": (_SM90,),
           "gfx950": (grouped_gemm_kernels.GEMM_MX_GROUPED_GFX950,),
           "gfx942": (grouped_gemm_kernels.GEMM_MX_GROUPED_GFX942,)}  # fmt: skip


def kernel_reason(spec: KernelSpec, target: str, p: GroupedGemmProblem) -> str | None:
    """Why the non-generic grouped kernel ``spec`` does not run ``p`` on ``target`` (None when it does)."""
    if spec is _SM90_WS:
        return grouped_gemm_sm90_ws.unsupported(target, p)
    if spec is _SM90:
        return grouped_gemm_sm90.unsupported(target, p)
    if target not in spec.targets:
        return f"{spec.symbol} runs on {spec.targets}, not {target!r}"
    return grouped_gemm_amd.unsupported(target, p)


def choose_kernel(p: GroupedGemmProblem, target: str, force: str | None = None) -> KernelSpec:
    """The kernel that runs ``p`` on ``target``: the target's row of ``grouped_gemm_kernels.DISPATCH`` (the AMD
    grouped kernel on gfx950 / gfx942, the Hopper grouped engine on sm_90a) when that kernel takes ``p``, else its
    ``grouped_gemm_kernels.FALLBACK`` (sm_90a: the older Hopper kernel) when that one does, else the generic one.

    ``force`` (default: ``MXRT_GROUPED_GEMM_KERNEL``): ``"generic"``, or ``"sm90"`` (the engine, else the older
    Hopper kernel), ``"sm90_ws"``, ``"sm90_wgmma"``, ``"gfx950"``, ``"gfx942"``, which raises UnsupportedArchError
    with the kernels' reasons when none of them takes ``p`` on ``target``."""
    generic = grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC
    force = grouped_gemm_kernel_override() if force is None else force
    if force == "generic":
        return generic
    if force is not None:
        specs = _FORCED.get(force)
        if specs is None:
            raise UnsupportedArchError(
                f"{p.op}: {ENV_GROUPED_GEMM_KERNEL}={force!r}; expected auto, generic or one of {sorted(_FORCED)}"
            )
        reasons = []
        for spec in specs:
            why = kernel_reason(spec, target, p)
            if why is None:
                return spec
            reasons.append(f"{spec.symbol}: {why}" if len(specs) > 1 else why)
        raise UnsupportedArchError(
            f"{p.op}: {ENV_GROUPED_GEMM_KERNEL}={force} cannot run this problem: {'; '.join(reasons)}"
        )
    op = "grouped_gemm_mx_wgrad" if p.kind == "wgrad" else "grouped_gemm_mx"
    spec = select(grouped_gemm_kernels.DISPATCH, op, target)
    while spec is not generic and kernel_reason(spec, target, p) is not None:
        spec = grouped_gemm_kernels.FALLBACK.get(spec, generic)
    return spec


def grouped_plan(
    p: GroupedGemmProblem, target: str = "generic", num_sms: int | None = None, force: str | None = None
) -> GroupedPlan:
    """The launch of ``p`` on ``target`` (:func:`choose_kernel`, ``force`` as there) from host-known sizes only;
    typed errors for what the kernel cannot index. ``num_sms``: the device's SM count, the persistent grid of the
    Hopper grouped engine (None: one CTA per tile of its bound)."""
    op = p.op
    bm, bn = gemm_kernels.GEMM_GENERIC_TILE
    g = p.num_groups
    kb = p.k if p.kind in ("wgrad", "kgrouped") else int(p.b.shape[1])
    if p.kind in ("lens", "wgrad", "kgrouped") and g > codes.GROUPED_MAX_GROUPS:
        raise ShapeError(
            f"{op}: {g} groups, the GPU kernel takes at most {codes.GROUPED_MAX_GROUPS} (offsets in shared memory)"
        )
    if p.m >= _I31 or p.k >= _I31 or kb >= _I31:
        raise ShapeError(f"{op}: sizes m = {p.m}, k = {p.k} must be below 2^31 (32-bit row and column offsets)")
    sf_k = 128 if p.scale_f32 else 32
    a_cols, b_cols = _cdiv(p.k, sf_k), _cdiv(kb, sf_k)
    b_rows = _cdiv(p.n, p.sf_gmn_b)
    if p.m * a_cols >= _U32 or b_rows * b_cols >= _U32:
        raise ShapeError(f"{op}: a or one group of b stores 2^32 or more scale bytes (32-bit scale offsets)")
    if p.kind == "lens":
        grid = (_cdiv(p.n, bn), _cdiv(p.m, bm) + g + 1, 1)
        extra = 0
    elif p.kind == "indices":
        grid = (_cdiv(p.n, bn), max(1, _cdiv(p.m, bm)), 1)
        extra = 0
    elif p.kind == "masked":
        grid = (_cdiv(p.n, bn), max(1, _cdiv(p.max_m, bm)), g)
        extra = p.max_m
    else:  # wgrad, kgrouped
        grid = (_cdiv(p.n, bn), _cdiv(p.m, bm), g)
        extra = p.align
    if grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ:
        raise ShapeError(f"{op}: the launch grid {grid} is past 65535 in y or z (too many row tiles or groups)")
    spec = choose_kernel(p, target, force)
    if p.sf_k128 and spec is not _SM90_WS:  # mxrt.api.deep_gemm builds these for the engine only
        raise UnsupportedArchError(f"{op}: UE8M0 scales per 128 K run on the Hopper grouped engine, not {spec.symbol}")
    if spec is _SM90_WS:  # the Hopper grouped engine: persistent 1-D grid, 384 threads
        cfg = grouped_gemm_sm90_ws.launch_config(p, num_sms)
        return GroupedPlan(grouped_gemm_sm90_ws.kernel_defines(p), cfg, spec, p.m, p.n, p.k, kb, g, extra)
    if spec is _SM90:  # the older Hopper kernel: its tile, defines and 1-D grid
        bm, bn, stages, _ = grouped_gemm_sm90.tile(p)
        cfg = LaunchConfig(
            grid=grouped_gemm_sm90.grid(p),
            block=(grouped_gemm_sm90.THREADS, 1, 1),
            shared_mem=grouped_gemm_sm90.smem_bytes(bm, bn, stages),
        )
        return GroupedPlan(grouped_gemm_sm90.kernel_defines(p), cfg, spec, p.m, p.n, p.k, kb, g, extra)
    if spec is not grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC:  # an AMD grouped kernel: its tile, its defines
        d = defines(
            A_FMT=codes.FMT_CODES[p.a_fmt],
            ACCUM=int(p.accumulate),
            B_FMT=codes.FMT_CODES[p.b_fmt],
            MODE=grouped_gemm_kernels.GROUPED_GEMM_MODES[p.kind],
            OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
            THREADS=grouped_gemm_kernels.GROUPED_AMD_THREADS,
        )
        cfg = LaunchConfig(grid=grouped_gemm_amd.grid(p), block=(grouped_gemm_kernels.GROUPED_AMD_THREADS, 1, 1))
        return GroupedPlan(d, cfg, spec, p.m, p.n, p.k, kb, g, extra)
    d = defines(
        ACCUM=int(p.accumulate),
        FMT_A=codes.FMT_CODES[p.a_fmt],
        FMT_B=codes.FMT_CODES[p.b_fmt],
        MODE=grouped_gemm_kernels.GROUPED_GEMM_MODES[p.kind],
        OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)],
        SCALE_F32=int(p.scale_f32),
        SF_GMN_B=p.sf_gmn_b,
        THREADS=gemm_kernels.GEMM_GENERIC_THREADS,
    )
    cfg = LaunchConfig(grid=grid, block=(gemm_kernels.GEMM_GENERIC_THREADS, 1, 1))
    return GroupedPlan(d, cfg, spec, p.m, p.n, p.k, kb, g, extra)


def unsupported_reason(p: GroupedGemmProblem) -> str | None:
    """Why the GPU kernel does not cover ``p`` (None when it does)."""
    if p.kind in ("indices", "masked", "kgrouped") and (p.a_fmt, p.b_fmt) not in grouped_gemm_kernels.DEEPGEMM_PAIRS:
        return f"formats ({p.a_fmt}, {p.b_fmt}): the DeepGEMM layouts run fp8 pairs on the GPU"
    if p.kind in ("indices", "masked") and dtype_name(p.out_dtype) != "bfloat16":
        return "the DeepGEMM layouts write bfloat16 on the GPU"
    if p.kind in ("lens", "wgrad") and p.num_groups > codes.GROUPED_MAX_GROUPS:
        return f"{p.num_groups} groups, the GPU kernel takes at most {codes.GROUPED_MAX_GROUPS}"
    return None


_GENERIC_PLANS: dict = {}


def _generic_plan(p: GroupedGemmProblem) -> GroupedPlan:
    """The generic kernel's plan of ``p`` (the torch route's exact fallback): host math, cached by all it reads."""
    key = (p.kind, p.a_fmt, p.b_fmt, dtype_name(p.out_dtype), p.m, p.n, p.k, tuple(p.b.shape), p.num_groups)
    key += (p.align, p.max_m, p.accumulate, p.scale_f32, p.sf_gmn_b, p.sf_k128)
    plan = _GENERIC_PLANS.get(key)
    if plan is None:
        if len(_GENERIC_PLANS) >= 1024:
            _GENERIC_PLANS.clear()
        plan = _GENERIC_PLANS[key] = grouped_plan(p, "generic", force="generic")
    return plan


def torch_route_reason(p: GroupedGemmProblem, target: str) -> str | None:
    """Why the torch route (:mod:`mxrt.ops.grouped_gemm_torch`) does not run ``p`` now (None: it does): what it
    cannot serve, or a CUDA-graph capture underway on CuPy's stream."""
    why = grouped_gemm_torch.unsupported(target, p)
    if why is None:
        from ..runtime import torch_grouped

        if torch_grouped.capturing():
            return "CuPy's stream is capturing a CUDA graph (the route's result is a torch allocation)"
    return why


def prepare_route(p: GroupedGemmProblem) -> tuple[Any, bool]:
    """``(route, keep)`` for a plan of ``p``'s call signature (:mod:`mxrt.api.grouped_gemm`): ``route`` the torch
    route with every launch prepared (:func:`mxrt.ops.grouped_gemm_torch.prepare`) where :func:`grouped_gemm_gpu`
    runs ``p`` on it, the bf16 route's or the Hopper engine's prepared launches (:data:`PREPARED`) where it runs
    ``p`` on one of them, else None; ``keep`` False where that answer may change on a later call with the same
    signature (a CUDA-graph capture underway, launches through CuPy's call), so no plan should remember it."""
    from ..runtime import torch_grouped
    from ..runtime.arch import get_arch

    force = grouped_gemm_kernel_override()
    if not p.device or not (math.prod(p.out_shape) and p.n):
        return None, True
    arch = get_arch()
    if force in (None, grouped_gemm_torch.NAME) and grouped_gemm_torch.unsupported(arch.target, p) is None:
        if torch_grouped.capturing():
            return None, False
        plan = _generic_plan(p)
        route = grouped_gemm_torch.prepare(p, arch, plain_entry(p, plan, p.groups, arch))
        return route, route is not None
    if force == grouped_gemm_torch.NAME:
        return None, True
    return _prepare_kernel_route(p, arch, force)


def _prepare_kernel_route(p: GroupedGemmProblem, arch: Any, force: str | None) -> tuple[Any, bool]:
    """The rest of :func:`prepare_route`: the torch route does not serve ``p`` (whatever a capture does), so
    :func:`grouped_gemm_gpu` runs the bf16 route (prepared: :func:`mxrt.ops.grouped_wgrad_bf16.prepare`), the engine
    (:func:`mxrt.ops.grouped_gemm_sm90_ws.prepare`) or another kernel (no plan) on it, as decided here."""
    if p.out is not None and not p.out.flags.c_contiguous:
        return None, True
    # (None, True) where no plan can ever serve the signature: the unplanned route then runs without asking again
    if force in (None, grouped_wgrad_bf16.NAME) and grouped_wgrad_bf16.unsupported(arch.target, p) is None:
        if p.kind not in grouped_wgrad_bf16.PLANNED_KINDS:
            return None, True
        route = grouped_wgrad_bf16.prepare(p, arch, plain_entry(p, _generic_plan(p), p.groups, arch))
        return route, route is not None
    if force == grouped_wgrad_bf16.NAME:
        return None, True
    plan = grouped_plan(p, arch.target, arch.num_cus, force)
    if plan.spec is not _SM90_WS or not grouped_gemm_sm90_ws.plannable(p):
        return None, True
    route = grouped_gemm_sm90_ws.prepare(p, arch, plan)
    return route, route is not None


def _upload(x: Any, dtype: Any = np.uint8) -> Any:
    import cupy

    return cupy.asarray(np.ascontiguousarray(np.asarray(x, dtype=dtype)))


def _device_out(p: GroupedGemmProblem) -> Any:
    """``p.out``, or a new device result; bfloat16 viewed as uint16 (CuPy >= 14 bfloat16: kernels write its bits)."""
    from ..runtime import alloc

    out = p.out if p.out is not None else alloc.empty(p.out_shape, DEVICE_OUT_DTYPES[dtype_name(p.out_dtype)])
    return out.view("uint16") if dtype_name(out.dtype) == "bfloat16" else out


def grouped_gemm_gpu(p: GroupedGemmProblem) -> Any:
    """Run a validated grouped GEMM on CuPy's current stream, never synchronising with the host.

    CuPy in: the device result (``p.out`` written in place when given; bfloat16 as uint16 bits). numpy in (backend
    "gpu"): operands, groups and a given ``out`` are uploaded, the result comes back as numpy of ``out_dtype``.
    """
    from ..runtime.arch import get_arch

    host = not p.device
    if host:  # upload codes, row-major scales, groups and a given out (rows the op does not own must survive)
        groups = p.groups.astype(np.int32 if p.kind == "indices" else np.int64)
        dev_out = None
        if p.out is not None:
            o = np.asarray(p.out)
            dev_out = _upload(o.view(np.uint16) if dtype_name(p.out_dtype) == "bfloat16" else o, None)
        p = dataclasses.replace(
            p,
            a=dataclasses.replace(p.a, data=_upload(p.a.data), scales=_upload(p.a.scales)),
            b=dataclasses.replace(p.b, data=_upload(p.b.data), scales=_upload(p.b.scales)),
            groups=_upload(groups, groups.dtype),
            out=dev_out,
            device=True,
        )
    arch = get_arch()
    groups = p.groups
    force = grouped_gemm_kernel_override()
    if force in (None, grouped_gemm_torch.NAME) and math.prod(p.out_shape) and p.n:
        why = torch_route_reason(p, arch.target)
        if why is None:
            out = p.out.view("uint16") if p.out is not None else None
            out, gate = grouped_gemm_torch.run(p, groups, out, arch)
            launch_plain(p, _generic_plan(p), groups, out, arch, gate)  # returns at once unless the gate is raised
            return download(out, p.out_dtype) if host else out
        if force is not None:
            raise UnsupportedArchError(f"{p.op}: {ENV_GROUPED_GEMM_KERNEL}={force} cannot run this problem: {why}")
    elif force == grouped_gemm_torch.NAME:  # nothing to compute: the plain path writes the empty result
        force = "generic"
    if force in (None, grouped_wgrad_bf16.NAME) and math.prod(p.out_shape) and p.n:
        why = grouped_wgrad_bf16.unsupported(arch.target, p)
        if why is None:
            out = _device_out(p)
            gate = grouped_wgrad_bf16.run(p, groups, out, arch)
            launch_plain(p, _generic_plan(p), groups, out, arch, gate)  # returns at once unless the gate is raised
            return download(out, p.out_dtype) if host else out
        if force is not None:
            raise UnsupportedArchError(f"{p.op}: {ENV_GROUPED_GEMM_KERNEL}={force} cannot run this problem: {why}")
    plan = grouped_plan(p, arch.target, arch.num_cus, None if force == grouped_gemm_torch.NAME else force)
    if p.kind == "indices" and dtype_name(groups.dtype) != "int32":
        groups = groups.astype("int32")  # a device op, no synchronisation
    out = _device_out(p)
    if out.size and p.n and plan.spec is _SM90_WS:
        grouped_gemm_sm90_ws.launch_sm90_ws(p, groups, out, arch, plan)
    elif out.size and p.n and plan.spec is _SM90:
        grouped_gemm_sm90.launch_sm90(p, groups, out, arch)
    elif out.size and p.n:  # every other case has nothing to write
        launch_plain(p, plan, groups, out, arch)
    return download(out, p.out_dtype) if host else out


def plain_entry(p: GroupedGemmProblem, plan: GroupedPlan, groups: Any, arch: Any) -> tuple[Any, LaunchConfig, tuple]:
    """The kernel, launch configuration and scalars ``(m, n, k, kb, G, extra, flags, lens_i64)`` of
    :func:`launch_plain` (the vector flags from the code buffers' 16-byte alignment, which a plan keys on)."""
    from ..runtime.compiler import build

    kernel = build(plan.spec, plan.defines, arch)
    flags = 0
    rows_a = 32 if p.kind == "kgrouped" else _row_bytes(p.a_fmt, plan.k)  # kgrouped: ks[g] % 32 == 0 (host)
    rows_b = 32 if p.kind == "kgrouped" else _row_bytes(p.b_fmt, plan.kb)
    if p.a.data.data.ptr % 16 == 0 and rows_a % 16 == 0:
        flags |= codes.GEMM_FLAG_VEC_A
    if p.b.data.data.ptr % 16 == 0 and rows_b % 16 == 0:
        flags |= codes.GEMM_FLAG_VEC_B
    lens_i64 = int(dtype_name(groups.dtype) == "int64")
    u32 = np.uint32
    scalars = (u32(plan.m), u32(plan.n), u32(plan.k), u32(plan.kb), u32(plan.num_groups), u32(plan.extra))
    return kernel, plan.cfg, (*scalars, u32(flags), u32(lens_i64))


def launch_plain(p: GroupedGemmProblem, plan: GroupedPlan, groups: Any, out: Any, arch: Any, gate: Any = None) -> None:
    """Queue a generic or AMD grouped kernel (``plan.spec``) writing ``out``; ``gate`` (generic kernel only): a
    device uint32 word, the grid returns at once while it is 0 (the torch route's exact fallback)."""
    from ..runtime.launch import launch

    kernel, cfg, scalars = plain_entry(p, plan, groups, arch)
    args = (p.a.data, p.a.scales, p.b.data, p.b.scales, out, groups, *scalars)
    if plan.spec is grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC:  # its last argument; the AMD kernels have none
        args += (np.uint64(0) if gate is None else gate,)  # null: a numpy scalar the driver route packs
    launch(p.op, kernel, cfg, args)


def download(out: Any, out_dtype: np.dtype) -> np.ndarray:
    """A device result as numpy of ``out_dtype`` (bfloat16 from its uint16 bits)."""
    h = out.get()
    return h.view(ml_dtypes.bfloat16) if dtype_name(out_dtype) == "bfloat16" else h
