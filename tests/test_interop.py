"""Arrays of every kind in and out of the public ops (DLPack, zero-copy): numpy's own DLPack export on the CPU,
torch and JAX where installed (CPU here; tests/test_gpu_interop.py checks device pointers on a GPU)."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.api import interop

RNG = np.random.default_rng(11)
X = RNG.standard_normal((8, 96)).astype(np.float32)


class Producer:
    """A foreign DLPack producer (what an unknown library hands mxrt): numpy memory behind ``__dlpack__``."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_import_mxrt_imports_no_torch_or_jax() -> None:
    code = "import sys, mxrt, mxrt.api; print(any(m in sys.modules for m in ('torch', 'jax', 'cupy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_dlpack_producer_is_read_without_a_copy() -> None:
    native, caller = interop.import_array(Producer(X), "op", "x")
    assert caller == interop.HOST and np.shares_memory(native, X)
    q = mxrt.quantize_mx(Producer(X))
    ref = mxrt.quantize_mx(X)
    assert np.array_equal(q.data, ref.data) and np.array_equal(q.scales, ref.scales)


def test_numpy_in_numpy_out_and_bfloat16_typed() -> None:
    xb = X.astype(ml_dtypes.bfloat16)
    qa, qb = mxrt.quantize_mx(xb), mxrt.quantize_mx(xb[:4])
    d = mxrt.gemm_mx(qa, qb)
    assert isinstance(d, np.ndarray) and d.dtype == ml_dtypes.bfloat16


def test_as_dtype_views_and_repr() -> None:
    for fmt, want in (("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2"), ("e2m3", "float6_e2m3fn"),
                      ("e3m2", "float6_e3m2fn"), ("e2m1", "float4_e2m1fn")):  # fmt: skip
        q = mxrt.quantize_mx(X, fmt)
        codes, scales = q.as_dtype()
        assert codes.dtype.name == want and scales.dtype == ml_dtypes.float8_e8m0fnu
        assert codes.shape == q.shape
        if fmt != "e2m1":
            assert np.shares_memory(codes, q.data)
        assert np.shares_memory(scales, q.scales)
        got = codes.astype(np.float64) * scales.astype(np.float64).repeat(32, axis=1)[:, : q.shape[1]]
        assert np.array_equal(got, mxrt.dequantize_mx(q, np.float64), equal_nan=True)
    r = repr(mxrt.quantize_mx(X))
    lo, hi = mxrt.quantize_mx(X).scale_range()
    assert f"2^{lo}..2^{hi}" in r and "numpy on cpu" in r
    assert mxrt.quantize_mx(X)._repr_html_().startswith("<pre>")


def test_convert_refuses_unknown_kinds_and_host_device_moves() -> None:
    with pytest.raises(mxrt.UnknownNameError, match="kind"):
        mxrt.convert(X, "tensorflow")
    with pytest.raises(mxrt.DtypeError, match="host"):
        mxrt.convert(X, "cupy")


def test_backend_gpu_without_a_device_names_the_missing_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mxrt.runtime, "device_available", lambda: False)
    with pytest.raises(mxrt.UnsupportedArchError, match="CuPy or a GPU is not available"):
        mxrt.quantize_mx(X, backend="gpu")
    with pytest.raises(mxrt.UnsupportedArchError, match="has no GPU kernel"):
        mxrt.per_token_cast_to_fp8(X, True, backend="gpu")


# ---- torch (CPU here) ---------------------------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_in_torch_out_typed_and_bitwise(torch) -> None:
    t = torch.from_numpy(X)
    q = mxrt.quantize_mx(t)
    ref = mxrt.quantize_mx(X)
    assert q.data.dtype == torch.float8_e4m3fn
    assert q.scales.dtype == getattr(torch, "float8_e8m0fnu", torch.uint8)
    assert np.array_equal(q.data.view(torch.uint8).numpy(), ref.data)
    assert np.array_equal(q.scales.view(torch.uint8).numpy(), ref.scales)
    assert mxrt.quantize_mx(t, "e2m1").data.dtype == torch.uint8  # packed fp4 stays bytes
    dq = mxrt.dequantize_mx(q, np.float32)
    assert isinstance(dq, torch.Tensor) and np.array_equal(dq.numpy(), mxrt.dequantize_mx(ref))


def test_torch_bfloat16_in_and_gemm_out(torch) -> None:
    tb = torch.from_numpy(X).to(torch.bfloat16)
    qa, qb = mxrt.quantize_mx(tb), mxrt.quantize_mx(tb[:4])
    d = mxrt.gemm_mx(qa, qb)
    ref = mxrt.gemm_mx(
        mxrt.quantize_mx(X.astype(ml_dtypes.bfloat16)), mxrt.quantize_mx(X[:4].astype(ml_dtypes.bfloat16))
    )
    assert d.dtype == torch.bfloat16
    assert np.array_equal(d.view(torch.int16).numpy(), ref.view(np.int16))
    out = torch.full((8, 4), float("nan"), dtype=torch.float32)
    ptr = out.data_ptr()
    got = mxrt.gemm_mx(qa, qb, out_dtype="float32", out=out)
    assert got is out and out.data_ptr() == ptr and np.isfinite(out.numpy()).all()


def test_torch_views_strides_and_grad(torch) -> None:
    base = torch.from_numpy(np.ascontiguousarray(X.T.copy())).T  # a transposed (Fortran-order) view
    assert not base.is_contiguous()
    q = mxrt.quantize_mx(base)
    assert np.array_equal(q.data.view(torch.uint8).numpy(), mxrt.quantize_mx(X).data)
    g = torch.from_numpy(X.copy()).requires_grad_(True)
    assert np.array_equal(mxrt.quantize_mx(g).scales.view(torch.uint8).numpy(), mxrt.quantize_mx(X).scales)


def test_torch_through_host_only_ops(torch) -> None:
    lens = torch.tensor([3, 0, 5])
    x = torch.arange(16, dtype=torch.float32).reshape(8, 2)
    padded = mxrt.pad_rows(x, lens, 4)
    assert isinstance(padded, torch.Tensor)
    assert np.array_equal(padded.numpy(), mxrt.pad_rows(x.numpy(), lens.numpy(), 4))
    ids = torch.tensor([[0, 2], [1, 2]], dtype=torch.int32)
    s, e, n = mxrt.moe_align_block_size(ids, 4, 3)
    assert all(isinstance(v, torch.Tensor) for v in (s, e, n))
    assert mxrt.calc_diff(torch.from_numpy(X), torch.from_numpy(X)) == pytest.approx(0.0, abs=1e-12)


def test_convert_mx_to_torch_shares_memory(torch) -> None:
    q = mxrt.quantize_mx(X)
    t = mxrt.convert(q, "torch")
    assert t.data.data_ptr() == q.data.ctypes.data and t.scales.data_ptr() == q.scales.ctypes.data
    back = mxrt.convert(t, "numpy")
    assert np.shares_memory(back.data, q.data)
    dual = mxrt.convert(mxrt.quantize_mx_dual(X), "torch")
    assert dual.col.data.dtype == torch.float8_e4m3fn


# ---- JAX (CPU) ------------------------------------------------------------------------------------------------


def test_jax_in_jax_out() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    with jax.default_device(jax.devices("cpu")[0]):
        xj = jnp.asarray(X)
        q = mxrt.quantize_mx(xj)
        ref = mxrt.quantize_mx(X)
        assert q.data.dtype == jnp.float8_e4m3fn
        assert np.array_equal(np.asarray(jax.lax.bitcast_convert_type(q.data, jnp.uint8)), ref.data)
        d = mxrt.gemm_mx(q, mxrt.quantize_mx(xj[:4]))
        assert d.dtype == jnp.bfloat16
        ref_d = mxrt.gemm_mx(ref, mxrt.quantize_mx(X[:4]))
        assert np.array_equal(np.asarray(d).view(np.int16), ref_d.view(np.int16))
        qb = mxrt.quantize_mx(xj.astype(jnp.bfloat16))
        assert np.array_equal(
            np.asarray(jax.lax.bitcast_convert_type(qb.data, jnp.uint8)),
            mxrt.quantize_mx(X.astype(ml_dtypes.bfloat16)).data,
        )


def test_readme_interop_example_runs() -> None:
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    section = text[text.index("<!-- api:interop -->") : text.index("<!-- /api:interop -->")]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md:interop", "exec"), {})
