"""The GPU GEMM path registry: every GEMM kernel family (generic, sm90 wgmma, gfx950 MFMA-scale, gfx942 fp8
MFMA, ...) registers a :class:`GemmPath`; :func:`select_gemm_path` picks, per problem, the highest-priority path
of the device's target that supports it. Imports without cupy.

A path sees one :class:`DeviceGemm`: the validated :class:`~mxrt.problems.GemmProblem` plus the device buffers,
already checked (dtype, shape, C-contiguity), so ``supports`` only decides whether its kernel covers the case
(formats, alignment, out dtype, layouts, limits) and ``run`` only launches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import ENV_GEMM_PATH, gemm_path_override
from ..errors import UnsupportedArchError
from ..problems.gemm import GemmProblem


@dataclass(frozen=True, eq=False)
class DeviceGemm:
    """One GEMM ``out = a @ b.T`` on the device; every array is a CuPy array on the current device.

    Attributes
    ----------
    p : the validated problem (m, n, k, a_fmt, b_fmt, out_dtype, split_k, deterministic, k_ranges, layouts).
    a_codes, b_codes : uint8, C-contiguous, ``[rows, k]`` (fp8) or ``[rows, ceil(k/2)]`` (packed e2m1, even k in
        the low nibble); with ``p.b_weight_layout`` set, ``b_codes`` is that layout's buffer
        (:func:`mxrt.preshuffle_weight`), which only a path listing the layout in ``weight_layouts`` is offered.
    a_scales, b_scales : uint8 E8M0, C-contiguous: row-major ``[rows, ceil(k/32)]`` when the problem's
        ``*_scale_layout`` is None, else the preshuffled storage that :func:`mxrt.preshuffle_scales` returns.
    out : ``[m, n]`` of ``p.out_dtype``, C-contiguous; its content is undefined on entry and the path writes
        every element.
    arch : the device's :class:`mxrt.runtime.Arch`.
    """

    p: GemmProblem
    a_codes: Any
    b_codes: Any
    a_scales: Any
    b_scales: Any
    out: Any
    arch: Any


@dataclass(frozen=True, eq=False)
class PreparedGemm:
    """What a path's ``prepare`` returns: ``run(a_ptr, b_ptr, sa_ptr, sb_ptr, out_ptr)`` (the device addresses of
    the codes, scales and result) does what ``path.run`` does for any buffers of the same plan key
    (:mod:`mxrt.api.gemm`: same dtypes, shapes, strides, 16-byte alignment, device; a C-contiguous result of the
    plan's dtype), with everything but the pointers computed once. ``launches``: its prepared launches."""

    run: Callable[[Any, Any, Any, Any, Any], None]
    launches: tuple[Any, ...]

    def usable(self) -> bool:
        """False when the driver route is switched off (``MXRT_LAUNCH``) or another device is current (the
        launches of one plan share both, so the first one answers)."""
        return self.launches[0].usable()


@dataclass(frozen=True)
class GemmPath:
    """A GEMM kernel family.

    name : unique, e.g. ``"generic"``, ``"sm90_wgmma"``.
    target : the compile target it runs on (``"sm_90a"``, ``"gfx950"``, ...) or ``"generic"`` (any GPU).
    priority : higher wins among the paths that support a problem.
    supports : ``fn(dg) -> None`` when the path can run ``dg``, else a short reason. No device work.
    run : ``fn(dg) -> None`` launches on CuPy's current stream and writes ``dg.out``; no host synchronisation.
    prepare : optional ``fn(dg) -> PreparedGemm | None`` for the small-call plans: called after ``run(dg)``
        succeeded; None where the path has no prepared form for ``dg`` (then every call goes through ``run``).
    weight_layouts : the weight (b code) layouts its kernels read in place besides row-major; a problem with
        another ``b_weight_layout`` is never offered to it (:func:`select_gemm_path` declines centrally, so a path
        that knows nothing of weight layouts cannot read shuffled codes as row-major ones).
    """

    name: str
    target: str
    priority: int
    supports: Callable[[DeviceGemm], str | None]
    run: Callable[[DeviceGemm], None]
    prepare: Callable[[DeviceGemm], PreparedGemm | None] | None = None
    weight_layouts: tuple[str, ...] = ()


def weight_layout_reason(path: GemmPath, dg: DeviceGemm) -> str | None:
    """Why ``path`` may not see ``dg``'s weight codes (a layout it does not read in place), or None."""
    wl = dg.p.b_weight_layout
    if wl is None or wl in path.weight_layouts:
        return None
    return f"reads row-major weight codes, not b_weight_layout={wl!r}"


_PATHS: dict[str, GemmPath] = {}


_GENERATION = [0]


def plans_generation() -> int:
    """A counter that changes whenever a path choice or a prepared launch made earlier may be stale (a path was
    registered, a tuned table reloaded): :mod:`mxrt.api.gemm`'s plans remember it and are dropped when it moved."""
    return _GENERATION[0]


def invalidate_plans() -> None:
    _GENERATION[0] += 1


def register_gemm_path(path: GemmPath) -> None:
    if path.name in _PATHS and _PATHS[path.name] != path:
        raise ValueError(f"register_gemm_path: a different path named {path.name!r} is already registered")
    if _PATHS.get(path.name) is not path:
        invalidate_plans()
    _PATHS[path.name] = path


_SORTED: dict[str | None, tuple[tuple[GemmPath, ...], list[GemmPath]]] = {}


def gemm_paths(target: str | None = None) -> list[GemmPath]:
    """Registered paths (those that run on ``target`` when given, generic ones included), best first."""
    registered = tuple(_PATHS.values())
    hit = _SORTED.get(target)
    if hit is not None and hit[0] == registered:  # sorted once per registry state (the small-GEMM dispatch)
        return list(hit[1])
    paths = [p for p in registered if target is None or p.target in ("generic", target)]
    out = sorted(paths, key=lambda p: (-p.priority, p.name))
    _SORTED[target] = (registered, out)
    return list(out)


def select_gemm_path(dg: DeviceGemm, name: str | None = None) -> GemmPath:
    """The path that runs ``dg``: ``name`` (or ``MXRT_GEMM_PATH``) when given, else the best supporting one.

    Raises UnsupportedArchError naming every candidate and why it declined.
    """
    name = name or gemm_path_override()
    target = dg.arch.target
    candidates = gemm_paths(target)
    if name is not None:
        forced = [p for p in candidates if p.name == name]
        if not forced:
            raise UnsupportedArchError(
                f"{dg.p.op}: GEMM path {name!r} (argument or {ENV_GEMM_PATH}) does not run on target {target!r}; "
                f"expected one of {[p.name for p in candidates]}"
            )
        candidates = forced
    reasons = []
    for path in candidates:
        why = weight_layout_reason(path, dg) or path.supports(dg)
        if why is None:
            return path
        reasons.append(f"{path.name}: {why}")
    raise UnsupportedArchError(
        f"{dg.p.op}: no GPU GEMM path for target {target!r} runs formats ({dg.p.a_fmt}, {dg.p.b_fmt}), "
        f"m={dg.p.m} n={dg.p.n} k={dg.p.k}, out {dg.p.out_dtype}: " + ("; ".join(reasons) or "none registered")
    )
