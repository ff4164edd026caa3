"""Split-K accumulation shared by the GEMM paths: the three ways a path's kernel writes its result, and the reduce
kernel (kernels_src/gemm/gemm_mx_splitk_reduce.hip) that finishes two of them.

- ``split_k == 1``: one launch stores ``out`` directly (any dtype).
- deterministic split-K: split z writes the fp32 slice ``ws[z]`` of a ``[split_k, m, n]`` workspace (CuPy pool),
  then the reduce kernel sums the slices in split order and converts: bitwise identical across runs.
- atomic split-K (``deterministic=False``): ``out`` is zeroed on the stream, then every split adds into it: fp32
  atomics, or packed bf16x2 / f16x2 atomics for 16-bit outputs. A 16-bit ``out`` that is not 4-byte aligned or has
  an odd element count (a packed word would reach past ``out``) accumulates in an fp32 ``[m, n]`` workspace with
  fp32 atomics instead, converted by the reduce kernel.

A path supplies ``launch_gemm(dst, out_code, atomic)``: one launch of its kernel over every split, writing ``dst``
(``dg.out``, or an fp32 workspace) in output dtype code ``out_code`` (codes.GEMM_OUT_DTYPE_CODES), adding
atomically when ``atomic``.

Under CUDA-graph capture the workspace comes from CuPy's pool during the capture: the captured graph refers to it
after the call returns, so keep the graph's replays before any other allocation that could reuse the block (as
for every pool-backed op), or use ``split_k = 1`` / atomic mode with an aligned ``out``, which allocate nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..runtime import alloc
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, PreparedLaunch, launch, prepare
from . import gemm_kernels
from .gemm_paths import DeviceGemm, PreparedGemm

_REDUCE_MAX_BLOCKS = 65535 * 8
F32 = codes.GEMM_OUT_DTYPE_CODES["float32"]


def workspace(shape: tuple[int, ...], zero: bool) -> Any:
    """An fp32 workspace from CuPy's pool (poisoned inside mxrt.runtime.debug(poison=...) unless ``zero``)."""
    return alloc.zeros(shape, np.float32) if zero else alloc.empty(shape, np.float32)


def _reduce_launch(dg: DeviceGemm, out_code: int) -> tuple[Any, LaunchConfig]:
    mn = dg.p.m * dg.p.n
    threads = gemm_kernels.GEMM_REDUCE_THREADS
    kernel = build(gemm_kernels.GEMM_MX_SPLITK_REDUCE, defines(OUT_DTYPE=out_code, THREADS=threads), dg.arch)
    return kernel, LaunchConfig(grid=(min(-(-mn // threads), _REDUCE_MAX_BLOCKS), 1, 1), block=(threads, 1, 1))


def launch_reduce(dg: DeviceGemm, ws: Any, splits: int, out_code: int) -> None:
    """``dg.out = convert(ws[0] + ... + ws[splits - 1])``, summed in split order."""
    kernel, cfg = _reduce_launch(dg, out_code)
    launch(dg.p.op, kernel, cfg, (ws, dg.out, np.uint64(dg.p.m * dg.p.n), np.uint32(splits)))


def run_split_k(dg: DeviceGemm, launch_gemm: Callable[[Any, int, bool], None]) -> None:
    """Run ``dg`` with the accumulation mode of its problem (module docstring); no host synchronisation."""
    p = dg.p
    out_code = codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)]
    if p.split_k == 1:
        launch_gemm(dg.out, out_code, False)
    elif p.deterministic:
        ws = workspace((p.split_k, p.m, p.n), zero=False)
        launch_gemm(ws, F32, False)
        launch_reduce(dg, ws, p.split_k, out_code)
    elif packed_atomics_fit(dg):
        dg.out.fill(0)
        launch_gemm(dg.out, out_code, True)
    else:  # a packed 16-bit word would reach outside out: fp32 atomics into a workspace, then convert
        ws = workspace((1, p.m, p.n), zero=True)
        launch_gemm(ws, F32, True)
        launch_reduce(dg, ws, 1, out_code)


def packed_atomics_fit(dg: DeviceGemm) -> bool:
    """Atomic mode can add into ``dg.out`` itself: fp32 out, or a 16-bit out whose packed words stay inside it."""
    p = dg.p
    return dtype_name(p.out_dtype) == "float32" or (dg.out.data.ptr % 4 == 0 and p.m * p.n % 2 == 0)


#: ``prepare_gemm(out_code, atomic)`` of a path: ``(g, launch)`` where ``g(a_ptr, b_ptr, sa_ptr, sb_ptr, dst_ptr)``
#: (device addresses of the codes, scales and destination) launches the path's kernel as
#: ``launch_gemm(dst, out_code, atomic)`` would, or None
PrepareGemm = Callable[[int, bool], "tuple[Callable[..., None], PreparedLaunch] | None"]


def prepare_split_k(dg: DeviceGemm, prepare_gemm: PrepareGemm) -> PreparedGemm | None:
    """The prepared form of :func:`run_split_k` for ``dg``'s plan: ``split_k == 1`` and deterministic split-K
    (workspace from the pool per call, as :func:`run_split_k`); None for atomic split-K (it stays on ``run``)."""
    p = dg.p
    out_code = codes.GEMM_OUT_DTYPE_CODES[dtype_name(p.out_dtype)]
    if p.split_k == 1:
        hit = prepare_gemm(out_code, False)
        if hit is None:
            return None
        g, pl = hit
        return PreparedGemm(g, (pl,))
    if not p.deterministic:
        return None
    hit = prepare_gemm(F32, False)
    if hit is None:
        return None
    g, pl = hit
    kernel, cfg = _reduce_launch(dg, out_code)
    red = prepare(p.op, kernel, cfg, (dg.out, dg.out, np.uint64(0), np.uint32(0)))
    if red is None:
        return None
    shape, mn, splits = (p.split_k, p.m, p.n), p.m * p.n, p.split_k

    def run(a_ptr: int, b_ptr: int, sa_ptr: int, sb_ptr: int, out_ptr: int) -> None:
        ws = workspace(shape, zero=False)  # from CuPy's pool, freed after the launches are queued (stream order)
        ws_ptr = ws.data.ptr
        g(a_ptr, b_ptr, sa_ptr, sb_ptr, ws_ptr)
        red(ws_ptr, out_ptr, mn, splits)

    return PreparedGemm(run, (pl, red))
