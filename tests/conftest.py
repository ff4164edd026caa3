"""Shared test configuration: GPU tests skip cleanly when mxrt has no usable GPU here; the decode tuned table's
per-test user table (tests/test_decode_table*.py)."""

from __future__ import annotations

from pathlib import Path

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


@pytest.fixture
def user_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh, absent user table of the decode tuned table (``MXRT_TUNED_TABLE``) and fresh memos: its path."""
    from mxrt.config import ENV_TUNED_TABLE
    from mxrt.ops import gemm_decode

    path = tmp_path / "user" / "tuned_decode.json"
    monkeypatch.setenv(ENV_TUNED_TABLE, str(path))
    gemm_decode.reload_table()
    yield path
    monkeypatch.delenv(ENV_TUNED_TABLE, raising=False)
    gemm_decode.reload_table()
