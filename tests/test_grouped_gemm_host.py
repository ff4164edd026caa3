"""The generic grouped MX GEMM kernel (kernels_src/gemm/gemm_mx_grouped_generic.hip) run on the CPU, against the numpy
twin: tests/support/simt_gemm_host.cpp compiles the kernel for the host (each GPU thread a fiber, barriers with
forward / backward / scrambled fiber orders, blocks in launch or scrambled order) and launches it with the plan
mxrt/ops/grouped_gemm.py computes (grid from host-known bounds, groups read only by the kernel).

Checked: forward / dgrad by group lengths (balanced, unbalanced, empty groups, one group holding everything, G in
{1, 4, 32}, K tails, padded dgrad weights), what the kernel does with lengths the host cannot check (sums short of
or past M, negative), DeepGEMM's per-row ids (-1 rows and rows of a poisoned out left untouched, several groups in
one tile) and masked layout (masked_m from 0 to max_m), the variable-K wgrad (plain and accumulating, fp32 and
bf16), and that one group equals the dense kernel bit for bit (the shared main loop of gemm_generic_tile.h).
"""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import host_compiler

import mxrt
from mxrt import codes
from mxrt.ops.grouped_gemm import grouped_plan
from mxrt.problems.gemm import gemm_problem
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_numpy

ROOT = Path(__file__).resolve().parents[1]
_LIBS: dict[tuple, ctypes.CDLL] = {}
OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_gemm")


def _lib(build_dir: Path, kernel: int, **d: int) -> ctypes.CDLL:
    key = (kernel, *sorted(d.items()))
    if key not in _LIBS:
        tag = "_".join(f"{k}{v}" for k, v in sorted(d.items()))
        out = build_dir / f"simt_gemm_{kernel}_{tag}.so"
        src = ROOT / "tests" / "support" / "simt_gemm_host.cpp"
        flags = [f"-D{k}={v}" for k, v in d.items()]
        cmd = [*host_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", f"-DSIMT_KERNEL={kernel}", "-DTHREADS=256"]
        proc = subprocess.run([*cmd, *flags, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        so = ctypes.CDLL(str(out))
        so.simt_error.restype = ctypes.c_char_p
        _LIBS[key] = so
    return _LIBS[key]


def _p(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype.itemsize == 2 else x


def run_grouped(build_dir, p, *, order: int = 0, vec: bool = True, out: np.ndarray | None = None) -> np.ndarray:
    """Launch the host build of the grouped kernel on a validated host problem; returns ``out`` (poisoned with
    0xFF bytes where not given, so an unwritten element is NaN)."""
    plan = grouped_plan(p)
    lib = _lib(build_dir, 11, **{k: v for k, v in plan.defines if k != "THREADS"})
    a, sa = np.ascontiguousarray(p.a.data), np.ascontiguousarray(p.a.scales)
    b, sb = np.ascontiguousarray(p.b.data), np.ascontiguousarray(p.b.scales)
    groups = np.ascontiguousarray(p.groups, np.int32 if p.kind == "indices" else np.int64)
    if out is None:
        out = np.empty(p.out_shape, p.out_dtype)
        out.reshape(-1).view(np.uint8)[:] = 0xFF
    flags = 0
    if vec:
        rb_a = -(-plan.k // 2) if p.a_fmt == "e2m1" else plan.k
        rb_b = -(-plan.kb // 2) if p.b_fmt == "e2m1" else plan.kb
        flags |= codes.GEMM_FLAG_VEC_A if a.ctypes.data % 16 == 0 and rb_a % 16 == 0 else 0
        flags |= codes.GEMM_FLAG_VEC_B if b.ctypes.data % 16 == 0 and rb_b % 16 == 0 else 0
    lens_i64 = int(p.kind != "indices")
    u = np.array([plan.m, plan.n, plan.k, plan.kb, plan.num_groups, plan.extra, flags, lens_i64], np.uint32)
    gx, gy, gz = plan.cfg.grid
    o = _bits(out)
    rc = lib.simt_gemm(_p(a), _p(sa), _p(b), _p(sb), _p(o), _p(groups), _p(u), u.size, gx, gy, gz, order)
    assert rc == 0, lib.simt_error().decode()
    return out


def _close(got: np.ndarray, p, want: np.ndarray | None = None) -> None:
    """Against the numpy twin: fp32 relative 1e-5 of the largest magnitude, 16-bit outputs calc_diff 1e-5 and
    within one ulp elementwise (the kernel accumulates in fp32, the twin in float64)."""
    if want is None:
        want = grouped_gemm_numpy(dataclasses.replace(p, out=None if p.out is None else p.out.copy()))
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    assert np.isfinite(g64).all(), "an element the kernel should write holds the poison"
    scale = max(np.abs(w64).max(initial=0.0), 1e-30)
    if got.dtype == np.float32:
        assert np.abs(g64 - w64).max(initial=0.0) <= 1e-5 * scale
    else:
        assert mxrt.calc_diff(g64, w64) <= 1e-5 or np.abs(w64).max(initial=0) == 0
        ulp = np.abs(w64) * (2.0**-7 if got.dtype == ml_dtypes.bfloat16 else 2.0**-10) + 1e-30
        assert (np.abs(g64 - w64) <= ulp + 1e-5 * scale).all()


def _rand(rng, shape):
    """Normal values with a random power-of-two scale per row (scale bytes vary across rows and groups)."""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, (*shape[:-1], 1)))).astype(np.float32)


def _fwd(rng, lens, n, k, fa="e4m3", fb="e4m3", out_dtype="bfloat16", dgrad_pad=0):
    lens = np.asarray(lens, np.int64)
    m = int(lens.sum())
    qa = mxrt.quantize_mx(_rand(rng, (m, k)), fa)
    w = _rand(rng, (lens.size, n, k))
    if dgrad_pad:  # b as quantize_mx_dual_grouped lays it out: k padded with zero blocks
        qb = mxrt.quantize_mx_dual_grouped(w, fb, pad=dgrad_pad).row
    else:
        qb = mxrt.quantize_mx(w, fb, axis=2)
    return grouped_gemm_problem(qa, qb, lens, kind="lens", out_dtype=out_dtype)


LENS = {
    "balanced4": [64, 64, 64, 64],
    "unbalanced4": [1, 200, 0, 37],
    "empty_edges": [0, 130, 0, 0],
    "one_group": [300],
    "g32": [0, 3, 17, 0, 1, 40, 0, 0, 5, 9, 128, 2, 0, 0, 0, 7] * 2,
    "all_empty": [0, 0, 0],
}


@pytest.mark.parametrize("name", list(LENS))
def test_forward_lens(build_dir, name):
    rng = np.random.default_rng(len(name))
    p = _fwd(rng, LENS[name], n=72, k=96)
    _close(run_grouped(build_dir, p, order=2), p)


@pytest.mark.parametrize(
    "fa,fb,out_dtype,k",
    [
        ("e4m3", "e4m3", "float32", 80),
        ("e5m2", "e4m3", "float16", 64),
        ("e2m1", "e2m1", "bfloat16", 96),
        ("e4m3", "e2m1", "float32", 64),
    ],
)
def test_forward_formats_and_k_tails(build_dir, fa, fb, out_dtype, k):
    rng = np.random.default_rng(k)
    p = _fwd(rng, [70, 0, 150], n=40, k=k, fa=fa, fb=fb, out_dtype=out_dtype)
    _close(run_grouped(build_dir, p, order=1, vec=k % 16 == 0), p)


def test_dgrad_with_padded_weight(build_dir):
    """dgrad: b = quantize_mx_dual_grouped(W).col-like [G, k, n_pad] with whole zero blocks past a's K."""
    rng = np.random.default_rng(7)
    lens = np.array([33, 0, 95])
    go = _rand(rng, (int(lens.sum()), 72))
    w = _rand(rng, (3, 72, 40))  # W [G, n, k]; dgrad multiplies grad_out [M, n] by W_g [n, k]
    wt = mxrt.quantize_mx_dual_grouped(w, pad=128).col  # [G, k, n_pad = 128] along n
    assert wt.shape == (3, 40, 128)
    p = grouped_gemm_problem(mxrt.quantize_mx(go), wt, lens, kind="lens", out_dtype="float32")
    got = run_grouped(build_dir, p)
    _close(got, p)
    offs = mxrt.group_offsets(lens)
    ref = np.concatenate([go[offs[g] : offs[g + 1]] @ w[g] for g in range(3)])
    assert mxrt.calc_diff(got, ref) < 1e-3


def test_one_group_is_the_dense_kernel_bitwise(build_dir):
    rng = np.random.default_rng(3)
    m, n, k = 200, 72, 160
    qa, qb = mxrt.quantize_mx(_rand(rng, (m, k))), mxrt.quantize_mx(_rand(rng, (n, k)))
    p = grouped_gemm_problem(qa, (qb.data[None], qb.scales[None], "e4m3"), [m], kind="lens", out_dtype="bfloat16")
    grouped = run_grouped(build_dir, p)
    dp = gemm_problem(qa, qb, out_dtype="bfloat16")
    lib = _lib(build_dir, 10, ATOMIC=0, FMT_A=0, FMT_B=0, OUT_DTYPE=1)
    dense = np.zeros((m, n), np.uint16)
    u = np.array([m, n, k, 1, codes.GEMM_FLAG_VEC_A | codes.GEMM_FLAG_VEC_B], np.uint32)
    a, sa = np.ascontiguousarray(dp.a.data), np.ascontiguousarray(dp.a.scales)
    b, sb = np.ascontiguousarray(dp.b.data), np.ascontiguousarray(dp.b.scales)
    rc = lib.simt_gemm(_p(a), _p(sa), _p(b), _p(sb), _p(dense), None, _p(u), u.size, 2, 2, 1, 0)
    assert rc == 0, lib.simt_error().decode()
    np.testing.assert_array_equal(_bits(grouped), dense)


def _device_semantics(lens: np.ndarray, m: int) -> np.ndarray:
    """What the kernel makes of lengths the host cannot check: clamp to [0, m], cut the running sum at m."""
    clamped = np.clip(lens, 0, m)
    ends = np.minimum(np.cumsum(clamped), m)
    return np.diff(np.concatenate([[0], ends]))


@pytest.mark.parametrize("bad", [[10, 20, 5], [100, 200, 300], [-5, 150, -1], [0, 0, 0]], ids=str)
def test_device_lens_the_host_cannot_check(build_dir, bad):
    """Lengths summing short of M (tail rows zeroed), past M (cut), negative (0): the kernel's rule, no fault."""
    rng = np.random.default_rng(11)
    p = _fwd(rng, [60, 60, 60], n=40, k=64, out_dtype="float32")
    p_bad = dataclasses.replace(p, groups=np.asarray(bad, np.int64))
    got = run_grouped(build_dir, p_bad)
    p_eff = dataclasses.replace(p, groups=_device_semantics(np.asarray(bad), p.m))
    want = grouped_gemm_numpy(p_eff)  # rows past the last group: zeros
    _close(got, p, want)


@pytest.mark.parametrize("alignment", [128, 32, 1], ids=lambda a: f"align{a}")
def test_indices_layout_skips_minus_one_rows(build_dir, alignment):
    rng = np.random.default_rng(alignment)
    lens = np.array([50, 0, 130, 7])
    ids = mxrt.contiguous_m_indices(lens, alignment)
    m, n, k = ids.size, 72, 64
    qa = mxrt.quantize_mx(_rand(rng, (m, k)))
    qb = mxrt.quantize_mx(_rand(rng, (4, n, k)), axis=2)
    poison = np.full((m, n), 123.0, ml_dtypes.bfloat16)
    p = grouped_gemm_problem(qa, qb, ids, kind="indices", out=poison.copy(), out_dtype="bfloat16")
    got = run_grouped(build_dir, p, order=2, out=poison.copy())
    want = grouped_gemm_numpy(dataclasses.replace(p, out=poison.copy()))
    skipped = ids < 0
    assert (got[skipped].astype(np.float32) == 123.0).all()
    _close(got[~skipped], p, want[~skipped])


def test_indices_any_per_row_ids(build_dir):
    """Ids need not be contiguous: every row gets its own group's product (several groups per tile)."""
    rng = np.random.default_rng(5)
    m, n, k, g = 260, 40, 64, 5
    ids = rng.integers(-1, g, m).astype(np.int32)
    qa = mxrt.quantize_mx(_rand(rng, (m, k)))
    qb = mxrt.quantize_mx(_rand(rng, (g, n, k)), axis=2)
    poison = np.full((m, n), -7.0, ml_dtypes.bfloat16)
    p = grouped_gemm_problem(qa, qb, ids, kind="indices", out=poison.copy())
    got = run_grouped(build_dir, p, out=poison.copy())
    want = grouped_gemm_numpy(dataclasses.replace(p, out=poison.copy()))
    np.testing.assert_array_equal(got[ids < 0].astype(np.float32), -7.0)
    _close(got, p, want)


def test_masked_layout(build_dir):
    rng = np.random.default_rng(9)
    g, max_m, n, k = 6, 150, 72, 96
    masked = np.array([0, 1, 150, 128, 129, 77])
    qa = mxrt.quantize_mx(_rand(rng, (g * max_m, k)))
    qb = mxrt.quantize_mx(_rand(rng, (g, n, k)), axis=2)
    poison = np.full((g * max_m, n), 5.0, ml_dtypes.bfloat16)
    p = grouped_gemm_problem(qa, qb, masked, kind="masked", max_m=max_m, out=poison.copy())
    got = run_grouped(build_dir, p, order=2, out=poison.copy())
    want = grouped_gemm_numpy(dataclasses.replace(p, out=poison.copy()))
    owned = (np.arange(max_m)[None, :] < masked[:, None]).reshape(-1)
    np.testing.assert_array_equal(got[~owned].astype(np.float32), 5.0)
    _close(got, p, want)


def _wgrad(rng, lens, n, k, align=32, out_dtype="float32", accumulate=False, fmt="e4m3"):
    lens = np.asarray(lens, np.int64)
    m = int(lens.sum())
    go, x = _rand(rng, (m, n)), _rand(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, fmt, colwise=True, col_align=align)
    qx = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=True, col_align=align)
    out = None
    if accumulate:
        out = rng.standard_normal((lens.size, n, k)).astype(OUT[out_dtype])
    p = wgrad_problem(qg, qx, lens, align=align, out_dtype=out_dtype, out=out, accumulate=accumulate)
    return p, go, x


@pytest.mark.parametrize(
    "lens,align",
    [([64, 64, 64, 64], 32), ([1, 200, 0, 37], 32), ([300], 128), ([0, 3, 17, 0, 1, 40, 0, 5] * 4, 32)],
    ids=["balanced", "unbalanced", "one_group_128", "g32"],
)
def test_wgrad(build_dir, lens, align):
    rng = np.random.default_rng(len(lens))
    p, go, x = _wgrad(rng, lens, n=72, k=40, align=align)
    got = run_grouped(build_dir, p, order=2)
    _close(got, p)
    offs = mxrt.group_offsets(np.asarray(lens))
    ref = np.stack([go[offs[g] : offs[g + 1]].T @ x[offs[g] : offs[g + 1]] for g in range(len(lens))])
    assert mxrt.calc_diff(got, ref) < 2e-3


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_wgrad_accumulate(build_dir, out_dtype):
    rng = np.random.default_rng(21)
    p, _, _ = _wgrad(rng, [5, 0, 90], n=40, k=72, out_dtype=out_dtype, accumulate=True)
    start = p.out.copy()
    got = run_grouped(build_dir, p, out=p.out.copy())
    np.testing.assert_array_equal(_bits(got[1]), _bits(start[1]))  # an empty group leaves out unchanged
    _close(got, p)


@pytest.mark.parametrize(
    "fa,fb,out_dtype,shape",
    [
        ("e4m3", "e4m3", "bfloat16", (130, 65, 96)),
        ("e2m1", "e4m3", "float32", (64, 130, 80)),
        ("e2m1", "e2m1", "float16", (7, 13, 33)),
    ],
)
def test_dense_generic_kernel(build_dir, fa, fb, out_dtype, shape):
    """The dense gemm_mx_generic.hip (split_k 1, plain stores) on the emulator against mxrt.reference.gemm_mx: the
    kernel whose main loop the grouped one shares (tests/test_gpu_gemm.py checks it on the GPU)."""
    m, n, k = shape
    rng = np.random.default_rng(m)
    qa, qb = mxrt.quantize_mx(_rand(rng, (m, k)), fa), mxrt.quantize_mx(_rand(rng, (n, k)), fb)
    dp = gemm_problem(qa, qb, out_dtype=out_dtype)
    lib = _lib(
        build_dir,
        10,
        ATOMIC=0,
        FMT_A=codes.FMT_CODES[fa],
        FMT_B=codes.FMT_CODES[fb],
        OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[out_dtype],
    )
    got = np.empty((m, n), OUT[out_dtype])
    got.reshape(-1).view(np.uint8)[:] = 0xFF
    u = np.array([m, n, k, 1, 0], np.uint32)
    a, sa = np.ascontiguousarray(dp.a.data), np.ascontiguousarray(dp.a.scales)
    b, sb = np.ascontiguousarray(dp.b.data), np.ascontiguousarray(dp.b.scales)
    rc = lib.simt_gemm(
        _p(a), _p(sa), _p(b), _p(sb), _p(_bits(got)), None, _p(u), u.size, -(-n // 64), -(-m // 128), 1, 2
    )
    assert rc == 0, lib.simt_error().decode()
    want = mxrt.reference.gemm_mx(qa, qb, out_dtype="float64")
    g64 = got.astype(np.float64)
    assert np.isfinite(g64).all()
    if out_dtype == "float32":
        assert np.abs(g64 - want).max() <= 1e-5 * np.abs(want).max()
    else:
        assert mxrt.calc_diff(g64, want) <= 1e-5


def test_max_groups(build_dir):
    """G = 1024 (MXRT_MAX_GROUPS): the in-kernel prefix sums cover every group and the tail (5 entries per thread)."""
    rng = np.random.default_rng(1024)
    lens = rng.integers(0, 3, 1024)
    lens[-1] = 5
    p = _fwd(rng, lens, n=16, k=32, out_dtype="float32")
    _close(run_grouped(build_dir, p), p)
