"""The ``torch`` route of the grouped MX GEMMs on sm_90a: exact dequantisation of both operands to bf16
(kernels_src/quant/dequantize_mx.hip, as the dense ``sm90_cublas`` path) and PyTorch's grouped bf16 GEMM
``torch._grouped_mm`` (:mod:`mxrt.runtime.torch_grouped`), which reads the group offsets on the device: no host
synchronisation. It is the "dequantize + ``torch._grouped_mm``" workaround of a Hopper user, done by mxrt and made
exact for every input:

- the dequantisation passes raise a device gate word where a block's scale lies outside the window in which bf16
  operands and fp32 accumulation are exact, or a finite block holds a NaN / Inf code (the ``sm90_cublas`` window),
  and the forward also raises it where ``group_lens`` on the device is not a valid split of the rows (an entry
  outside ``[0, M]``, a sum other than ``M``); a gated launch of the generic grouped kernel then recomputes every
  output exactly with mxrt's semantics (its CTAs return at once while the gate is 0; :func:`run` returns the gate
  word, :func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu` launches the fallback);
- the wgrad's column ranges are the generic kernel's (lengths clamped, padded to ``align``, cut at the width), so
  they need no gate.

Serves (:func:`unsupported`): the forward / dgrad by ``group_lens`` and the variable-K wgrad with bfloat16 out (the
output dtype ``torch._grouped_mm`` has for bf16 inputs), every format pair, any K (workspaces padded to 8 columns);
not ``accumulate`` (the product must stay fp32 until it is added), not DeepGEMM's id / masked layouts (rows they do
not own must stay untouched; ``torch._grouped_mm`` writes every row), not ``b`` padded past K. It needs torch with
CUDA and is skipped while CuPy's stream captures a CUDA graph (its result is a torch allocation that a replay would
write after torch reused it): a capture takes the Hopper grouped kernels, which are capture-safe.

Speed (H200, session 11 call 10, ``benchmarks/bench_grouped_gemm.py``, the Primus-Turbo #330 shapes, eager calls on
both sides): 0.70-1.09x ``torch._grouped_mm`` bf16, median 0.85, on all but the smallest cells (the two dequantisation
passes are the gap), against 0.34-0.58x for the Hopper grouped engine; gpt-oss B = 4, M = 2048 at 0.34-0.79x, where
the ~340-410 us of host time of an eager call exceeds the GPU work. A repeated call signature now runs a plan
(:func:`prepare`, :mod:`mxrt.api.grouped_gemm`): no validation, prepared launches, ``out`` filled by one device copy.
Memory: the bf16 copies of both operands, ``2 * (rows of a + rows of b) * round_up(K, 8)`` bytes, as the workaround.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..errors import ShapeError
from ..problems.grouped_gemm import GroupedGemmProblem
from .dequant import check_dequant_limits

NAME = "torch"
TARGET = "sm_90a"
KINDS = ("lens", "wgrad")
_LIMIT = 2**31


def padded(k: int) -> int:
    """The workspaces' row length: ``k`` rounded up to 8 bf16 elements (16-byte leading dimensions)."""
    return -(-k // 8) * 8


def unsupported(target: str, p: GroupedGemmProblem) -> str | None:
    """Why the torch route does not take ``p`` on ``target`` (None: it does). Asks torch once whether it can run."""
    if target != TARGET:
        return f"the torch route runs on {TARGET}, not {target!r}"
    if p.kind not in KINDS:
        return f"the {p.kind!r} layout (its rows outside the groups stay untouched; torch._grouped_mm writes every row)"
    if dtype_name(p.out_dtype) != "bfloat16":
        return f"out dtype {dtype_name(p.out_dtype)} (torch._grouped_mm writes bfloat16 for bfloat16 inputs)"
    if p.accumulate:
        return "accumulate (the product must stay in fp32 until it is added to out)"
    if not 1 <= p.num_groups <= codes.GROUPED_MAX_GROUPS:
        return f"{p.num_groups} groups (the exact fallback takes 1 to {codes.GROUPED_MAX_GROUPS})"
    if p.k == 0:
        return "k = 0"
    b_rows, kb = int(p.b.shape[0]), int(p.b.shape[1])
    if p.kind == "lens" and kb != p.k:
        return f"b is padded past k ({kb} columns for k = {p.k}; the route dequantises whole rows)"
    if max(p.m, p.n, padded(p.k), b_rows) >= _LIMIT:
        return "sizes of 2^31 or more (int32 offsets)"
    for rows in (p.m, b_rows):
        try:
            check_dequant_limits(p.op, rows, p.k, None)
        except ShapeError as e:  # the reason, not an error, while choosing a route
            return str(e)
    from ..runtime import torch_grouped

    return torch_grouped.unavailable()


def offsets_numpy(lens: Any, cap: int, pad: int, total: int) -> tuple[np.ndarray, bool]:
    """numpy twin of kernels_src/gemm/grouped_offsets.hip: the int32 group ends ``min(sum_{j <= g} pad(clamp(
    lens[j], 0, cap)), total)`` (``pad(v) = ceil(v / pad) * pad``) and whether ``lens`` is not a split of ``total``
    (an entry outside ``[0, cap]`` or a sum other than ``total``)."""
    v = np.asarray(lens, np.int64)
    cl = np.clip(v, 0, cap)
    ends = np.minimum(np.cumsum(-(-cl // pad) * pad), total).astype(np.int32)
    return ends, bool((cl != v).any() or int(cl.sum()) != total)


def offsets_entry(lens: Any, cap: int, pad: int, total: int, arch: Any) -> tuple[Any, Any, tuple]:
    """grouped_offsets' kernel, launch configuration and trailing scalars ``(G, lens_i64, cap, pad, total)`` for
    the lengths ``lens`` (a device int32 / int64 ``[G]``; only its dtype and size are read)."""
    from ..runtime.compiler import build
    from ..runtime.launch import LaunchConfig
    from .grouped_gemm_kernels import GROUPED_OFFSETS, GROUPED_OFFSETS_THREADS

    kernel = build(GROUPED_OFFSETS, GROUPED_OFFSETS.variants[0], arch)
    cfg = LaunchConfig((1, 1, 1), (GROUPED_OFFSETS_THREADS, 1, 1), 0)
    lens_i64 = np.uint32(dtype_name(lens.dtype) == "int64")
    return kernel, cfg, (np.uint32(int(lens.shape[0])), lens_i64, np.int64(cap), np.int64(pad), np.int64(total))


def launch_offsets(
    op: str, lens: Any, cap: int, pad: int, total: int, arch: Any, gate: Any = None, offs: Any = None
) -> Any:
    """Queue grouped_offsets: ``offs`` (a CuPy int32 ``[G]``, allocated when None) gets :func:`offsets_numpy`'s
    ends; ``gate`` (a device uint32 word) gets bit 2 where ``lens`` is not a split of ``total`` (None: no check).
    No host synchronisation."""
    from ..runtime import alloc
    from ..runtime.launch import launch

    offs = alloc.empty(int(lens.shape[0]), np.int32) if offs is None else offs
    kernel, cfg, scalars = offsets_entry(lens, cap, pad, total, arch)
    launch(op, kernel, cfg, (lens, offs, np.uint64(0) if gate is None else gate, *scalars))
    return offs


def run(p: GroupedGemmProblem, groups: Any, out: Any, arch: Any) -> tuple[Any, Any]:
    """Queue the route on CuPy's current stream: ``(result, gate)``, the result ``out`` when given, else a
    C-contiguous array (bfloat16 as uint16 bits), and the device gate word the caller hands to the generic kernel's
    gated launch (:func:`mxrt.ops.grouped_gemm.grouped_gemm_gpu`), which recomputes every output where it is raised.
    No host synchronisation."""
    from ..runtime import alloc, torch_grouped
    from .dequant import launch_dequant

    kp = padded(p.k)
    b_rows = int(p.b.shape[0])
    gate = alloc.zeros(1, np.uint32)
    bf = "bfloat16"
    with torch_grouped.on_cupy_stream() as torch:  # workspaces from torch's allocator: no DLPack per call
        ta, wa = torch_grouped.empty(torch, (p.m, kp), "uint16")
        tb, wb = torch_grouped.empty(torch, (b_rows, kp), "uint16")
        to, offs = torch_grouped.empty(torch, (p.num_groups,), "int32")
        launch_dequant(p.op, p.a.data, p.a.scales, wa, p.m, p.k, kp, p.a_fmt, None, bf, arch, gate)
        launch_dequant(p.op, p.b.data, p.b.scales, wb, b_rows, p.k, kp, p.b_fmt, None, bf, arch, gate)
        if p.kind == "lens":  # rows: lengths clamped to [0, m], cut at m; a bad split raises the gate
            launch_offsets(p.op, groups, p.m, 1, p.m, arch, gate, offs)
            res = torch_grouped.grouped_mm(torch, ta, tb.view(p.num_groups, p.n, kp), to)
        else:  # wgrad columns: clamped to [0, Mc], padded to align, cut at Mc (the generic kernel's MODE 3)
            launch_offsets(p.op, groups, p.k, p.align, p.k, arch, None, offs)
            res = torch_grouped.grouped_mm(torch, ta, tb, to)
    if out is not None:
        out[...] = res.reshape(out.shape)
        res = out
    elif not res.flags.c_contiguous:  # torch pads the rows of an output whose width is not a multiple of 8
        res = res.copy()  # C-contiguous, as every mxrt result and the fallback kernel's row stride
    return res, gate


def prepare(p: GroupedGemmProblem, arch: Any, fallback: tuple[Any, Any, tuple]) -> Any:
    """:func:`run` and the gated fallback of ``p``'s call signature as one
    :class:`mxrt.runtime.torch_grouped.PreparedRoute` (every launch prepared: kernel, configuration, parameter
    block), or None where launches go through CuPy's call (then :func:`run` serves every call). ``fallback``: the
    generic kernel's ``(kernel, cfg, scalars)`` (:func:`mxrt.ops.grouped_gemm.plain_entry`). What the launches
    depend on besides sizes (the code buffers' 16-byte alignment, the lengths' dtype) is part of the plan key
    (:mod:`mxrt.api.grouped_gemm`); the workspaces are torch allocations, 512-byte aligned."""
    from ..runtime import torch_grouped
    from ..runtime.launch import prepare as prepare_launch
    from .dequant import dequant_entry

    kp = padded(p.k)
    b_rows = int(p.b.shape[0])
    ws = 1 << 20  # any 16-byte aligned address: the workspaces' vector stores are on
    bf = "bfloat16"
    ea = dequant_entry(p.a.data.data.ptr, ws, p.a.scales, p.m, p.k, kp, p.a_fmt, None, bf, arch, True)
    eb = dequant_entry(p.b.data.data.ptr, ws, p.b.scales, b_rows, p.k, kp, p.b_fmt, None, bf, arch, True)
    if p.kind == "lens":  # as run(): rows cut at m, the split checked; wgrad: columns padded to align, cut at Mc
        eo = offsets_entry(p.groups, p.m, 1, p.m, arch)
    else:
        eo = offsets_entry(p.groups, p.k, p.align, p.k, arch)
    ptr = np.uint64(0)  # a pointer slot: the prepared launch packs an int there
    # (entry, leading pointers, trailing pointers): the generic kernel's gate is its last argument
    entries = ((ea, 4, 0), (eb, 4, 0), (eo, 3, 0), (fallback, 6, 1))
    launches, values = [], []
    for (kernel, cfg, scalars), head, tail in entries:
        pl = prepare_launch(p.op, kernel, cfg, (*(ptr,) * head, *scalars, *(ptr,) * tail))
        if pl is None:
            return None
        launches.append(pl)
        values.append(tuple(int(v) for v in scalars))
    b_shape = (p.num_groups, p.n, kp) if p.kind == "lens" else (b_rows, kp)
    return torch_grouped.PreparedRoute(
        tuple(launches), tuple(values), (p.m, kp), b_shape, p.num_groups, p.out_shape, p.kind
    )
