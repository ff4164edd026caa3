"""``mxrt.torch``: a grouped MX linear layer for PyTorch (imported on request; ``import mxrt`` never imports torch).

:func:`grouped_linear_mx` is a ``torch.autograd.Function``: the forward quantizes bf16 activations and weights with
mxrt's quantizers and runs :func:`mxrt.grouped_gemm_mx`; the backward runs the dgrad (the same grouped GEMM on the
weights quantized along n) and the variable-K wgrad (:func:`mxrt.grouped_gemm_mx_wgrad` on the colwise grouped
quantizations of the output gradient and the activations), the MXFP8 training recipe of Primus-Turbo's grouped
GEMM. CPU tensors run the numpy twins, CUDA tensors the GPU kernels.
"""

from __future__ import annotations

from typing import Any

import torch

from .api.grouped_gemm import grouped_gemm_mx, grouped_gemm_mx_wgrad
from .api.layouts import quantize_mx_dual_grouped, quantize_mx_grouped
from .api.quant import quantize_mx

#: per-group column padding of the wgrad operands (a multiple of 32)
WGRAD_ALIGN = 32


class GroupedLinearMX(torch.autograd.Function):
    """``y [M, n] = x_g @ w[g].T`` per group of rows; ``x [M, k]``, ``w [G, n, k]``, both bfloat16."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor, fmt: str) -> torch.Tensor:
        qw = quantize_mx_dual_grouped(w, fmt)  # row: [G, n, k_pad] along k (fwd); col: [G, k, n_pad] along n (dgrad)
        y = grouped_gemm_mx(quantize_mx(x, fmt), qw.row, group_lens, out_dtype="bfloat16")
        ctx.save_for_backward(x, group_lens)
        ctx.w_col = qw.col
        ctx.fmt = fmt
        return y

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[Any, ...]:
        x, group_lens = ctx.saved_tensors
        grad_y = grad_y.contiguous()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = grouped_gemm_mx(quantize_mx(grad_y, ctx.fmt), ctx.w_col, group_lens, out_dtype="bfloat16")
        if ctx.needs_input_grad[1]:
            qg = quantize_mx_grouped(grad_y, group_lens, ctx.fmt, colwise=True, col_align=WGRAD_ALIGN)
            qx = quantize_mx_grouped(x, group_lens, ctx.fmt, colwise=True, col_align=WGRAD_ALIGN)
            dw = grouped_gemm_mx_wgrad(qg, qx, group_lens, align=WGRAD_ALIGN, out_dtype="bfloat16")
        return dx, dw, None, None


def grouped_linear_mx(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor, fmt: str = "e4m3") -> torch.Tensor:
    """Grouped MX linear layer (MoE experts): ``y[rows of group g] = x[rows] @ w[g].T`` with autograd.

    Parameters
    ----------
    x : bfloat16 ``[M, k]``, rows grouped contiguously by ``group_lens``.
    w : bfloat16 ``[G, n, k]`` (requires_grad for the wgrad).
    group_lens : int ``[G]`` tensor on x's device (lengths >= 0 summing to M).
    fmt : element format of every quantized operand (``"e4m3"``; ``"e5m2"`` / ``"e2m1"`` also run).

    Returns
    -------
    bfloat16 ``[M, n]``; ``backward`` gives ``dx [M, k]`` and ``dw [G, n, k]`` in bfloat16.
    """
    return GroupedLinearMX.apply(x, w, group_lens, fmt)


__all__ = ["GroupedLinearMX", "grouped_linear_mx"]
