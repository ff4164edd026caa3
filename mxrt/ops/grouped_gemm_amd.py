"""The AMD grouped MX GEMM kernels (kernels_src/gemm/gemm_mx_grouped_gfx950.hip, gemm_mx_grouped_gfx942.hip): which
problems they take and their launch geometry. Imports without cupy; :mod:`mxrt.ops.grouped_gemm` launches them.

They run the dense AMD kernels' main loops (``gfx950_mfma_scale``, ``gfx942_mfma_fp8``: 128 x 128 CTA tiles, 256
threads) under the generic grouped kernel's device-side group schedule, with the generic kernel's argument list,
so one launch path serves all three. Covered: ``"lens"`` (forward / dgrad by ``group_lens``) and ``"wgrad"``
(variable K, plain or accumulating), every format pair of :data:`mxrt.problems.GEMM_FORMAT_PAIRS` (e4m3 / e5m2 /
e2m1), row-major scales. Everything else (DeepGEMM's indices / masked / k-grouped layouts, float32 scales) runs on
the generic kernel.
"""

from __future__ import annotations

from ..problems.grouped_gemm import GroupedGemmProblem
from ..runtime.launch import MAX_GRID_YZ
from .grouped_gemm_kernels import GEMM_MX_GROUPED_GFX942, GEMM_MX_GROUPED_GFX950, GROUPED_AMD_KINDS

KERNELS = {"gfx950": GEMM_MX_GROUPED_GFX950, "gfx942": GEMM_MX_GROUPED_GFX942}
TILE = (128, 128)  # rows x columns of a CTA's output tile (amd_gemm.h MXRT_GEMM_BM / BN)
_FMTS = ("e4m3", "e5m2", "e2m1")
_LIMIT = 2**31  # code buffers are read through 32-bit buffer offsets


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _row_bytes(fmt: str, k: int) -> int:
    return _cdiv(k, 2) if fmt == "e2m1" else k


def grid(p: GroupedGemmProblem) -> tuple[int, int, int]:
    """The launch grid from host-known sizes: ``"lens"`` ``(ceil(n/128), ceil(m/128) + G + 1, 1)`` (every group's
    row tiles fit in ``ceil(m/128) + G``, plus the tail tile), ``"wgrad"`` ``(ceil(n/128), ceil(m/128), G)``."""
    bm, bn = TILE
    if p.kind == "lens":
        return (_cdiv(p.n, bn), _cdiv(p.m, bm) + p.num_groups + 1, 1)
    return (_cdiv(p.n, bn), _cdiv(p.m, bm), p.num_groups)


def unsupported(target: str, p: GroupedGemmProblem) -> str | None:
    """Why the AMD grouped kernel of ``target`` does not run ``p`` (a short reason), or None when it does."""
    if target not in KERNELS:
        return f"no AMD grouped GEMM kernel for target {target!r}"
    if p.kind not in GROUPED_AMD_KINDS:
        return f"kind {p.kind!r}: the AMD grouped kernels run {GROUPED_AMD_KINDS} (the generic kernel the others)"
    if p.scale_f32:
        return "float32 scales (DeepGEMM's Hopper recipe) run on the generic kernel"
    if p.a_fmt not in _FMTS or p.b_fmt not in _FMTS:
        return f"formats ({p.a_fmt}, {p.b_fmt}) are not e4m3 / e5m2 / e2m1"
    kb = p.k if p.kind == "wgrad" else int(p.b.shape[1])
    a_bytes, b_bytes = p.m * _row_bytes(p.a_fmt, p.k), p.n * _row_bytes(p.b_fmt, kb)
    if a_bytes >= _LIMIT or b_bytes >= _LIMIT:
        return (
            f"a holds {a_bytes} code bytes, one group of b {b_bytes}: the kernel's 32-bit buffer offsets reach < 2^31"
        )
    g = grid(p)
    if g[1] > MAX_GRID_YZ or g[2] > MAX_GRID_YZ:
        return f"grid {g} beyond the y/z limit {MAX_GRID_YZ}"
    return None
