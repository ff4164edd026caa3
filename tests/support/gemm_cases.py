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
