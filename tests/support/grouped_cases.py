"""Shared pieces of the grouped-GEMM GPU tests (test_gpu_grouped_gemm.py, test_gpu_grouped_gemm_sm90.py,
test_gpu_grouped_torch.py, test_gpu_grouped_wgrad_bf16.py): device copies of MX operands, results back as float64,
the accuracy check against the float64 reference, inputs over a few binades, the group splits, the wgrad operands and
the forced-kernel setup on Hopper. No cupy import at module level."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ml_dtypes
import numpy as np

import mxrt

BF16 = ml_dtypes.bfloat16


def dev(q: mxrt.MXArray) -> mxrt.MXArray:
    """``q`` with its codes and scales copied to the GPU (CuPy)."""
    import cupy

    return dataclasses.replace(q, data=cupy.asarray(q.data), scales=cupy.asarray(q.scales))


def host(d, out_dtype: str = "bfloat16") -> np.ndarray:
    """A device / host result as float64 (bfloat16 from CuPy's uint16 bits)."""
    h = d.get() if hasattr(d, "get") else np.asarray(d)
    if out_dtype == "bfloat16" and h.dtype == np.uint16:
        h = h.view(BF16)
    return h.astype(np.float64)


def check(got: np.ndarray, want: np.ndarray, out_dtype: str, what: str = "") -> None:
    """Finite everywhere (no poison left), fp32 relative error <= 1e-5, or bf16 / fp16 calc_diff <= 1e-5."""
    assert np.isfinite(got).all(), f"{what}: poison or NaN left ({int((~np.isfinite(got)).sum())})"
    if out_dtype == "float32":
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        assert err <= 1e-5, f"{what}: fp32 relative error {err}"
    elif np.abs(want).max(initial=0) > 0:
        diff = mxrt.calc_diff(got, want)
        assert diff <= 1e-5, f"{what}: calc_diff {diff}"


def values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 normals, each row scaled by 2^[-3, 3] (blocks of different scales)."""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, (*shape[:-1], 1)))).astype(np.float32)


def group_lens(kind: str, g: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``g`` lengths summing to ``m`` (``m // g * g`` for "balanced"): "balanced"; "unbalanced" (Dirichlet 0.3:
    unaligned sizes, some empty); "empty" / "one" (one group holds every row, the others are empty)."""
    if kind == "balanced":
        return np.full(g, m // g)
    if kind == "unbalanced":
        lens = np.floor(rng.dirichlet(np.full(g, 0.3)) * m).astype(np.int64)
        lens[0] += m - lens.sum()
        return lens
    if kind in ("empty", "one"):
        lens = np.zeros(g, np.int64)
        lens[g // 2] = m
        return lens
    raise ValueError(kind)


def wgrad_operands(rng: np.random.Generator, lens, n: int, k: int, pair=("e4m3", "e4m3"), align: int = 32):
    """The colwise wgrad operands of fresh values: ``dy [sum(lens), n]`` and ``x [sum(lens), k]`` quantized along the
    rows by ``quantize_mx_grouped(..., colwise=True, col_align=align)`` (``.col``: ``[n, Mc]`` and ``[k, Mc]``)."""
    m = int(np.sum(lens))
    go, x = values(rng, (m, n)), values(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, pair[0], colwise=True, col_align=align).col
    qx = mxrt.quantize_mx_grouped(x, lens, pair[1], colwise=True, col_align=align).col
    return qg, qx


def extreme_wgrad_operands(rng: np.random.Generator) -> tuple[mxrt.MXArray, mxrt.MXArray, np.ndarray]:
    """Wgrad operands whose scale pairs run over the legal extremes (sa + sb near 254 in every column block, from
    sa = 0 with sb = 254 to the reverse, a little noise; the first block exactly 0 / 254): ``(a, b, lens)``, a
    ``[136, Mc]``, b ``[72, Mc]``, lens ``[150, 0, 90, 310]`` (column blocks of 32 from offsets 0, 160, 160, 256)."""
    lens = np.array([150, 0, 90, 310])
    qg, qx = wgrad_operands(rng, lens, 136, 72)
    kb = qg.scales.shape[1]
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (136, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - base + rng.integers(-6, 7, (72, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254
    return dataclasses.replace(qg, scales=sa), dataclasses.replace(qx, scales=sb), lens


@contextmanager
def forced_sm90_kernel(monkeypatch, kernel: str, poison: int) -> Iterator[Any]:
    """The GPU grouped tests' setup on Hopper: skip without a device or off sm_90a, force ``kernel`` through
    ``MXRT_GROUPED_GEMM_KERNEL``, and yield a debug session (outputs poisoned, a sync after every launch)."""
    import pytest

    from mxrt.runtime import get_arch

    try:
        target = get_arch().target
    except Exception as e:  # no device
        pytest.skip(f"no GPU: {e}")
    if target != "sm_90a":
        pytest.skip(f"MXRT_GROUPED_GEMM_KERNEL={kernel} needs sm_90a, this device is {target}")
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", kernel)
    with mxrt.runtime.debug(poison=poison, sync_after_launch=True) as session:
        yield session
