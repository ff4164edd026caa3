"""Shared test configuration: GPU tests skip cleanly when mxrt has no usable GPU here."""

from __future__ import annotations

import pytest


def _gpu_present() -> bool:
    try:
        from mxrt.runtime import device_available
    except ImportError:
        return False
    return bool(device_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not _gpu_present():
        skip = pytest.mark.skip(reason="no GPU with mxrt kernels on this machine (cupy or device missing)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
