"""The GPU GEMM path registry (mxrt.ops.gemm_paths): selection by target, priority, support and override."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mxrt.errors import UnsupportedArchError
from mxrt.ops import gemm_paths as gp


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gp, "_PATHS", {})
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)


def _path(name: str, target: str, priority: int, ok: bool = True) -> gp.GemmPath:
    return gp.GemmPath(name, target, priority, lambda dg: None if ok else f"{name} says no", lambda dg: None)


def _dg(target: str, weight_layout: str | None = None) -> SimpleNamespace:
    p = SimpleNamespace(
        op="gemm_mx", a_fmt="e4m3", b_fmt="e4m3", m=8, n=8, k=32, out_dtype="bfloat16", b_weight_layout=weight_layout
    )
    return SimpleNamespace(p=p, arch=SimpleNamespace(target=target))


def test_best_supporting_path_of_the_target_wins(registry: None) -> None:
    for p in (_path("generic", "generic", 0), _path("fast", "sm_90a", 20), _path("amd", "gfx950", 30)):
        gp.register_gemm_path(p)
    assert [p.name for p in gp.gemm_paths("sm_90a")] == ["fast", "generic"]
    assert gp.select_gemm_path(_dg("sm_90a")).name == "fast"
    assert gp.select_gemm_path(_dg("gfx950")).name == "amd"
    assert gp.select_gemm_path(_dg("sm_80")).name == "generic"


def test_a_declining_path_falls_through_and_reasons_are_reported(registry: None) -> None:
    gp.register_gemm_path(_path("fast", "sm_90a", 20, ok=False))
    gp.register_gemm_path(_path("generic", "generic", 0))
    assert gp.select_gemm_path(_dg("sm_90a")).name == "generic"
    with pytest.raises(UnsupportedArchError, match="fast says no"):
        gp.select_gemm_path(_dg("sm_90a"), "fast")


def test_override_by_env_and_unknown_names(registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    gp.register_gemm_path(_path("fast", "sm_90a", 20))
    gp.register_gemm_path(_path("generic", "generic", 0))
    monkeypatch.setenv("MXRT_GEMM_PATH", "generic")
    assert gp.select_gemm_path(_dg("sm_90a")).name == "generic"
    monkeypatch.setenv("MXRT_GEMM_PATH", "nope")
    with pytest.raises(UnsupportedArchError, match="'nope'"):
        gp.select_gemm_path(_dg("sm_90a"))
    monkeypatch.delenv("MXRT_GEMM_PATH")
    with pytest.raises(UnsupportedArchError, match="does not run on target 'gfx950'"):
        gp.select_gemm_path(_dg("gfx950"), "fast")


def test_no_path_and_duplicate_names(registry: None) -> None:
    with pytest.raises(UnsupportedArchError, match="none registered"):
        gp.select_gemm_path(_dg("sm_90a"))
    gp.register_gemm_path(_path("x", "generic", 0))
    with pytest.raises(ValueError, match="already registered"):
        gp.register_gemm_path(_path("x", "sm_90a", 1))


def test_a_weight_layout_is_offered_only_to_paths_that_read_it(registry: None) -> None:
    """Shuffled weight codes never reach a path that reads row-major ones, whatever its priority or a forced name."""
    reads = gp.GemmPath("decode", "sm_90a", 30, lambda dg: None, lambda dg: None, weight_layouts=("aiter16x16",))
    gp.register_gemm_path(reads)
    gp.register_gemm_path(_path("fast", "sm_90a", 40))
    gp.register_gemm_path(_path("generic", "generic", 0))
    assert gp.select_gemm_path(_dg("sm_90a")).name == "fast"
    assert gp.select_gemm_path(_dg("sm_90a", "aiter16x16")).name == "decode"
    with pytest.raises(
        UnsupportedArchError, match="fast: reads row-major weight codes, not b_weight_layout='aiter16x16'"
    ):
        gp.select_gemm_path(_dg("sm_90a", "aiter16x16"), "fast")
    with pytest.raises(UnsupportedArchError, match="generic: reads row-major weight codes"):
        gp.select_gemm_path(_dg("gfx950", "aiter16x16"))
