"""Test inputs shared by the GPU tests and the host SIMT tests: random, wide-range and edge-value arrays."""

from __future__ import annotations

import numpy as np


def make_input(shape: tuple[int, ...], kind: str, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if kind == "wide":
            x = np.ldexp(x, rng.integers(-140, 120, shape)).astype(np.float32)
        elif kind == "edge":
            flat = x.reshape(-1)
            n = flat.size
            specials = np.array(
                [0.0, -0.0, 1e-40, -1e-45, 3.0e38, -3.4e38, 448.0, 57344.0, 6.0, 7.5, 28.0, 2.0**-127, 2.0**-149],
                np.float32,
            )
            idx = rng.integers(0, n, max(1, n // 4))
            flat[idx] = rng.choice(specials, idx.size)
            flat[: min(n, 40)] = 0.0  # an all-zero block (or most of one)
            if n > 70:
                flat[64:70] = -0.0
            if n > 100:
                flat[rng.integers(0, n)] = np.nan
                flat[rng.integers(0, n)] = np.inf
                flat[rng.integers(0, n)] = -np.inf
                flat[rng.integers(0, n, 8)] = rng.standard_normal(8).astype(np.float32) * np.float32(1e-39)
        return x.astype(dtype)


def layout_storage(scales: np.ndarray, layout: str) -> np.ndarray:
    """Every byte of a preshuffled scale layout's storage (uint8, flat), padding included: the array itself,
    or for ``deepgemm_ue8m0`` the MN-major int32 storage behind the ``[rows, sn/4]`` view (strides (4, 4*sm))."""
    if layout != "deepgemm_ue8m0":
        return np.ascontiguousarray(scales).ravel()
    t = scales.shape[1]
    sm = scales.strides[1] // 4
    full = np.lib.stride_tricks.as_strided(scales, (t, sm), (4 * sm, 4))
    return np.ascontiguousarray(full).view(np.uint8).ravel()
