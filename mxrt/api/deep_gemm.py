"""DeepGEMM-compatible grouped FP8 GEMMs: DeepGEMM's names, argument order, shapes and semantics
(``deep_gemm/__init__.py`` and ``csrc/apis/gemm.hpp`` @ 54e2261; ../shared/spec/PEERS_MOE.md section 1), on mxrt's
grouped GEMMs. ``import mxrt.deep_gemm as deep_gemm`` switches a DeepGEMM caller.

Operands are ``(data, sf)`` pairs: fp8 codes (``float8_e4m3fn`` / ``float8_e5m2``; uint8 is read as e4m3) and their
scale factors in one of these recipes (``recipe`` / ``recipe_a`` / ``recipe_b`` pick the granularity where the shape
does not):

- DeepGEMM's Hopper recipe: float32 ``sfa [.., m, ceil(k/128)]`` (1x128) and ``sfb [G, ceil(n/128), ceil(k/128)]``
  (128x128), any values (``per_token_cast_to_fp8`` / ``per_block_cast_to_fp8``);
- UE8M0 bytes (uint8 or ``float8_e8m0fnu``) at 1x128 / 128x128, or MX 1x32: ``sfa [.., m, ceil(k/32)]``,
  ``sfb [G, n, ceil(k/32)]``;
- packed UE8M0 (int32, four bytes per int, little-endian, DeepGEMM's SM100 form) at the same granularities.

``d`` is written in place (numpy, torch CPU or CUDA tensors, CuPy), rows DeepGEMM does not compute are left untouched,
and the functions return None like DeepGEMM's. The numpy twin computes every group in float64 from the exactly
dequantized operands and rounds once. Device operands run the grouped kernels (mxrt.ops.grouped_gemm): on sm_90a the
contiguous / masked calls run the grouped engine (UE8M0 scales after an exact widening of coarser granularities to 1x32
on the device; DeepGEMM's float32 Hopper recipe, a 1x128, b 128x128, on its SCALE_F32 builds) and the k-grouped wgrad
the sm90_bf16 route (mxrt.ops.grouped_wgrad_bf16); elsewhere the generic kernel (its SCALE_F32 builds for float32
scales). A device psum layout is turned into per-row ids by device ops. ``compiled_dims``, ``expected_m`` and
``expected_m_for_psum_layout`` are tuning hints there and are only checked; ``disable_ue8m0_cast`` and
``ensure_zero_padding`` are accepted (float32 scales are always applied exactly, as DeepGEMM's SM90 path does).
"""

from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import numpy as np

from .._kinds import dtype_name, is_device_array
from ..config import grouped_gemm_kernel_override, grouped_plans_enabled
from ..errors import DtypeError, LayoutError, ShapeError, UnsupportedArchError, check_int
from ..formats import MXArray
from ..layouts._check import check_int_array
from ..layouts.groups import group_lens_from_psum
from ..problems.grouped_gemm import GroupedGemmProblem, _device_ints, _m_indices, _masked_m, grouped_gemm_problem
from ..reference.gemm import round_to
from ..reference.grouped_gemm import deepgemm_dequant
from ..runtime.graph_memory import graph_safe
from . import interop
from .grouped_gemm import run_grouped

# ---- call plans of the contiguous / masked calls on the grouped engine (the eager host time, session 16) -----------
# An eager call spent ~160-250 us of Python and CuPy on the host (operand checks, problem, route search, tensor maps,
# launch packing), more than the kernel of a small masked GEMM (~70-90 us on an H200). A call whose six arrays (a's
# and b's codes and scales, d, the ids / masked_m) are C-contiguous CuPy arrays, or CUDA torch tensors while both
# libraries are on the legacy default stream, is keyed by each array's pointer, dtype, shape and strides, the scalar
# arguments, MXRT_GROUPED_GEMM_KERNEL and the current device. The first call of a key runs the validated route; if
# that was exactly one grouped-engine launch whose every pointer is one of the six (no conversion, no e2m1
# expansion), the launch (kernel, configuration, packed arguments with raw pointers) is kept, and a later call of the
# key launches it again: no validation (other arrays are another key), no search, no set-up. MXRT_GROUPED_PLANS=0
# turns this off. Pointers are keys, so a plan never reads a freed buffer through a stale one: a new buffer at the same
# address with the same layout is the same call.
_PLANS: dict = {}
_PLANS_KEPT = 256


def clear_plans() -> None:
    """Forget the DeepGEMM calls' launch plans (tests)."""
    _PLANS.clear()


def _raw_key(x: Any) -> tuple | None:
    """``(kind, pointer, dtype, shape, strides, device)`` of a C-contiguous CuPy array or CUDA torch tensor, or
    None."""
    if is_device_array(x) and type(x).__module__.startswith("cupy"):
        if not x.flags.c_contiguous:
            return None
        return ("c", x.data.ptr, x.dtype.str, x.shape, x.strides, x.data.device_id)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor) and x.is_cuda and x.is_contiguous():
        return ("t", x.data_ptr(), x.dtype, tuple(x.shape), x.stride(), x.get_device())
    return None


def _call_key(op: str, arrays: tuple, extra: tuple) -> tuple | None:
    """The plan key of one call (None: no plan, the validated route runs)."""
    if not grouped_plans_enabled():
        return None
    parts = []
    for x in arrays:
        try:
            k = _raw_key(x)
        except AttributeError:  # an array-like without CuPy's / torch's full surface: validation says what it is
            return None
        if k is None or (parts and k[0] != parts[0][0]):
            return None
        parts.append(k)
    if parts[0][0] == "t":
        from ..runtime.arrays import torch_on_legacy_streams

        if not torch_on_legacy_streams(sys.modules["torch"], parts[0][5]):
            return None
    import cupy

    return (op, *parts, extra, grouped_gemm_kernel_override(), cupy.cuda.runtime.getDevice())


def _plan_of(op: str, a: Any, b: Any, rest: tuple, extra: tuple) -> tuple[tuple | None, tuple]:
    """``(key, arrays)`` of a call with pairs ``a`` / ``b`` and the arrays ``rest`` (d, then the group description)."""
    if not (type(a) in (tuple, list) and type(b) in (tuple, list) and len(a) == 2 and len(b) == 2):
        return None, ()
    arrays = (a[0], a[1], b[0], b[1], *rest)
    try:
        hash(extra)
    except TypeError:  # list-valued recipes: validation reads them, no plan
        return None, arrays
    return _call_key(op, arrays, extra), arrays


def _planned(op: str, key: tuple | None) -> bool:
    """Launch the plan of ``key`` (True), or say there is none (False)."""
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        return False
    from ..runtime.launch import launch

    launch(op, *plan)
    return True


def _keep(key: tuple | None, launches: list, arrays: tuple) -> None:
    """After the first call of ``key``: keep its launch if it was one engine launch on exactly the call's arrays."""
    if key is None or len(launches) != 1:
        return
    kernel, cfg, args, maps = launches[0]
    ptrs = {k[1] for k in key[1 : 1 + len(arrays)]}
    arg_ptrs = [int(x) for x in args if isinstance(x, np.uint64)]
    if None in maps or not set(maps) <= ptrs or not set(arg_ptrs) <= ptrs:
        return
    if len(_PLANS) >= _PLANS_KEPT:
        _PLANS.clear()
    _PLANS[key] = (kernel, cfg, args)


#: DeepGEMM's contiguous-layout M alignment (``get_mk_alignment_for_contiguous_layout()`` off SM100).
MK_ALIGNMENT = 128
_FMT = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "uint8": "e4m3"}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _recipes(op: str, recipe: Any, recipe_a: Any, recipe_b: Any) -> tuple[tuple | None, tuple | None]:
    """``((gran_mn_a, gran_k_a) | None, (gran_mn_b, gran_k_b) | None)`` from DeepGEMM's two spellings."""
    if recipe is not None and (recipe_a is not None or recipe_b is not None):
        raise ShapeError(f"{op}: argument 'recipe' and 'recipe_a'/'recipe_b' are both given, expected one form")
    if recipe is not None:
        r = _ints(op, "recipe", recipe, 3)
        return (r[0], r[2]), (r[1], r[2])
    ra = None if recipe_a is None else _ints(op, "recipe_a", recipe_a, 2)
    rb = None if recipe_b is None else _ints(op, "recipe_b", recipe_b, 2)
    return ra, rb


def _ints(op: str, name: str, v: Any, n: int) -> tuple[int, ...]:
    if not isinstance(v, (tuple, list)) or len(v) != n:
        raise DtypeError(f"{op}: argument '{name}' is {v!r}, expected a tuple of {n} ints")
    out = tuple(check_int(x, op, f"{name}[{i}]", minimum=1) for i, x in enumerate(v))
    if out[-1] not in (32, 128):
        raise ShapeError(f"{op}: argument '{name}' has gran_k = {out[-1]}, expected 32 (MX) or 128 (DeepGEMM)")
    return out


class _Operand:
    """One ``(data, sf)`` pair: codes uint8 ``[..., mn, k]``, the format, scales as stored, their kind
    (``"f32"``, ``"e8m0"``), and the granularity ``(gran_mn, gran_k)``."""

    def __init__(self, op: str, name: str, x: Any, ndim: int, recipe: tuple | None, caller_out: list) -> None:
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise DtypeError(f"{op}: argument '{name}' is a {type(x).__name__}, expected a pair (data, sf)")
        fmt = _FMT.get(str(getattr(x[0], "dtype", "")).removeprefix("torch."))
        data, caller = interop.import_array(x[0], op, f"{name}[0]")
        sf, _ = interop.import_array(x[1], op, f"{name}[1]")
        caller_out.append(caller)
        if fmt is None or not hasattr(data, "ndim"):
            raise DtypeError(
                f"{op}: {name}[0] (data) has dtype {getattr(x[0], 'dtype', type(x[0]).__name__)}, expected "
                "float8_e4m3fn, float8_e5m2 or uint8 (e4m3 codes)"
            )
        data = data if dtype_name(data.dtype) == "uint8" else data.view("uint8")
        if data.ndim != ndim:
            raise ShapeError(f"{op}: {name}[0] (data) has shape {tuple(data.shape)}, expected {ndim} dims")
        if not hasattr(sf, "ndim") or sf.ndim != ndim:
            raise ShapeError(
                f"{op}: {name}[1] (sf) has shape {tuple(getattr(sf, 'shape', ()))}, expected {ndim} dims "
                f"[..., ceil(mn / gran_mn), ceil(k / gran_k)]"
            )
        sdt = dtype_name(sf.dtype)
        if sdt == "float8_e8m0fnu":
            sf, sdt = sf.view("uint8"), "uint8"
        if sdt not in ("float32", "uint8", "int32"):
            raise DtypeError(
                f"{op}: {name}[1] (sf) has dtype {sdt}, expected float32, uint8 / float8_e8m0fnu (UE8M0 bytes) or "
                "int32 (packed UE8M0)"
            )
        if is_device_array(data) != is_device_array(sf):
            raise DtypeError(f"{op}: {name} mixes host and device arrays, expected both on one side")
        self.fmt, self.data, self.name = fmt, data, name
        mn, k = int(data.shape[-2]), int(data.shape[-1])
        self.mn, self.k = mn, k
        rows, cols = int(sf.shape[-2]), int(sf.shape[-1])
        if tuple(sf.shape[:-2]) != tuple(data.shape[:-2]):
            raise ShapeError(
                f"{op}: {name}[1] (sf) has shape {tuple(sf.shape)}, expected leading dims {data.shape[:-2]}"
            )
        per = 4 if sdt == "int32" else 1
        gk_options = (recipe[1],) if recipe else ((128,) if sdt == "float32" else (32, 128))
        gk = next((g for g in gk_options if cols == _cdiv(_cdiv(k, g), per)), None)
        mn_options = (recipe[0],) if recipe else ((1, 128) if name == "b" else (1,))
        gmn = next((g for g in mn_options if rows == _cdiv(mn, g)), None)
        if gk is None or gmn is None:
            raise ShapeError(
                f"{op}: {name}[1] (sf) has shape {tuple(sf.shape)} and dtype {sdt}, which fits no recipe for "
                f"{name}[0] of shape {tuple(data.shape)}: expected [..., ceil(mn / gran_mn), ceil(k / (gran_k"
                f"{' * 4' if per == 4 else ''}))] with gran_k in {list(gk_options)} and gran_mn in {list(mn_options)}"
            )
        if sdt == "int32":  # four UE8M0 bytes per int, the first in the low byte
            sf = sf.view("uint8").reshape(*sf.shape[:-1], 4 * cols)[..., : _cdiv(k, gk)]
            sdt = "uint8"
        self.sf, self.kind, self.gran = sf, ("f32" if sdt == "float32" else "e8m0"), (gmn, gk)
        self.device = is_device_array(data)

    def f64(self) -> np.ndarray:
        """The operand in float64 (host)."""
        sf = np.asarray(self.sf)
        values = sf if self.kind == "f32" else np.ldexp(1.0, sf.astype(np.int64) - 127)
        if self.kind == "e8m0":
            values = np.where(sf == 0xFF, np.nan, values)
        return deepgemm_dequant(np.asarray(self.data), self.fmt, values, *self.gran)

    def mx(self) -> tuple[Any, Any, str]:
        """Raw MX pieces ``(codes [rows, k], E8M0 scales [rows, ceil(k/32)], fmt)``, rows = the flattened leading
        dims; coarser UE8M0 granularities are widened exactly (device ops for CuPy, no synchronisation)."""
        gmn, gk = self.gran
        s = self.sf
        if gk == 128:
            s = s.repeat(4, axis=-1)[..., : _cdiv(self.k, 32)]
        if gmn > 1:
            s = s.repeat(gmn, axis=-2)[..., : self.mn, :]
        xp = _xp(s)
        s = xp.ascontiguousarray(s)
        data = xp.ascontiguousarray(self.data)
        return data.reshape(-1, self.k), s.reshape(-1, s.shape[-1]), self.fmt


def _xp(x: Any) -> Any:
    if is_device_array(x):
        import cupy

        return cupy
    return np


def _check_d(op: str, d: Any, shape: tuple[int, ...], dtype: str) -> tuple[Any, Any]:
    native, caller = interop.import_array(d, op, "d")
    if not hasattr(native, "dtype") or dtype_name(native.dtype) not in (
        dtype,
        "uint16" if dtype == "bfloat16" else dtype,
    ):
        raise DtypeError(f"{op}: argument 'd' has dtype {getattr(native, 'dtype', None)}, expected {dtype}")
    if tuple(native.shape) != shape:
        raise ShapeError(f"{op}: argument 'd' has shape {tuple(native.shape)}, expected {shape}")
    if isinstance(native, np.ndarray) and not native.flags.writeable:
        raise ShapeError(f"{op}: argument 'd' is read-only, expected a writeable array (written in place)")
    if not native.flags.c_contiguous:
        raise LayoutError(f"{op}: argument 'd' has strides {native.strides}, expected a C-contiguous array")
    return native, caller


def _pair(op: str, a: Any, b: Any, a_ndim: int, recipe: Any, recipe_a: Any, recipe_b: Any) -> tuple[_Operand, _Operand]:
    ra, rb = _recipes(op, recipe, recipe_a, recipe_b)
    callers: list = []
    qa, qb = _Operand(op, "a", a, a_ndim, ra, callers), _Operand(op, "b", b, 3, rb, callers)
    if qa.k != qb.k:
        raise ShapeError(f"{op}: a has k = {qa.k} but b has k = {qb.k}, expected equal K")
    if qa.device != qb.device:
        raise DtypeError(f"{op}: a and b live on different sides (host and device), expected one side")
    if (qa.kind == "f32") != (qb.kind == "f32"):
        raise DtypeError(f"{op}: a's scale factors are {qa.kind} but b's are {qb.kind}, expected one kind for both")
    return qa, qb


def _k128_problem(op: str, qa: _Operand, qb: _Operand, groups: Any, kind: str, out: Any, max_m: int) -> Any:
    """DeepGEMM's granularity (a 1x128, b 128x128) with UE8M0 bytes on device operands as one problem for the grouped
    engine's per-128 build (one promotion per 128 K, wide where a byte leaves the fast window), or None where the
    engine does not take it (another target, a forced kernel, its envelope): then the scales are widened to 1x32."""
    if not (qa.device and qa.kind == "e8m0" and qa.gran == (1, 128) and qb.gran == (128, 128)):
        return None
    from ..ops import grouped_gemm as grouped_ops
    from ..ops.grouped_gemm_kernels import GEMM_MX_GROUPED_SM90_WS
    from ..runtime.arch import get_arch

    xp = _xp(qa.sf)
    g = int(qb.data.shape[0])

    def operand(q: _Operand, rows: int) -> MXArray:
        sf = xp.ascontiguousarray(q.sf)
        return MXArray(xp.ascontiguousarray(q.data).reshape(-1, q.k), sf.reshape(-1, sf.shape[-1]), q.fmt, 32, 1,
                       (rows, q.k), "given")  # fmt: skip

    size = g if kind == "masked" else out.shape[0]
    grp = _device_ints(groups, op, "masked_m" if kind == "masked" else "grouped_layout", size)
    p = GroupedGemmProblem(
        op, kind, g, out.shape[0], qb.mn, qa.k, operand(qa, out.shape[0]), operand(qb, g * qb.mn), qa.fmt, qb.fmt,
        grp, max_m, 0, np.dtype(ml_dtypes.bfloat16), out, False, True, sf_gmn_b=128, sf_k128=True,
    )  # fmt: skip
    try:
        takes = grouped_ops.choose_kernel(p, get_arch().target) is GEMM_MX_GROUPED_SM90_WS
    except UnsupportedArchError:  # a forced kernel that cannot run it: the widened problem says so
        takes = False
    return p if takes else None


def _run_mx(op: str, qa: _Operand, qb: _Operand, groups: Any, kind: str, d_native: Any, d: Any, max_m: int = 0) -> None:
    out = d_native.reshape(-1, d_native.shape[-1])
    p = _k128_problem(op, qa, qb, groups, kind, out, max_m)
    if p is not None:
        run_grouped(p, "auto", interop.HOST, out, out)
        return
    gb = qb.mx()
    b3 = (gb[0].reshape(-1, qb.mn, qb.k), gb[1].reshape(-1, qb.mn, gb[1].shape[-1]), gb[2])
    p = grouped_gemm_problem(qa.mx(), b3, groups, kind=kind, out=out, max_m=max_m, op=op)
    run_grouped(p, "auto", interop.HOST, out, out)


def _run_f32(
    op: str, qa: _Operand, qb: _Operand, rows_of_group: Any, d_native: Any, kind: str, groups: Any, max_m: int = 0
) -> None:
    """float32 scales: the GPU kernel's SCALE_F32 build for device operands (DeepGEMM's Hopper recipe, a 1x128,
    b 128x128), else the host float64 twin over ``rows_of_group()``."""
    out = d_native.reshape(-1, d_native.shape[-1])
    if qa.device:
        if qa.gran != (1, 128) or qb.gran != (128, 128):
            raise UnsupportedArchError(
                f"{op}: float32 scale factors run on the GPU in DeepGEMM's Hopper recipe only (a 1x128, b 128x128); "
                f"got a {qa.gran[0]}x{qa.gran[1]}, b {qb.gran[0]}x{qb.gran[1]}"
            )
        xp = _xp(qa.sf)
        g = int(qb.data.shape[0])
        a = MXArray(
            xp.ascontiguousarray(qa.data).reshape(-1, qa.k),
            xp.ascontiguousarray(qa.sf).reshape(-1, qa.sf.shape[-1]),
            qa.fmt,
            32,
            1,
            (out.shape[0], qa.k),
            "given",
        )
        b = MXArray(
            xp.ascontiguousarray(qb.data).reshape(-1, qb.k),
            xp.ascontiguousarray(qb.sf).reshape(-1, qb.sf.shape[-1]),
            qb.fmt,
            32,
            1,
            (g * qb.mn, qb.k),
            "given",
        )
        size = g if kind == "masked" else out.shape[0]
        grp = _device_ints(groups, op, "masked_m" if kind == "masked" else "grouped_layout", size)
        p = GroupedGemmProblem(
            op, kind, g, out.shape[0], qb.mn, qa.k, a, b, qa.fmt, qb.fmt, grp, max_m, 0,
            np.dtype(ml_dtypes.bfloat16), out, False, True, scale_f32=True, sf_gmn_b=128,
        )  # fmt: skip
        run_grouped(p, "auto", interop.HOST, out, out)
        return
    A = qa.f64().reshape(-1, qa.k)
    B = qb.f64()
    with np.errstate(over="ignore", invalid="ignore"):
        for g, rows in rows_of_group():
            if rows.size:
                out[rows] = round_to(A[rows] @ B[g].T, out.dtype)


@graph_safe
def m_grouped_fp8_gemm_nt_contiguous(
    a: Any,
    b: Any,
    d: Any,
    grouped_layout: Any,
    recipe: Any = None,
    recipe_a: Any = None,
    recipe_b: Any = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
    use_psum_layout: bool = False,
    ensure_zero_padding: bool = True,
    expected_m_for_psum_layout: Any = None,
) -> None:
    """DeepGEMM ``m_grouped_fp8_gemm_nt_contiguous``: ``d[i] = a[i] @ b[grouped_layout[i]].T`` (bf16), in place.

    Parameters
    ----------
    a : ``(data [m, k], sf)``; b : ``(data [G, n, k], sf)`` (module docstring for the scale recipes).
    d : bfloat16 ``[m, n]``, written in place; rows of id -1 (and psum gaps) are left untouched.
    grouped_layout : int32 ``[m]`` group id per row, -1 for padding rows (:func:`mxrt.contiguous_m_indices`); with
        ``use_psum_layout``: int32 ``[G]`` end offsets, group g on rows ``[align(end[g-1], 128), end[g])``
        (:func:`mxrt.contiguous_psum_layout`).
    recipe, recipe_a, recipe_b : DeepGEMM's granularity spellings ``(gran_mn_a, gran_mn_b, gran_k)`` or ``(gran_mn,
        gran_k)`` per operand; default from the scale shapes (float32: 1x128 / 128x128).
    compiled_dims, disable_ue8m0_cast, ensure_zero_padding, expected_m_for_psum_layout : accepted for
        compatibility (DeepGEMM tuning and SM100 conversion flags); float32 scales are always applied exactly.

    Notes
    -----
    DeepGEMM requires every 128-row block to hold one group; mxrt computes any per-row ids (a tile holding several
    groups runs once per group) and skips ids outside ``[0, G)`` on the device (the host path raises).
    """
    op = "m_grouped_fp8_gemm_nt_contiguous"
    extra = (recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, ensure_zero_padding, use_psum_layout,
             expected_m_for_psum_layout)  # fmt: skip
    key, arrays = _plan_of(op, a, b, (d, grouped_layout), extra) if not use_psum_layout else (None, ())
    if _planned(op, key):
        return
    from ..ops.grouped_gemm_sm90_ws import recording

    with recording([]) as launches:
        _contiguous(op, a, b, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
                    ensure_zero_padding, use_psum_layout, expected_m_for_psum_layout)  # fmt: skip
    _keep(key, launches, arrays)


def _contiguous(
    op: str, a: Any, b: Any, d: Any, grouped_layout: Any, recipe: Any, recipe_a: Any, recipe_b: Any,
    compiled_dims: Any, disable_ue8m0_cast: Any, ensure_zero_padding: Any, use_psum_layout: Any,
    expected_m_for_psum_layout: Any,
) -> None:  # fmt: skip
    _flags(op, compiled_dims, disable_ue8m0_cast, ensure_zero_padding, use_psum_layout)
    if expected_m_for_psum_layout is not None:
        if not use_psum_layout:
            raise ShapeError(f"{op}: argument 'expected_m_for_psum_layout' is only legal with use_psum_layout=True")
        check_int(expected_m_for_psum_layout, op, "expected_m_for_psum_layout", minimum=0)
    qa, qb = _pair(op, a, b, 2, recipe, recipe_a, recipe_b)
    g = int(qb.data.shape[0])
    d_native, _ = _check_d(op, d, (qa.mn, qb.mn), "bfloat16")
    layout, _ = interop.import_array(grouped_layout, op, "grouped_layout")
    if use_psum_layout:
        ids = _psum_to_ids(op, layout, g, qa.mn) if not is_device_array(layout) else _psum_ids_device(layout, g, qa.mn)
    else:
        ids = layout
    if qa.kind == "f32":

        def rows() -> list:
            ids_h = _host_ids(op, ids, g, qa.mn)
            return [(i, np.nonzero(ids_h == i)[0]) for i in range(g)]

        _run_f32(op, qa, qb, rows, d_native, "indices", ids)
    else:
        _run_mx(op, qa, qb, ids, "indices", d_native, d)


@graph_safe
def m_grouped_fp8_gemm_nt_masked(
    a: Any,
    b: Any,
    d: Any,
    masked_m: Any,
    expected_m: Any,
    recipe: Any = None,
    recipe_a: Any = None,
    recipe_b: Any = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
) -> None:
    """DeepGEMM ``m_grouped_fp8_gemm_nt_masked``: ``d[g, :masked_m[g]] = a[g, :masked_m[g]] @ b[g].T`` (bf16).

    ``a = (data [G, max_m, k], sf [G, max_m, ..])``, ``b = (data [G, n, k], sf)``, ``d`` bfloat16 ``[G, max_m, n]``
    (rows at or past ``masked_m[g]`` untouched), ``masked_m`` int32 ``[G]`` in ``[0, max_m]`` (a device array with
    device operands, read on the device: the CUDA-graph decode path), ``expected_m`` an int hint (checked only).
    """
    op = "m_grouped_fp8_gemm_nt_masked"
    key, arrays = _plan_of(op, a, b, (d, masked_m), (expected_m, recipe, recipe_a, recipe_b, compiled_dims,
                                                    disable_ue8m0_cast))  # fmt: skip
    if _planned(op, key):
        return
    from ..ops.grouped_gemm_sm90_ws import recording

    with recording([]) as launches:
        _masked(op, a, b, d, masked_m, expected_m, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast)
    _keep(key, launches, arrays)


def _masked(
    op: str, a: Any, b: Any, d: Any, masked_m: Any, expected_m: Any, recipe: Any, recipe_a: Any, recipe_b: Any,
    compiled_dims: Any, disable_ue8m0_cast: Any,
) -> None:  # fmt: skip
    _flags(op, compiled_dims, disable_ue8m0_cast, True, False)
    check_int(expected_m, op, "expected_m", minimum=0)
    qa, qb = _pair(op, a, b, 3, recipe, recipe_a, recipe_b)
    g, max_m = int(qb.data.shape[0]), qa.mn
    if int(qa.data.shape[0]) != g:
        raise ShapeError(f"{op}: a has {qa.data.shape[0]} groups but b has {g}, expected equal G")
    d_native, _ = _check_d(op, d, (g, max_m, qb.mn), "bfloat16")
    mm, _ = interop.import_array(masked_m, op, "masked_m")
    if qa.kind == "f32":

        def rows() -> list:
            mmh = _masked_m(op, mm, g, max_m)
            return [(i, i * max_m + np.arange(int(mmh[i]))) for i in range(g)]

        _run_f32(op, qa, qb, rows, d_native, "masked", mm, max_m)
    else:
        _run_mx(op, qa, qb, mm, "masked", d_native, d, max_m=max_m)


@graph_safe
def k_grouped_fp8_gemm_nt_contiguous(
    a: Any,
    b: Any,
    d: Any,
    ks: Any,
    grouped_layout: Any,
    c: Any = None,
    recipe: Any = (1, 1, 128),
    compiled_dims: str = "mn",
    use_psum_layout: bool = False,
) -> None:
    """DeepGEMM ``k_grouped_fp8_gemm_nt_contiguous`` (wgrad): ``d[g] = c[g] + a_g @ b_g.T`` in float32, in place.

    Parameters
    ----------
    a : ``(data, sf)``: data flat ``[sum(ks) * m]``, group g's ``[m, ks[g]]`` K-major block at offset ``sum(ks[:g])
        * m``; sf float32 or UE8M0 ``[m, sum(ks) / gran_k]`` (group g's columns from ``sum(ks[:g]) / gran_k``).
    b : the same with n.
    d : float32 ``[G, m, n]``, written in place. c : optional float32 ``[G, m, n]`` added (DeepGEMM SM90 requires
        it; None adds nothing; ``c`` may be ``d`` itself).
    ks : host list of the groups' K (DeepGEMM's ``ks_cpu``), each a multiple of ``gran_k``. grouped_layout : int32
        ``[G]``, the same ks (the GPU kernel reads this one; on the host it is checked against ``ks``).
    recipe : ``(1, 1, gran_k)``, gran_k 128 (DeepGEMM) or 32 (MX).

    Device operands on sm_90a run the ``sm90_bf16`` route (mxrt/ops/grouped_wgrad_bf16.py: the groups' blocks laid
    out as bf16 ``[mn, sum(ks)]`` by one pass, then bf16 wgmmas with fp32 accumulation: float32 scales applied per
    128 columns to a partial computed in the tensor core, UE8M0 folded into the operands exactly; blocks outside
    the exact window go to the generic kernel), elsewhere the generic kernel (MODE 4); host operands the float64
    twin.
    """
    op = "k_grouped_fp8_gemm_nt_contiguous"
    _flags(op, compiled_dims, False, True, use_psum_layout)
    if use_psum_layout:
        raise UnsupportedArchError(f"{op}: use_psum_layout is not supported (DeepGEMM's SM90 path has none either)")
    r = _ints(op, "recipe", recipe, 3)
    if r[0] != 1 or r[1] != 1:
        raise ShapeError(f"{op}: argument 'recipe' is {recipe!r}, expected (1, 1, gran_k) (per-channel scales)")
    gk = r[2]
    kl = check_int_array(ks, op, "ks", ndim=1).astype(np.int64)
    if kl.size and (kl.min() < 0 or (kl % gk).any()):
        raise ShapeError(f"{op}: argument 'ks' is {kl.tolist()}, expected lengths >= 0 and multiples of {gk}")
    g, total = kl.size, int(kl.sum())
    lay, _ = interop.import_array(grouped_layout, op, "grouped_layout")
    pieces = []
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise DtypeError(f"{op}: argument '{name}' is a {type(x).__name__}, expected a pair (data, sf)")
        fmt = _FMT.get(str(getattr(x[0], "dtype", "")).removeprefix("torch."))
        data, _ = interop.import_array(x[0], op, f"{name}[0]")
        sf, _ = interop.import_array(x[1], op, f"{name}[1]")
        if fmt is None or not hasattr(data, "ndim"):
            raise DtypeError(f"{op}: {name}[0] (data) has dtype {getattr(x[0], 'dtype', None)}, expected fp8 codes")
        if not hasattr(sf, "ndim"):
            raise DtypeError(f"{op}: {name}[1] (sf) is a {type(sf).__name__}, expected an array")
        if is_device_array(data) != is_device_array(sf):
            raise DtypeError(f"{op}: {name} mixes host and device arrays, expected both on one side")
        data = data if dtype_name(data.dtype) == "uint8" else data.view("uint8")
        if data.ndim != 1 or (total and data.size % total) or (not total and data.size):
            raise ShapeError(
                f"{op}: {name}[0] has shape {tuple(data.shape)}, expected a flat [sum(ks) * mn] = [{total} * mn]"
            )
        mn = data.size // total if total else (int(sf.shape[0]) if sf.ndim == 2 else 0)
        sf = sf.view("uint8") if dtype_name(sf.dtype) == "float8_e8m0fnu" else sf
        if dtype_name(sf.dtype) not in ("float32", "uint8") or tuple(sf.shape) != (mn, total // gk):
            raise ShapeError(
                f"{op}: {name}[1] (sf) is {sf.dtype}{tuple(sf.shape)}, expected float32 or UE8M0 bytes of shape "
                f"{(mn, total // gk)} = [mn, sum(ks) / {gk}]"
            )
        pieces.append((data, sf, fmt, mn))
    (da, sa, fa, m), (db, sb, fb, n) = pieces
    if (dtype_name(sa.dtype) == "float32") != (dtype_name(sb.dtype) == "float32"):
        raise DtypeError(f"{op}: a's and b's scale factors are of different kinds, expected one kind for both")
    device = is_device_array(da)
    if device != is_device_array(db):
        raise DtypeError(f"{op}: a and b live on different sides (host and device), expected one side")
    d_native, _ = _check_d(op, d, (g, m, n), "float32")
    c_native = None if c is None else _check_d(op, c, (g, m, n), "float32")[0]
    if device:
        _k_grouped_gpu(op, (da, sa, fa), (db, sb, fb), d_native, c_native, lay, g, m, n, total, gk)
        return
    if is_device_array(lay):
        raise DtypeError(f"{op}: argument 'grouped_layout' is a CuPy array but a and b are host arrays")
    lay = check_int_array(lay, op, "grouped_layout", ndim=1)
    if lay.size != kl.size or not np.array_equal(lay.astype(np.int64), kl):
        raise LayoutError(f"{op}: argument 'grouped_layout' is {lay.tolist()}, expected ks = {kl.tolist()}")

    def values(sf: np.ndarray) -> np.ndarray:
        return sf.astype(np.float64) if sf.dtype == np.float32 else np.ldexp(1.0, sf.astype(np.int64) - 127)

    sa, sb = values(np.asarray(sa)), values(np.asarray(sb))
    da, db = np.asarray(da), np.asarray(db)
    res = np.zeros((g, m, n), np.float64) if c_native is None else np.asarray(c_native, np.float64).copy()
    start = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for i, kk in enumerate(int(v) for v in kl):
            if kk:
                cols = slice(start // gk, (start + kk) // gk)
                ai = deepgemm_dequant(da[start * m : (start + kk) * m].reshape(m, kk), fa, sa[:, cols], 1, gk)
                bi = deepgemm_dequant(db[start * n : (start + kk) * n].reshape(n, kk), fb, sb[:, cols], 1, gk)
                res[i] += ai @ bi.T
            start += kk
    d_native[...] = res.astype(np.float32)


def _k_grouped_gpu(
    op: str, a: tuple, b: tuple, d: Any, c: Any, ks_dev: Any, g: int, m: int, n: int, total: int, gk: int
) -> None:
    """The device path of the k-grouped wgrad: kernel MODE 4 (float32 1x128 scales, or UE8M0 widened to 1x32)."""
    xp = _xp(a[0])
    f32 = dtype_name(a[1].dtype) == "float32"
    if f32 and gk != 128:
        raise UnsupportedArchError(f"{op}: float32 scale factors run on the GPU with gran_k 128 only (got {gk})")
    if not is_device_array(ks_dev):
        raise DtypeError(f"{op}: argument 'grouped_layout' is a host array but a and b are CuPy arrays")
    ks_dev = _device_ints(ks_dev, op, "grouped_layout", g)

    def operand(x: tuple, rows: int) -> MXArray:
        sf = x[1]
        if not f32 and gk == 128:  # UE8M0 per 128: widened to one byte per 32 (exact)
            sf = sf.repeat(4, axis=1)
        return MXArray(xp.ascontiguousarray(x[0]).reshape(rows, total), xp.ascontiguousarray(sf), x[2], 32, 1,
                       (rows, total), "given")  # fmt: skip

    if c is not None and not _same_memory(c, d):
        d[...] = c  # a device copy; the kernel then adds onto d
    p = GroupedGemmProblem(
        op, "kgrouped", g, m, n, total, operand(a, m), operand(b, n), a[2], b[2], ks_dev, 0, 0, np.dtype(np.float32),
        d, c is not None, True, scale_f32=f32, sf_gmn_b=1,
    )  # fmt: skip
    run_grouped(p, "auto", interop.HOST, d, d)


def _same_memory(x: Any, y: Any) -> bool:
    try:
        return x.data.ptr == y.data.ptr and x.shape == y.shape
    except AttributeError:
        return x is y


def _flags(op: str, compiled_dims: Any, disable_ue8m0_cast: Any, ensure_zero_padding: Any, use_psum: Any) -> None:
    if not isinstance(compiled_dims, str) or not set(compiled_dims) <= set("mnk"):
        raise DtypeError(f"{op}: argument 'compiled_dims' is {compiled_dims!r}, expected a string of 'm', 'n', 'k'")
    for name, v in (
        ("disable_ue8m0_cast", disable_ue8m0_cast),
        ("ensure_zero_padding", ensure_zero_padding),
        ("use_psum_layout", use_psum),
    ):
        if not isinstance(v, (bool, np.bool_)):
            raise DtypeError(f"{op}: argument '{name}' is {v!r}, expected a bool")


def _host_ids(op: str, ids: Any, g: int, m: int) -> np.ndarray:
    return _m_indices(op, ids, g, m)


def _psum_ids_device(psum: Any, g: int, m: int) -> Any:
    """Per-row ids of a device psum layout with device ops only (no synchronisation): row r belongs to the first
    group j with end[j] > r when r >= align(end[j-1], 128), else -1. An inconsistent layout maps rows by the same
    rule (never an out-of-range id); the host path checks it and raises instead."""
    xp = _xp(psum)
    if psum.ndim != 1 or int(psum.shape[0]) != g:
        raise ShapeError(f"m_grouped_fp8_gemm_nt_contiguous: argument 'grouped_layout' has shape {tuple(psum.shape)}, "
                         f"expected ({g},) end offsets")  # fmt: skip
    if g == 0:
        return xp.full(m, -1, dtype=xp.int32)
    end = psum.astype(xp.int64)
    prev = xp.concatenate([xp.zeros(1, dtype=xp.int64), end[:-1]])
    start = (prev + (MK_ALIGNMENT - 1)) // MK_ALIGNMENT * MK_ALIGNMENT
    r = xp.arange(m, dtype=xp.int64)
    j = xp.searchsorted(end, r, side="right")
    jc = xp.minimum(j, g - 1)
    ok = (j < g) & (r >= start[jc])
    return xp.where(ok, jc, -1).astype(xp.int32)


def _psum_to_ids(op: str, psum: Any, g: int, m: int) -> np.ndarray:
    """Per-row ids of DeepGEMM's psum layout: group j on rows ``[align(end[j-1], 128), end[j])``, gaps -1."""
    end = check_int_array(psum, op, "grouped_layout", ndim=1)
    if end.size != g:
        raise ShapeError(f"{op}: argument 'grouped_layout' has {end.size} end offsets, expected G = {g}")
    try:
        lens = group_lens_from_psum(end, MK_ALIGNMENT)
    except (LayoutError, ShapeError) as e:
        raise type(e)(f"{op}: argument 'grouped_layout' (psum): {e}") from None
    if end.size and int(end.max()) > m:
        raise ShapeError(f"{op}: argument 'grouped_layout' ends at {int(end.max())}, past a's {m} rows")
    ids = np.full(m, -1, np.int32)
    for j in range(g):
        ids[int(end[j]) - int(lens[j]) : int(end[j])] = j
    return ids


__all__ = [
    "MK_ALIGNMENT",
    "k_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
]
