"""torch / JAX / CuPy on the GPU: zero-copy in and out (pointer equality), bitwise equal to the CuPy path."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.api import interop

cupy = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or not mxrt.runtime.device_available(), reason="no GPU"),
]

RNG = np.random.default_rng(5)
X = RNG.standard_normal((64, 256)).astype(np.float32)


def test_torch_cuda_input_is_read_in_place() -> None:
    t = torch.from_numpy(X).cuda()
    native, caller = interop.import_array(t, "op", "x")
    assert caller == interop.Caller("torch", True)
    assert native.data.ptr == t.data_ptr()
    tb = t.to(torch.bfloat16)
    nb, _ = interop.import_array(tb, "op", "x")
    assert nb.data.ptr == tb.data_ptr() and nb.dtype.itemsize == 2


def test_quantize_torch_cuda_matches_cupy_bitwise() -> None:
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        t = torch.from_numpy(X).cuda().to(dt)
        q = mxrt.quantize_mx(t)
        assert q.data.is_cuda and q.data.dtype == torch.float8_e4m3fn
        ref = mxrt.quantize_mx(t.float().cpu().numpy().astype(np.float32) if dt == torch.float32 else t.cpu())
        ref_data = ref.data.view(torch.uint8).numpy() if isinstance(ref.data, torch.Tensor) else ref.data
        assert np.array_equal(q.data.view(torch.uint8).cpu().numpy(), ref_data)


def test_cupy_results_export_to_torch_without_a_copy() -> None:
    q = mxrt.quantize_mx(cupy.asarray(X))
    t = mxrt.convert(q, "torch")
    assert t.data.data_ptr() == q.data.data.ptr and t.scales.data_ptr() == q.scales.data.ptr
    assert t.data.dtype == torch.float8_e4m3fn and t.data.is_cuda


def test_gemm_torch_cuda_in_out_and_out_argument() -> None:
    a = torch.from_numpy(X).cuda().to(torch.bfloat16)
    b = torch.from_numpy(X[:32]).cuda().to(torch.bfloat16)
    qa, qb = mxrt.quantize_mx(a), mxrt.quantize_mx(b)
    d = mxrt.gemm_mx(qa, qb)
    assert d.dtype == torch.bfloat16 and d.is_cuda and d.shape == (64, 32)
    ca, cb = mxrt.convert(qa, "cupy"), mxrt.convert(qb, "cupy")
    ref = mxrt.gemm_mx(ca, cb)  # the CuPy path: uint16 bits
    assert np.array_equal(d.view(torch.int16).cpu().numpy().view(np.uint16), ref.get())
    out = torch.full((64, 32), float("nan"), dtype=torch.bfloat16, device="cuda")
    ptr = out.data_ptr()
    got = mxrt.gemm_mx(qa, qb, out=out)
    assert got is out and out.data_ptr() == ptr
    assert torch.equal(out.view(torch.int16), d.view(torch.int16))


def test_mixed_host_and_device_operands_are_refused() -> None:
    qa = mxrt.quantize_mx(torch.from_numpy(X).cuda())
    with pytest.raises(mxrt.DtypeError):
        mxrt.gemm_mx(qa, mxrt.quantize_mx(X[:8]))


def test_jax_gpu_arrays() -> None:
    jax = pytest.importorskip("jax")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    xj = jax.device_put(X, gpus[0])
    q = mxrt.quantize_mx(xj)
    assert np.array_equal(np.asarray(jax.lax.bitcast_convert_type(q.data, "uint8")), mxrt.quantize_mx(X).data)


def test_planned_torch_calls_match_the_unplanned_route() -> None:
    """Repeated torch calls run the prepared plans (torch-allocated results): same values, dtypes and shapes as
    the first (unplanned) call and the CuPy route; on a torch side stream they take the unplanned route."""
    from mxrt.api import gemm as api_gemm
    from mxrt.api import quant as api_quant

    api_gemm.clear_plans()
    api_quant.clear_plans()
    w = torch.from_numpy(X[:48]).cuda().to(torch.bfloat16)
    qw = mxrt.quantize_mx(w)
    firsts = None
    for seed in range(3):
        x = torch.from_numpy(np.random.default_rng(seed).standard_normal((2, 256)).astype(np.float32)).cuda()
        qx = mxrt.quantize_mx(x)
        ref = mxrt.quantize_mx(cupy.asarray(x.cpu().numpy()))
        assert qx.data.dtype == torch.float8_e4m3fn and qx.data.shape == (2, 256) and qx.scales.shape == (2, 8)
        assert np.array_equal(qx.data.view(torch.uint8).cpu().numpy(), ref.data.get())
        assert np.array_equal(qx.scales.view(torch.uint8).cpu().numpy(), ref.scales.get())
        d = mxrt.gemm_mx(qx, qw)
        want = mxrt.gemm_mx(mxrt.convert(qx, "cupy"), mxrt.convert(qw, "cupy"))
        assert d.dtype == torch.bfloat16 and d.shape == (2, 48) and d.is_contiguous()
        assert np.array_equal(d.view(torch.int16).cpu().numpy().view(np.uint16), want.get())
        firsts = firsts or (d.clone(), x)
    assert any(k[0][0] == "torch" and p.runner is not None for k, p in api_gemm._PLANS.items())
    assert any(k[0] == "torch" for k in api_quant._QPLANS)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d = mxrt.gemm_mx(mxrt.quantize_mx(firsts[1]), qw)
    s.synchronize()
    assert torch.equal(d.view(torch.int16), firsts[0].view(torch.int16))
