"""Shared pieces of the GPU GEMM tests and the sanitizer smoke script: operands, device copies, tolerances."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import mxrt
from mxrt.checks.gemm import calc_diff_limit
from mxrt.reference import calc_diff, relative_error

#: fp32 out: relative Frobenius error vs the float64 reference of the dequantized inputs
FP32_REL_LIMIT = 1e-5
#: bf16 / fp16 out: calc_diff vs that reference (one rounding); atomic 16-bit split-K rounds once per split
HALF_CALC_DIFF_LIMIT = 1e-5


def fake_device_gemm(
    *,
    m: int,
    n: int,
    k: int,
    a_fmt: str = "e4m3",
    b_fmt: str = "e4m3",
    out_dtype: str = "bfloat16",
    split_k: int = 1,
    deterministic: bool = True,
    layouts: tuple = (None, None),
    a_ptr: int = 1 << 20,
    b_ptr: int = 1 << 21,
    sa_ptr: int | None = None,
    sb_ptr: int | None = None,
    arch: Any = None,
    weight_layout: str | None = None,
) -> Any:
    """A :class:`mxrt.ops.gemm_paths.DeviceGemm` of stand-ins (no GPU): the problem fields a path's ``supports``
    reads and buffers that only carry an address (``sa_ptr`` / ``sb_ptr`` None: no scale buffers); ``arch``
    defaults to a bare sm_90a target."""
    from types import SimpleNamespace

    from mxrt.ops import gemm_paths

    def buf(addr: int | None) -> Any:
        return None if addr is None else SimpleNamespace(data=SimpleNamespace(ptr=addr), dtype=np.dtype(np.uint8))

    dt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32, "float64": np.float64}
    p = SimpleNamespace(
        op="gemm_mx",
        m=m,
        n=n,
        k=k,
        a_fmt=a_fmt,
        b_fmt=b_fmt,
        out_dtype=np.dtype(dt[out_dtype]),
        split_k=split_k,
        deterministic=deterministic,
        a_scale_layout=layouts[0],
        b_scale_layout=layouts[1],
        k_blocks=-(-k // 32),
        is_empty=m == 0 or n == 0 or k == 0,
        b_weight_layout=weight_layout,
    )
    arch = SimpleNamespace(target="sm_90a") if arch is None else arch
    return gemm_paths.DeviceGemm(p, buf(a_ptr), buf(b_ptr), buf(sa_ptr), buf(sb_ptr), None, arch)


def operands(m: int, n: int, k: int, fa: str, fb: str, seed: int):
    """Unquantized ``x [m, k]``, ``w [n, k]`` and their numpy MXArrays (RCEIL scales along K)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    return x, w, mxrt.quantize_mx(x, fa, backend="numpy"), mxrt.quantize_mx(w, fb, backend="numpy")


def to_device(q: mxrt.MXArray) -> mxrt.MXArray:
    import cupy

    return mxrt.MXArray(cupy.asarray(q.data), cupy.asarray(q.scales), q.fmt, 32, 1, q.shape, q.scale_mode)


def shuffled_weight(q: mxrt.MXArray, device: bool = True) -> tuple:
    """``q`` as raw pieces whose codes are in aiter's 16x16 weight layout (``gemm_mx(..., b_weight_layout=
    "aiter16x16")``): (preshuffled codes, row-major scales, fmt, k), on the GPU or the host."""
    codes = mxrt.preshuffle_weight(np.asarray(q.data), "aiter16x16")
    scales = np.asarray(q.scales)
    if device:
        import cupy

        codes, scales = cupy.asarray(codes), cupy.asarray(scales)
    return codes, scales, q.fmt, q.shape[1]


def host_result(d: Any, out_dtype: str) -> np.ndarray:
    """A GEMM result as float64 numpy (CuPy bf16 results are uint16 bits)."""
    h = d.get() if type(d).__module__.split(".", 1)[0] == "cupy" else np.asarray(d)
    if out_dtype == "bfloat16" and h.dtype == np.uint16:
        h = h.view(ml_dtypes.bfloat16)
    return h.astype(np.float64)


def check_result(got: Any, qa, qb, out_dtype: str, *, x=None, w=None, splits_rounded: int = 1) -> list[str]:
    """Problems of ``got`` against the float64 reference (and the unquantized product when x, w are given)."""
    ref = mxrt.reference.gemm_mx(qa, qb, out_dtype="float64")
    g = host_result(got, out_dtype)
    errs = []
    if g.shape != ref.shape:
        return [f"shape {g.shape} != {ref.shape}"]
    if not np.isfinite(g).all():
        errs.append(f"{int((~np.isfinite(g)).sum())} non-finite outputs")
    if out_dtype == "float32":
        e = relative_error(ref, g)
        if not e <= FP32_REL_LIMIT:
            errs.append(f"rel Frobenius {e:.3g} > {FP32_REL_LIMIT}")
    else:
        e, lim = calc_diff(g, ref), HALF_CALC_DIFF_LIMIT * splits_rounded
        if not e <= lim:
            errs.append(f"calc_diff {e:.3g} > {lim:.3g} vs dequantized")
    if x is not None and ref.size and np.abs(ref).sum() > 0:
        e, lim = calc_diff(g, x.astype(np.float64) @ w.astype(np.float64).T), calc_diff_limit(qa.fmt, qb.fmt)
        if not e <= lim:
            errs.append(f"calc_diff {e:.3g} > {lim:g} vs unquantized")
    return errs


def h100_arch() -> Any:
    """A fake sm_90a device (132 SMs) for the CPU tests of the Hopper paths' supports() and selection."""
    from mxrt.runtime.arch import Arch

    return Arch(vendor="nvidia", target="sm_90a", name="H100", wave_size=32, num_cus=132, smem_per_block=232448)


def sm90_device_gemm(m=4096, n=4096, k=4096, sa_ptr=1 << 22, sb_ptr=1 << 23, arch=None, **kw):
    """:func:`fake_device_gemm` on :func:`h100_arch` with aligned scale bases (the sm90 paths' decline tests)."""
    return fake_device_gemm(m=m, n=n, k=k, sa_ptr=sa_ptr, sb_ptr=sb_ptr, arch=arch or h100_arch(), **kw)


_OUT_STORAGE = {"bfloat16": "uint16", "float32": "float32", "float16": "float16"}


def run_path(path: Any, codes_a, sa, codes_b, sb, fa: str, fb: str, k: int, out_dtype: str,
             layouts: tuple = (None, None), **run_kw: Any) -> np.ndarray:  # fmt: skip
    """``path.run`` (a GEMM path module: ``supports`` / ``run``) on device copies of host codes and row-major scales
    (preshuffled on the device into ``layouts``), output poisoned first; the host float64 result."""
    import cupy

    from mxrt.ops import gemm_paths
    from mxrt.problems import gemm_problem

    def dev_scales(s, layout):
        d = cupy.asarray(s)
        return d if layout is None else mxrt.preshuffle_scales(d, layout)

    a = (cupy.asarray(codes_a), dev_scales(sa, layouts[0]), fa, k)
    b = (cupy.asarray(codes_b), dev_scales(sb, layouts[1]), fb, k)
    p = gemm_problem(a, b, out_dtype=out_dtype, a_scale_layout=layouts[0], b_scale_layout=layouts[1])
    out = cupy.empty((p.m, p.n), _OUT_STORAGE[out_dtype])
    out.view(cupy.uint8).fill(0xFF)
    dg = gemm_paths.DeviceGemm(p, a[0], b[0], a[1], b[1], out, mxrt.runtime.get_arch())
    assert path.supports(dg) is None
    with mxrt.runtime.debug(poison=0xFF):  # workspaces and gate words start as garbage
        path.run(dg, **run_kw)
    cupy.cuda.runtime.deviceSynchronize()
    h = cupy.asnumpy(out)
    return h.view(ml_dtypes.bfloat16).astype(np.float64) if out_dtype == "bfloat16" else h.astype(np.float64)


def window_scales(m: int, n: int, k: int, fa: str, fb: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scale bytes over the whole bf16-exact window of each format (e4m3 / e2m1 [10, 134], e5m2 [17, 134]), b's
    mirrored so every product stays in range."""
    rng = np.random.default_rng(seed)
    kb = -(-k // 32)
    lo = {"e4m3": 10, "e5m2": 17, "e2m1": 10}
    sa = rng.integers(lo[fa], 135, (m, kb)).astype(np.uint8)
    sb = (lo[fb] + 134 - rng.integers(lo[fb], 135, (n, kb))).astype(np.uint8)
    return sa, sb


#: the inputs a bf16-operand GEMM computes inexactly, each with its formats (gate_case)
GATE_CASES = {
    "scale_low": ("e4m3", "e4m3"),
    "scale_high": ("e4m3", "e4m3"),
    "nan_code_e4m3": ("e4m3", "e4m3"),
    "inf_code_e5m2": ("e4m3", "e5m2"),
    "extreme_pairs": ("e4m3", "e4m3"),
    "nan_block": ("e4m3", "e4m3"),
    "fp4_high": ("e2m1", "e4m3"),
}


def gate_case(case: str, m: int = 300, n: int = 260, k: int = 320) -> tuple:
    """``(codes_a, sa, codes_b, sb, fa, fb, k)`` of one :data:`GATE_CASES` case: scales 127 / 120 with one scale byte
    below / above the window, a NaN e4m3 or Inf e5m2 code in a finite block, scale pairs over the whole E8M0 range
    (true factors near 1), a NaN-scale block, an e2m1 block above the window."""
    fa, fb = GATE_CASES[case]
    _, _, qa, qb = operands(m, n, k, fa, fb, seed=7)
    ac, bc = qa.data.copy(), qb.data.copy()
    sa, sb = np.full_like(qa.scales, 127), np.full_like(qb.scales, 120)
    if case == "scale_low":
        sa[5, 3] = 9
    elif case == "scale_high":
        sb[200, 9] = 135
    elif case == "nan_code_e4m3":
        ac[17, 40] = 0x7F
    elif case == "inf_code_e5m2":
        bc[33, 70] = 0x7C
    elif case == "nan_block":
        sa[8, 2] = 255
    elif case == "fp4_high":
        sa[3, 1] = 200
    else:
        base = np.linspace(0, 254, k // 32).astype(np.int64)
        sa = np.tile(base, (m, 1)).astype(np.uint8)
        sb = np.tile(254 - base, (n, 1)).astype(np.uint8)
    return ac, sa, bc, sb, fa, fb, k
