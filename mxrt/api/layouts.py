"""Public layout, MoE and grouped-quantization ops: numpy twin or GPU kernel, chosen explicitly here.

The ops with GPU kernels (scale preshuffles, ``moe_align_block_size``, the grouped quantizers) dispatch through
:func:`mxrt.api.dispatch.use_gpu`; each path validates its arguments once (the numpy twin in
:mod:`mxrt.layouts`, the GPU op in :mod:`mxrt.ops`). Host-only ops are wrapped by :func:`host_op`, which reads
torch / JAX host arrays zero-copy and returns the caller's kind.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .. import layouts as lay
from .._kinds import is_device_array
from ..errors import DtypeError
from ..formats import codecs
from ..formats.mx import MXDual
from ..formats.scales import ScaleMode
from ..layouts import MXGrouped
from ..layouts import ep as lay_ep
from ..ops import grouped as grouped_ops
from ..ops import layouts as layout_ops
from ..ops import moe as moe_ops
from ..ops import moe_combine as combine_ops
from ..reference import metrics
from ..runtime.graph_memory import graph_safe
from . import interop
from .dispatch import host_only, use_gpu
from .interop import HOST


def host_op(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a host-only numpy function: array arguments of any kind in (device arrays refused with a typed error),
    results out in the kind of the first non-numpy array argument."""
    op = fn.__name__
    names = list(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        callers = []

        def take(value: Any, name: str) -> Any:
            native, c = interop.import_array(value, op, name)
            callers.append(c)
            return native

        pos = [take(a, names[i] if i < len(names) else f"#{i}") for i, a in enumerate(args)]
        kws = {k: take(a, k) for k, a in kw.items()}
        caller = next((c for c in callers if c is not HOST), HOST)  # the first non-numpy array sets the kind
        host_only(op, "auto", caller.device)
        return interop.export_mx(fn(*pos, **kws), caller)

    return wrapper


# ---- ops with GPU kernels ------------------------------------------------------------------------------------


@graph_safe
def preshuffle_scales(s: Any, layout: str, *, pad_value: int = 127, dtype: Any = None, backend: str = "auto") -> Any:
    op = "preshuffle_scales"
    s, caller = interop.import_array(s, op, "s")
    kw = {"layout": layout, "pad_value": pad_value, "dtype": dtype}
    if use_gpu(op, backend, caller.device, lambda: layout_ops.preshuffle_unsupported(s, **kw)):
        out = layout_ops.preshuffle_scales_gpu(s, **kw)
    else:
        out = lay.preshuffle_scales(s, **kw)
    return interop.export(out, caller)


@graph_safe
def unshuffle_scales(p: Any, layout: str, shape: tuple[int, int], *, backend: str = "auto") -> Any:
    op = "unshuffle_scales"
    p, caller = interop.import_array(p, op, "p")
    kw = {"layout": layout, "shape": shape}
    if use_gpu(op, backend, caller.device, lambda: layout_ops.unshuffle_unsupported(p, **kw)):
        out = layout_ops.unshuffle_scales_gpu(p, **kw)
    else:
        out = lay.unshuffle_scales(p, **kw)
    return interop.export(out, caller, "scales")


@graph_safe
def moe_align_block_size(
    topk_ids: Any,
    block_size: int,
    num_experts: int,
    expert_map: Any = None,
    *,
    pad_sorted_ids: bool = False,
    backend: str = "auto",
) -> tuple[Any, Any, Any]:
    op = "moe_align_block_size"
    ids, caller = interop.import_array(topk_ids, op, "topk_ids")
    emap = interop.import_optional(expert_map, op, "expert_map")
    kw = {"block_size": block_size, "num_experts": num_experts, "expert_map": emap, "pad_sorted_ids": pad_sorted_ids}
    if use_gpu(op, backend, caller.device, lambda: moe_ops.moe_align_unsupported(ids, **kw)):
        out = moe_ops.moe_align_block_size_gpu(ids, **kw)
    else:
        out = lay.moe_align_block_size(ids, **kw)
    return tuple(interop.export(v, caller) for v in out)


@graph_safe
def moe_combine(y: Any, src: Any, topk_weights: Any, *, backend: str = "auto") -> Any:
    """The MoE combine: ``out [T, n] = bf16(sum_j topk_weights[t, j] * y[src[t, j]])``, float32 products summed in
    slot order, rounded once (:func:`mxrt.layouts.ep.moe_combine` is the numpy twin and states the arithmetic).

    Parameters
    ----------
    y : bfloat16 ``[R, n]`` expert output rows (CuPy: bfloat16 or uint16 bits; rows contiguous along n).
    src : int32 / int64 ``[T, k]`` (C-contiguous on the GPU), the row of ``y`` holding pair ``(t, j)``. The caller's
        contract: values in ``[0, R)``. numpy checks it (:class:`ShapeError`); the GPU kernel reads no value back
        (no host sync, graph-capturable) and writes the row of a token with an index outside as NaN.
    topk_weights : float32 ``[T, k]`` (C-contiguous on the GPU).
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"`` (a GPU input always runs on the GPU; :mod:`mxrt.api.dispatch`).

    Returns
    -------
    bfloat16 ``[T, n]`` of the caller's kind (torch in -> torch out, zero-copy; CuPy: ``y``'s dtype). On CUDA fp32
    subnormal products and sums flush to zero (NVRTC ``-ftz=true``): the twin's ``ftz=True``.
    """
    op = "moe_combine"
    y, caller = interop.import_array(y, op, "y")
    s = interop.import_array(src, op, "src")[0]
    w = interop.import_array(topk_weights, op, "topk_weights")[0]
    if use_gpu(op, backend, caller.device, lambda: combine_ops.moe_combine_unsupported(y, s, w)):
        out = combine_ops.moe_combine_gpu(y, s, w)
    else:
        for name, a in (("src", s), ("topk_weights", w)):
            if is_device_array(a):
                raise DtypeError(
                    f"{op}: argument '{name}' lives on the GPU while y is a host array; pass both on one side"
                )
        out = lay_ep.moe_combine(y, s, w)
    return interop.export(out, caller, "bfloat16")


@graph_safe
def quantize_mx_grouped(
    x: Any,
    group_lens: Any,
    fmt: str = "e4m3",
    *,
    align: int = 32,
    colwise: bool = False,
    col_align: int = 128,
    scale_mode: str | ScaleMode = "rceil",
    block_size: int = 32,
    backend: str = "auto",
) -> MXGrouped:
    op = "quantize_mx_grouped"
    x, caller = interop.import_array(x, op, "x")
    lens = interop.import_array(group_lens, op, "group_lens")[0]
    kw = {
        "fmt": fmt,
        "align": align,
        "colwise": colwise,
        "col_align": col_align,
        "scale_mode": scale_mode,
        "block_size": block_size,
    }
    if not caller.device:  # the numpy checks first: typed errors for host inputs whichever path runs
        x = codecs.check_float_array(x, op)
    if use_gpu(op, backend, caller.device, lambda: grouped_ops.grouped_unsupported(x, lens, **kw)):
        out = grouped_ops.quantize_mx_grouped_gpu(x, lens, **kw)
    else:
        out = lay.quantize_mx_grouped(x, lens, **kw)
    return interop.export_mx(out, caller)


@graph_safe
def quantize_mx_dual_grouped(
    w: Any,
    fmt: str = "e4m3",
    *,
    block_2d: bool = False,
    scale_mode: str | ScaleMode = "rceil",
    pad: int = 32,
    block_size: int = 32,
    backend: str = "auto",
) -> MXDual:
    op = "quantize_mx_dual_grouped"
    w, caller = interop.import_array(w, op, "w")
    kw = {"fmt": fmt, "block_2d": block_2d, "scale_mode": scale_mode, "pad": pad, "block_size": block_size}
    if use_gpu(op, backend, caller.device, lambda: grouped_ops.dual_grouped_unsupported(w, **kw)):
        out = grouped_ops.quantize_mx_dual_grouped_gpu(w, **kw)
    else:
        out = lay.quantize_mx_dual_grouped(w, **kw)
    return interop.export_mx(out, caller)


for _face, _twin in (
    (preshuffle_scales, lay.preshuffle_scales),
    (unshuffle_scales, lay.unshuffle_scales),
    (moe_align_block_size, lay.moe_align_block_size),
    (quantize_mx_grouped, lay.quantize_mx_grouped),
    (quantize_mx_dual_grouped, lay.quantize_mx_dual_grouped),
):
    _face.__doc__ = (_twin.__doc__ or "") + (
        '\n    backend : ``"auto"``, ``"numpy"`` or ``"gpu"`` (a GPU input always runs on the GPU; see '
        ":mod:`mxrt.api.dispatch`).\n"
    )

# ---- host-only ops (numpy twins), any array kind in and out ---------------------------------------------------

contiguous_m_indices = host_op(lay.contiguous_m_indices)
contiguous_psum_layout = host_op(lay.contiguous_psum_layout)
from_masked = host_op(lay.from_masked)
group_lens_from_m_indices = host_op(lay.group_lens_from_m_indices)
group_lens_from_psum = host_op(lay.group_lens_from_psum)
group_offsets = host_op(lay.group_offsets)
moe_sorting = host_op(lay.moe_sorting)
pad_group_layout = host_op(lay.pad_group_layout)
pad_rows = host_op(lay.pad_rows)
preshuffle_weight = host_op(lay.preshuffle_weight)
scale_index = host_op(lay.scale_index)
to_masked = host_op(lay.to_masked)
unpad_rows = host_op(lay.unpad_rows)
unshuffle_weight = host_op(lay.unshuffle_weight)

decode = host_op(codecs.decode)
encode = host_op(codecs.encode)
pack_fp4 = host_op(codecs.pack_fp4)
unpack_fp4 = host_op(codecs.unpack_fp4)
ceil_to_ue8m0 = host_op(codecs.ceil_to_ue8m0)
e8m0_decode = host_op(codecs.e8m0_decode)

calc_diff = host_op(metrics.calc_diff)
relative_error = host_op(metrics.relative_error)
snr_db = host_op(metrics.snr_db)
