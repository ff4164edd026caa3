"""``mxrt check`` rows for the GPU ops: every registered GPU op against its numpy twin, bit for bit.

Only when the suite runs on the ``"gpu"`` backend (with ``"numpy"`` these cases yield nothing). Ops are found by
name in :data:`GPU_CASES`; an op that is not registered in :data:`mxrt.GPU_OPS` is skipped, and a
registered op without an entry gets one informational row, so a new GPU op is covered by adding one line
``"op_name": its_case_generator`` below.

Each case generator yields ``(case, run_gpu, run_numpy)``: two thunks returning an array or a tuple of arrays
(MXArray / MXDual are flattened to their data and scales). GPU inputs are CuPy arrays (CuPy in -> CuPy out) except
where CuPy has no dtype (bfloat16 goes numpy in -> numpy out with ``backend="gpu"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ml_dtypes
import numpy as np

from .core import CheckRow, mismatches

Case = tuple[str, Callable[[], Any], Callable[[], Any]]


def _cupy():
    import cupy

    return cupy


def _arrays(result: Any) -> list[Any]:
    """Flatten an op result to its arrays (MXArray -> data, scales; tuples recursively)."""
    if isinstance(result, np.ndarray):  # (``.data`` of a bfloat16 ndarray is a memoryview numpy cannot make)
        return [result]
    if hasattr(result, "data") and hasattr(result, "scales"):
        return [result.data, result.scales]
    if isinstance(result, tuple):
        return [a for part in result for a in _arrays(part)]
    return [result]


def _host(a: Any) -> np.ndarray:
    return _cupy().asnumpy(a) if type(a).__module__.split(".", 1)[0] == "cupy" else np.asarray(a)


def _quant_input(shape: tuple[int, ...], seed: int, dtype: Any) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    if flat.size > 64:
        flat[:32] = 0.0  # an all-zero block
        flat[40] = np.float32(3.0e38)
        flat[-1] = np.float32(1e-40)  # subnormal
    return x.astype(dtype)


def _device_or_host(x: np.ndarray) -> Any:
    return x if x.dtype == ml_dtypes.bfloat16 else _cupy().asarray(x)


def quantize_mx_cases() -> Iterator[Case]:
    from ..api.quant import quantize_mx

    for si, shape in enumerate([(1, 1), (7, 33), (64, 256), (3, 4095)]):
        for dtype in (np.float32, ml_dtypes.bfloat16):
            x = _quant_input(shape, si, dtype)
            for fmt, mode in (("e4m3", "rceil"), ("e2m1", "floor"), ("e5m2", "even")):
                case = f"{fmt}/{mode} {np.dtype(dtype).name} {shape[0]}x{shape[1]}"
                kw = {"scale_mode": mode}
                yield (
                    case,
                    lambda x=x, fmt=fmt, kw=kw: quantize_mx(_device_or_host(x), fmt, backend="gpu", **kw),
                    lambda x=x, fmt=fmt, kw=kw: quantize_mx(x, fmt, backend="numpy", **kw),
                )


def quantize_mx_dual_cases() -> Iterator[Case]:
    from ..api.quant import quantize_mx_dual

    for si, shape in enumerate([(1, 1), (33, 7), (100, 130)]):
        x = _quant_input(shape, 10 + si, np.float32)
        for fmt, b2 in (("e4m3", False), ("e2m1", True)):
            case = f"{fmt} {'2d' if b2 else '1d'} {shape[0]}x{shape[1]}"
            yield (
                case,
                lambda x=x, fmt=fmt, b2=b2: quantize_mx_dual(_device_or_host(x), fmt, block_2d=b2, backend="gpu"),
                lambda x=x, fmt=fmt, b2=b2: quantize_mx_dual(x, fmt, block_2d=b2, backend="numpy"),
            )


def dequantize_mx_cases() -> Iterator[Case]:
    """Every code x every scale byte (rows of 256 codes, one scale byte per row) and a ragged random case, for each
    output dtype: the GPU kernel's values against the numpy twin's (bfloat16 as exact float32 values, NaN == NaN)."""
    from ..api.quant import dequantize_mx
    from ..formats.mx import MXArray

    rng = np.random.default_rng(7)
    grids = {
        "every code x scale e4m3": ("e4m3", np.tile(np.arange(256, dtype=np.uint8), (256, 1)), (256, 256)),
        "every code x scale e5m2": ("e5m2", np.tile(np.arange(256, dtype=np.uint8), (256, 1)), (256, 256)),
        "random e2m1 37x100": ("e2m1", rng.integers(0, 16, (37, 100)).astype(np.uint8), (37, 100)),
        "random e3m2 5x33": ("e3m2", rng.integers(0, 64, (5, 33)).astype(np.uint8), (5, 33)),
    }
    for name, (fmt, codes, shape) in grids.items():
        kb = -(-shape[1] // 32)
        scales = (np.arange(shape[0])[:, None] % 256).repeat(kb, 1).astype(np.uint8)
        if fmt == "e2m1":
            padded = np.concatenate([codes, np.zeros((shape[0], shape[1] % 2), np.uint8)], 1)
            data = (padded[:, 0::2] | (padded[:, 1::2] << 4)).astype(np.uint8)
        else:
            data = codes
        q = MXArray(data, scales, fmt, 32, 1, shape, "floor")
        for dt in (np.float32, ml_dtypes.bfloat16, np.float16):

            def on_gpu(q=q, dt=dt):
                cp = _cupy()
                dq = MXArray(cp.asarray(q.data), cp.asarray(q.scales), q.fmt, 32, 1, q.shape, "floor")
                h = cp.asnumpy(dequantize_mx(dq, dt))  # bfloat16: uint16 bits in CuPy
                return h.view(ml_dtypes.bfloat16).astype(np.float32) if dt == ml_dtypes.bfloat16 else h

            def on_numpy(q=q, dt=dt):  # bfloat16 compared as its exact float32 values (NaN == NaN)
                d = dequantize_mx(q, dt)
                return d.astype(np.float32) if dt == ml_dtypes.bfloat16 else d

            yield f"{name} -> {np.dtype(dt).name}", on_gpu, on_numpy


_SCALE_FORMS = [
    ("aiter32x8", None),
    ("turbo16x4", None),
    ("turbo16x4", np.uint32),
    ("cublas128x4", None),
    ("deepgemm_ue8m0", None),
]


def _scale_codes(shape: tuple[int, int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def preshuffle_scales_cases() -> Iterator[Case]:
    from ..api.layouts import preshuffle_scales

    for si, shape in enumerate([(1, 1), (7, 3), (255, 9), (1000, 57)]):
        s = _scale_codes(shape, si)
        for layout, dtype in _SCALE_FORMS:
            for pad in (127, 0):
                name = f"{layout}{'/u32' if dtype else ''} pad {pad} {shape[0]}x{shape[1]}"
                kw = {"pad_value": pad, "dtype": dtype}
                yield (
                    name,
                    lambda s=s, lay=layout, kw=kw: preshuffle_scales(_cupy().asarray(s), lay, backend="gpu", **kw),
                    lambda s=s, lay=layout, kw=kw: preshuffle_scales(s, lay, backend="numpy", **kw),
                )


def unshuffle_scales_cases() -> Iterator[Case]:
    from ..api.layouts import preshuffle_scales, unshuffle_scales

    for si, shape in enumerate([(7, 3), (255, 9), (1000, 57)]):
        s = _scale_codes(shape, 20 + si)
        for layout, dtype in _SCALE_FORMS:
            p = preshuffle_scales(s, layout, dtype=dtype, backend="numpy")
            name = f"{layout}{'/u32' if dtype else ''} {shape[0]}x{shape[1]}"

            def on_gpu(p=p, layout=layout, shape=shape):
                cp = _cupy()
                dp = cp.asarray(np.ascontiguousarray(p))
                if layout == "deepgemm_ue8m0":  # the strided MN-major view preshuffle returns
                    dp = cp.asarray(np.ascontiguousarray(p.T)).T
                return unshuffle_scales(dp, layout, shape, backend="gpu")

            def on_numpy(p=p, layout=layout, shape=shape):
                return unshuffle_scales(p, layout, shape, backend="numpy")

            yield name, on_gpu, on_numpy


def moe_align_cases() -> Iterator[Case]:
    from ..api.layouts import moe_align_block_size

    rng = np.random.default_rng(7)
    example = np.array([[2, 3, 0], [1, 2, 0], [1, 3, 0], [1, 2, 3]], np.int32)  # MX_REFERENCE.md 4c
    cases = [("MX_REFERENCE 4c", example, 4, 4, None)]
    for t, topk, e, bs in ((1, 1, 4, 16), (7, 8, 64, 64), (1000, 8, 256, 128), (40000, 8, 256, 16)):
        ids = rng.integers(0, e + 2, (t, topk)).astype(np.int32)  # a few ids >= num_experts (skipped)
        cases.append((f"T={t} topk={topk} E={e} bs={bs}", ids, bs, e, None))
    emap = rng.integers(-1, 32, 64).astype(np.int32)
    cases.append(("T=300 topk=6 E=64 bs=32 expert_map", rng.integers(0, 64, (300, 6)).astype(np.int32), 32, 64, emap))
    for name, ids, bs, e, em in cases:
        yield (
            name,
            lambda ids=ids, bs=bs, e=e, em=em: moe_align_block_size(
                _cupy().asarray(ids), bs, e, None if em is None else _cupy().asarray(em), backend="gpu"
            ),
            lambda ids=ids, bs=bs, e=e, em=em: moe_align_block_size(ids, bs, e, em, backend="numpy"),
        )


def moe_combine_cases() -> Iterator[Case]:
    """bf16 rows as uint16 bits on both sides; the twin flushes fp32 subnormals on CUDA as NVRTC does."""
    import ml_dtypes

    from .. import runtime
    from ..api.layouts import moe_combine
    from ..layouts.ep import moe_combine as twin

    def ftz() -> bool:  # asked when the numpy side runs (no device: the IEEE twin)
        return runtime.device_available() and runtime.get_arch().vendor == "nvidia"

    rng = np.random.default_rng(13)
    for t, k, n, idx in ((1, 1, 8, np.int32), (37, 8, 7168, np.int64), (300, 6, 100, np.int32), (9, 3, 1, np.int64)):
        r = 2 * t + 1
        y = (rng.standard_normal((r, n)) * 4).astype(ml_dtypes.bfloat16)
        y[0, : min(n, 2)] = np.array([np.nan, np.inf])[: min(n, 2)]
        src = rng.integers(0, r, (t, k)).astype(idx)
        w = rng.random((t, k)).astype(np.float32)
        yield (
            f"T={t} k={k} n={n} src {np.dtype(idx).name}",
            lambda y=y, src=src, w=w: moe_combine(
                _cupy().asarray(y.view(np.uint16)), _cupy().asarray(src), _cupy().asarray(w), backend="gpu"
            ),
            lambda y=y, src=src, w=w: twin(y, src, w, ftz=ftz()).view(np.uint16),
        )


#: op name -> generator of (case, run_gpu, run_numpy). Add one line per new GPU op.
GPU_CASES: dict[str, Callable[[], Iterable[Case]]] = {
    "dequantize_mx": dequantize_mx_cases,
    "quantize_mx": quantize_mx_cases,
    "quantize_mx_dual": quantize_mx_dual_cases,
    "preshuffle_scales": preshuffle_scales_cases,
    "unshuffle_scales": unshuffle_scales_cases,
    "moe_align_block_size": moe_align_cases,
    "moe_combine": moe_combine_cases,
}


#: GPU ops compared with a tolerance rather than bit for bit, by their own check module
CHECKED_ELSEWHERE = {
    "gemm_mx": "tolerance rows in mxrt/checks/gemm.py (check_gemm_op, check_decode_gemm)",
    "moe_gemm_mx": "tolerance rows in mxrt/checks/gemm.py (check_moe_gemm)",
}


def _compare(op: str, case: str, run_gpu: Callable[[], Any], run_numpy: Callable[[], Any]) -> CheckRow:
    got, want = _arrays(run_gpu()), _arrays(run_numpy())
    if len(got) != len(want):
        return CheckRow(op, case, "gpu", "outputs", f"{len(got)} vs {len(want)}", False)
    rows = [mismatches(op, case, "gpu", _host(g), np.asarray(w)) for g, w in zip(got, want, strict=True)]
    bad = [r for r in rows if not r.ok]
    if bad:
        return bad[0]
    total = sum(int(np.asarray(w).size) for w in want)
    return CheckRow(op, case, "gpu", "mismatches", f"0/{total}", True)


def check_gpu_ops(backend: str) -> Iterable[CheckRow]:
    if backend != "gpu":
        return
    from ..api.dispatch import GPU_OPS

    for op in sorted(GPU_OPS):
        if op in CHECKED_ELSEWHERE:
            yield CheckRow(op, "registered GPU op", "gpu", "cases", CHECKED_ELSEWHERE[op], True)
        elif op not in GPU_CASES:
            yield CheckRow(op, "registered GPU op", "gpu", "cases", "none in mxrt/checks/gpu.py", True)
    for op, cases in GPU_CASES.items():
        if op not in GPU_OPS:
            continue
        for case, run_gpu, run_numpy in cases():
            try:
                yield _compare(op, case, run_gpu, run_numpy)
            except Exception as exc:  # one failing case is a row, the others still run
                yield CheckRow(op, case, "gpu", "exception", f"{type(exc).__name__}: {exc}"[:200], False)


CASES: list = [check_gpu_ops]
