"""mxrt.torch.grouped_linear_mx on CPU torch: forward, dgrad and wgrad against float64 math of the same quantized
operands (one bf16 rounding of the exact product, so equal bit for bit) and, loosely, of the unquantized ones."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import mxrt

torch = pytest.importorskip("torch")
from mxrt.torch import grouped_linear_mx  # noqa: E402


def _deq(q: mxrt.MXArray) -> np.ndarray:
    return mxrt.dequantize_mx(q, np.float64)


def _np(t) -> np.ndarray:
    return t.detach().float().numpy().astype(np.float64)


@pytest.mark.parametrize("lens", [[5, 0, 40, 19], [64], [0, 0, 33]], ids=str)
def test_grouped_linear_forward_and_backward(lens):
    g = torch.Generator().manual_seed(len(lens))
    gl = torch.tensor(lens)
    m, k, n = int(gl.sum()), 96, 64
    x = torch.randn(m, k, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(len(lens), n, k, generator=g).to(torch.bfloat16).requires_grad_()
    y = grouped_linear_mx(x, w, gl)
    gy = torch.randn(m, n, generator=g).to(torch.bfloat16)
    y.backward(gy)
    offs = np.concatenate([[0], np.cumsum(lens)])
    xn, wn, gn = (v.detach().float().numpy() for v in (x, w, gy))
    qw = mxrt.quantize_mx_dual_grouped(wn)
    xq, gq = _deq(mxrt.quantize_mx(xn)), _deq(mxrt.quantize_mx(gn))
    wr, wc = _deq(qw.row)[:, :, :k], _deq(qw.col)[:, :, :n]
    qgc = mxrt.quantize_mx_grouped(gn, np.array(lens), colwise=True, col_align=32)
    qxc = mxrt.quantize_mx_grouped(xn, np.array(lens), colwise=True, col_align=32)
    gc, xc, pc = _deq(qgc.col), _deq(qxc.col), mxrt.pad_group_layout(np.array(lens), 32)[1]
    bf = ml_dtypes.bfloat16
    for i in range(len(lens)):
        r = slice(offs[i], offs[i + 1])
        np.testing.assert_array_equal(_np(y)[r], (xq[r] @ wr[i].T).astype(bf).astype(np.float64))
        np.testing.assert_array_equal(_np(x.grad)[r], (gq[r] @ wc[i].T).astype(bf).astype(np.float64))
        c = slice(pc[i], pc[i + 1])
        np.testing.assert_array_equal(_np(w.grad)[i], (gc[:, c] @ xc[:, c].T).astype(bf).astype(np.float64))
    ref_y = np.concatenate([xn[offs[i] : offs[i + 1]] @ wn[i].T for i in range(len(lens))])
    ref_dw = np.stack([gn[offs[i] : offs[i + 1]].T @ xn[offs[i] : offs[i + 1]] for i in range(len(lens))])
    assert mxrt.calc_diff(_np(y), ref_y) < 2e-3 and mxrt.calc_diff(_np(w.grad), ref_dw) < 2e-3


def test_import_mxrt_does_not_import_torch():
    code = "import sys, mxrt; assert 'torch' not in sys.modules and 'mxrt.torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr
