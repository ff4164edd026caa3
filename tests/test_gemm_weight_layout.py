"""``gemm_mx(..., b_weight_layout="aiter16x16")`` on the CPU: the numpy twin against the row-major call (bitwise,
every format pair, n / K tails of the layout's padding, a preshuffled weight-scale layout on top), the rules for n
and k, every validation error, and the central rule that a path which does not list a weight layout is never
offered shuffled codes (mxrt.ops.gemm_paths, mxrt.ops.gemm.resolve_gemm_path with stand-ins)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from support.gemm_cases import operands, shuffled_weight

import mxrt
from mxrt.errors import DtypeError, LayoutError, ShapeError, UnknownLayoutError
from mxrt.problems import GEMM_FORMAT_PAIRS, gemm_problem

W16 = "aiter16x16"


def bits(d) -> np.ndarray:
    d = np.asarray(d)
    return d.view(np.uint16) if d.dtype.itemsize == 2 else d.view(np.uint32)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("pair", GEMM_FORMAT_PAIRS, ids="x".join)
@pytest.mark.parametrize("nk", [(1, 32), (17, 100), (64, 256), (300, 2048), (33, 1000)], ids=str)
def test_numpy_equals_the_row_major_call(nk, pair, out_dtype):
    n, k = nk
    _, _, qa, qb = operands(3, n, k, *pair, seed=n + k)
    got = mxrt.gemm_mx(qa, shuffled_weight(qb, device=False), b_weight_layout=W16, out_dtype=out_dtype)
    np.testing.assert_array_equal(bits(got), bits(mxrt.gemm_mx(qa, qb, out_dtype=out_dtype)))


def test_k_and_n_rules():
    """Without the 4th item k is the padded width (x2 for e2m1); with a scale layout n is the padded row count and
    the padding rows' columns are zeros."""
    _, _, qa, qb = operands(2, 40, 64, "e4m3", "e4m3", seed=1)
    codes, scales, fmt, k = shuffled_weight(qb, device=False)
    assert codes.shape == (48, 64)
    p = gemm_problem(qa, (codes, scales, fmt), b_weight_layout=W16)
    assert (p.n, p.k, p.b_weight_layout) == (40, 64, W16)
    np.testing.assert_array_equal(p.b.data, qb.data)  # host problems hold the unshuffled codes
    s = mxrt.preshuffle_scales(scales, "aiter32x8")
    d = mxrt.gemm_mx(qa, (codes, s, fmt, k), b_scale_layout="aiter32x8", b_weight_layout=W16, out_dtype="float32")
    assert d.shape == (2, 48)
    np.testing.assert_array_equal(d[:, :40], mxrt.gemm_mx(qa, qb, out_dtype="float32"))
    assert not d[:, 40:].any()


def test_errors():
    _, _, qa, qb = operands(2, 40, 64, "e4m3", "e2m1", seed=2)
    codes, scales, fmt, k = shuffled_weight(qb, device=False)
    with pytest.raises(UnknownLayoutError, match=r"b_weight_layout.*'aiter32x8'"):
        mxrt.gemm_mx(qa, (codes, scales, fmt, k), b_weight_layout="aiter32x8")
    with pytest.raises(LayoutError, match="MXArray, whose codes are row-major"):
        mxrt.gemm_mx(qa, qb, b_weight_layout=W16)
    with pytest.raises(DtypeError, match="expected a tuple"):
        mxrt.gemm_mx(qa, [codes, scales, fmt], b_weight_layout=W16)
    with pytest.raises(ShapeError, match=r"expected \(48, 32\) = weight_layout_shape"):
        mxrt.gemm_mx(qa, (codes[:32], scales, fmt, k), b_weight_layout=W16)
    with pytest.raises(ShapeError, match=r"ceil\(n/16\)\*16"):
        mxrt.gemm_mx(qa, (codes[:40], scales, fmt, k), b_weight_layout=W16)
    with pytest.raises(ShapeError, match="n is the row count of the row-major scales"):
        mxrt.gemm_mx(qa, (codes, scales[:20], fmt, k), b_weight_layout=W16)
    with pytest.raises(DtypeError, match="dtype float32"):
        mxrt.gemm_mx(qa, (codes.astype(np.float32), scales, fmt, k), b_weight_layout=W16)
    with pytest.raises(ShapeError, match=r"for b of shape \(40, 96\)"):
        mxrt.gemm_mx(qa, (codes, scales, fmt, 96), b_weight_layout=W16)
    with pytest.raises(DtypeError, match="fmt"):
        mxrt.gemm_mx(qa, (codes, scales, "e9m9", k), b_weight_layout=W16)


def _path(name: str, layouts: tuple[str, ...] = ()):
    from mxrt.ops.gemm_paths import GemmPath

    return GemmPath(name, "sm_90a", 10, lambda dg: None, lambda dg: None, weight_layouts=layouts)


def test_resolve_unshuffles_for_a_path_that_reads_row_major_codes(monkeypatch: pytest.MonkeyPatch):
    """No path reads the layout: resolve_gemm_path hands the ordinary selection a DeviceGemm whose codes were
    unshuffled (here a stand-in for the device copy) and whose problem has no weight layout."""
    from mxrt.ops import gemm as gemm_op
    from mxrt.ops import gemm_paths as gp

    monkeypatch.setattr(gp, "_PATHS", {})
    monkeypatch.delenv("MXRT_GEMM_PATH", raising=False)
    gp.register_gemm_path(_path("rowmajor"))
    p = SimpleNamespace(op="gemm_mx", a_fmt="e4m3", b_fmt="e4m3", m=1, n=8, k=32, out_dtype="bfloat16",
                        b_weight_layout=W16)  # fmt: skip
    dg = SimpleNamespace(p=p, arch=SimpleNamespace(target="sm_90a"))
    plain = SimpleNamespace(p=SimpleNamespace(**{**vars(p), "b_weight_layout": None}), arch=dg.arch)
    monkeypatch.setattr(gemm_op, "unshuffled_weight", lambda d: plain)
    path, run_dg = gemm_op.resolve_gemm_path(dg)
    assert path.name == "rowmajor" and run_dg is plain
    gp.register_gemm_path(_path("reads", (W16,)))
    path, run_dg = gemm_op.resolve_gemm_path(dg)
    assert path.name == "reads" and run_dg is dg


def test_decode_paths_list_the_layout():
    from mxrt.ops import gemm_decode, gemm_decode_wg  # noqa: F401  (registers the sm_90a paths)
    from mxrt.ops.gemm_paths import gemm_paths

    by_name = {p.name: p for p in gemm_paths()}
    for name in ("sm90_decode", "sm90_decode_wg"):
        assert W16 in by_name[name].weight_layouts
    for name in ("sm90_cublas", "sm90_wgmma", "generic"):
        if name in by_name:
            assert not by_name[name].weight_layouts
