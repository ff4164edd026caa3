"""The public face: every op a user calls, defined once here, dispatching explicitly to the numpy twin
(:mod:`mxrt.formats`, :mod:`mxrt.layouts`, :mod:`mxrt.reference`) or the GPU op (:mod:`mxrt.ops`).

``api.quant`` (quantize / dequantize / blockscale casts), ``api.layouts`` (layouts, MoE, grouped quantizers and
the host-only helpers), ``api.gemm`` (``gemm_mx``); arrays come in as numpy, CuPy, or any DLPack producer (torch,
JAX) and go out in the caller's kind (:mod:`mxrt.api.interop`); the backend choice lives in
:mod:`mxrt.api.dispatch`. ``mxrt/__init__.py`` re-exports every public name.
"""
