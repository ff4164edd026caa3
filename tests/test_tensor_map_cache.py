"""The host-side cache of encoded tensor maps (mxrt.ops.gemm_sm90): one encode per distinct map, the 2-D and the
aiter16x16 maps kept apart, least recently used first out. The encoder is stood in for (no driver here)."""

from __future__ import annotations

import numpy as np
import pytest

from mxrt.ops import gemm_sm90


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> list:
    calls: list = []

    def fake(ptr, dims, strides, box, swizzle, what):
        calls.append((ptr, dims, strides, box, swizzle))
        return np.full(128, len(calls), np.uint8)

    monkeypatch.setattr(gemm_sm90, "_encode_map", fake)
    monkeypatch.setattr(gemm_sm90, "_maps", type(gemm_sm90._maps)())
    return calls


def test_each_map_is_encoded_once(encodes: list) -> None:
    a = gemm_sm90.tensor_map_arg(0x1000, 64, 256, 16, 0)
    assert gemm_sm90.tensor_map_arg(0x1000, 64, 256, 16, 0) is a
    w = gemm_sm90.tensor_map_w16_arg(0x1000, 64, 256, 128, 1, 0)
    assert gemm_sm90.tensor_map_w16_arg(0x1000, 64, 256, 128, 1, 0) is w
    assert len(encodes) == 2 and a.tobytes() != w.tobytes()
    assert encodes[0][1:4] == ((256, 64), (256,), (128, 16))
    assert encodes[1][1:] == ((256, 16, 4), (256, 16 * 256), (256, 8, 1), gemm_sm90._CU_TENSOR_MAP_SWIZZLE_NONE)


def test_least_recently_used_goes_first(encodes: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_sm90, "_MAPS_KEPT", 2)
    gemm_sm90.tensor_map_arg(1 << 20, 8, 128, 8, 0)
    gemm_sm90.tensor_map_w16_arg(2 << 20, 16, 128, 64, 2, 0)
    gemm_sm90.tensor_map_arg(1 << 20, 8, 128, 8, 0)  # refreshed
    gemm_sm90.tensor_map_arg(3 << 20, 8, 128, 8, 0)  # evicts the w16 map
    gemm_sm90.tensor_map_arg(1 << 20, 8, 128, 8, 0)
    assert len(encodes) == 3
    gemm_sm90.tensor_map_w16_arg(2 << 20, 16, 128, 64, 2, 0)
    assert len(encodes) == 4
