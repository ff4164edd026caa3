"""The AMD grouped MX GEMM kernels (kernels_src/gemm/gemm_mx_grouped_gfx950.hip, gemm_mx_grouped_gfx942.hip) run on
the CPU against the numpy twin (mxrt.reference.grouped_gemm).

tests/support/simt_amd_host.cpp built with -DSIMT_GROUPED=1 compiles one define set of a grouped kernel for the host
(the wave64 SIMT emulator of tests/test_gemm_amd_host.py: fibers per GPU thread, MFMAs modelled from their documented
operand maps, barriers under forward / backward / scrambled fiber orders, blocks in a scrambled order). The launch is
the one mxrt/ops/grouped_gemm.py computes for the target (grouped_plan(p, "gfx950" | "gfx942")): its kernel, defines,
grid and scalars; the group lengths are read only by the kernel.

Checked: forward / dgrad by lengths (balanced, unbalanced, empty groups at the edges, unaligned M_g, G = 1, all
groups empty, G = 32), e4m3 / e5m2 / e2m1 operands (mixed and native fp4), bf16 / fp16 / fp32 out, K tails and
unaligned code rows, dgrad weights padded along K, lengths the host cannot check (short of / past M, negative), rows
outside every group never written (a poisoned out), the variable-K wgrad plain and accumulating, and one group equal
to the dense AMD kernel bit for bit (the shared main loop). Tolerances as the dense AMD emulator tests: fp32 relative
1e-5, 16-bit outputs calc_diff 1e-5 against the float64 twin.
"""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import host_compiler

import mxrt
from mxrt import codes
from mxrt.ops import grouped_gemm_kernels
from mxrt.ops.grouped_gemm import grouped_plan
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_numpy

# host SIMT emulation, one library per define set (~10 s each to build): CI still runs it
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"gfx950": 950, "gfx942": 942}
SPECS = {"gfx950": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX950, "gfx942": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX942}
OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
_LIBS: dict[tuple, ctypes.CDLL] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_amd_grouped")


def _lib(build_dir: Path, target: str, defines: dict[str, int]) -> ctypes.CDLL:
    key = (target, *sorted(defines.items()))
    if key not in _LIBS:
        tag = "_".join(f"{k}{v}" for k, v in sorted(defines.items()))
        out = build_dir / f"simt_grouped_{target}_{tag}.so"
        src = ROOT / "tests" / "support" / "simt_amd_host.cpp"
        cmd = [*host_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-psabi", "-DSIMT_GROUPED=1"]
        cmd += [f"-DSIMT_KERNEL={TARGETS[target]}", *(f"-D{k}={v}" for k, v in defines.items() if k != "THREADS")]
        proc = subprocess.run([*cmd, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        so = ctypes.CDLL(str(out))
        so.simt_error.restype = ctypes.c_char_p
        _LIBS[key] = so
    return _LIBS[key]


def _p(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype.itemsize == 2 else x


def _misaligned(c: np.ndarray) -> np.ndarray:
    """A copy of ``c`` one byte past a 16-byte boundary: the kernel must take its byte-load path."""
    buf = np.zeros(c.size + 32, np.uint8)
    start = (-buf.ctypes.data) % 16 + 1
    buf[start : start + c.size] = c.ravel()
    return buf[start : start + c.size].reshape(c.shape)


def run_amd(build_dir, target, p, *, order=2, out=None, misalign=False) -> np.ndarray:
    """Launch the host build of ``target``'s grouped kernel with grouped_plan's kernel, defines, grid and scalars;
    returns ``out`` (poisoned with 0xFF bytes where not given: an element the kernel should write and does not is
    NaN)."""
    plan = grouped_plan(p, target)
    assert plan.spec is SPECS[target], plan.spec.symbol
    assert plan.cfg.block == (256, 1, 1)
    lib = _lib(build_dir, target, dict(plan.defines))
    a, sa = np.ascontiguousarray(p.a.data), np.ascontiguousarray(p.a.scales)
    b, sb = np.ascontiguousarray(p.b.data), np.ascontiguousarray(p.b.scales)
    if misalign:
        a, b = _misaligned(a), _misaligned(b)
    groups = np.ascontiguousarray(p.groups, np.int64)
    if out is None:
        out = np.empty(p.out_shape, p.out_dtype)
        out.reshape(-1).view(np.uint8)[:] = 0xFF
    rb_a = -(-plan.k // 2) if p.a_fmt == "e2m1" else plan.k
    rb_b = -(-plan.kb // 2) if p.b_fmt == "e2m1" else plan.kb
    flags = codes.GEMM_FLAG_VEC_A if a.ctypes.data % 16 == 0 and rb_a % 16 == 0 else 0
    flags |= codes.GEMM_FLAG_VEC_B if b.ctypes.data % 16 == 0 and rb_b % 16 == 0 else 0
    u = np.array([plan.m, plan.n, plan.k, plan.kb, plan.num_groups, plan.extra, flags, 1], np.uint32)
    rc = lib.simt_grouped(_p(a), _p(sa), _p(b), _p(sb), _p(_bits(out)), _p(groups), _p(u), *plan.cfg.grid, order)
    assert rc == 0, lib.simt_error().decode()
    return out


def _close(got: np.ndarray, p, want: np.ndarray | None = None) -> None:
    """Against the numpy twin (float64 of the dequantized operands, rounded once): fp32 relative 1e-5 of the
    largest magnitude, 16-bit outputs calc_diff 1e-5 and within one ulp elementwise."""
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


def _fwd(rng, lens, n, k, fa="e4m3", fb="e4m3", out_dtype="bfloat16"):
    lens = np.asarray(lens, np.int64)
    qa = mxrt.quantize_mx(_rand(rng, (int(lens.sum()), k)), fa)
    qb = mxrt.quantize_mx(_rand(rng, (lens.size, n, k)), fb, axis=2)
    return grouped_gemm_problem(qa, qb, lens, kind="lens", out_dtype=out_dtype)


def _seed(*key) -> int:
    return zlib.crc32(repr(key).encode())


LENS = {
    "unbalanced4": [1, 200, 0, 37],  # unaligned M_g, an empty group inside, a group spanning two row tiles
    "empty_edges": [0, 130, 0, 0],
    "one_group": [300],  # G = 1
    "all_empty": [0, 0, 0],
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", list(LENS))
def test_forward_lens(build_dir, target, name):
    rng = np.random.default_rng(_seed(target, name))
    p = _fwd(rng, LENS[name], n=136, k=160)  # n: a column edge tile; k: a K tail past one 128 stage
    _close(run_amd(build_dir, target, p), p)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "fa,fb,out_dtype,k",
    [
        ("e4m3", "e4m3", "float32", 96),
        ("e5m2", "e4m3", "float16", 64),
        ("e2m1", "e2m1", "bfloat16", 192),  # native fp4 on gfx950
        ("e2m1", "e2m1", "float32", 64),
        ("e4m3", "e2m1", "bfloat16", 128),  # the e2m1 operand widened to e4m3 in LDS
    ],
    ids=lambda v: str(v),
)
def test_forward_formats_and_out_dtypes(build_dir, target, fa, fb, out_dtype, k):
    rng = np.random.default_rng(_seed(target, fa, fb, out_dtype, k))
    p = _fwd(rng, [70, 0, 150, 5], n=40, k=k, fa=fa, fb=fb, out_dtype=out_dtype)
    assert dict(grouped_plan(p, target).defines)["OUT_DTYPE"] == codes.GEMM_OUT_DTYPE_CODES[out_dtype]
    _close(run_amd(build_dir, target, p, order=_seed(k) % 3), p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_unaligned_code_rows_take_the_byte_path(build_dir, target):
    rng = np.random.default_rng(_seed(target, "mis"))
    p = _fwd(rng, [33, 0, 95], n=24, k=80)
    _close(run_amd(build_dir, target, p, misalign=True), p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_many_groups(build_dir, target):
    rng = np.random.default_rng(_seed(target, "g32"))
    p = _fwd(rng, [0, 3, 17, 0, 1, 40, 0, 0, 5, 9, 128, 2, 0, 0, 0, 7] * 2, n=16, k=64, out_dtype="float32")
    _close(run_amd(build_dir, target, p), p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_dgrad_with_padded_weight(build_dir, target):
    """dgrad: b = quantize_mx_dual_grouped(W).col [G, k, n_pad] with whole zero blocks past a's K (unread)."""
    rng = np.random.default_rng(_seed(target, "dgrad"))
    lens = np.array([33, 0, 95])
    go = _rand(rng, (int(lens.sum()), 72))
    w = _rand(rng, (3, 72, 40))
    wt = mxrt.quantize_mx_dual_grouped(w, pad=128).col  # [G, k, n_pad = 128] along n
    p = grouped_gemm_problem(mxrt.quantize_mx(go), wt, lens, kind="lens", out_dtype="float32")
    assert grouped_plan(p, target).kb == 128
    got = run_amd(build_dir, target, p)
    _close(got, p)
    offs = mxrt.group_offsets(lens)
    ref = np.concatenate([go[offs[g] : offs[g + 1]] @ w[g] for g in range(3)])
    assert mxrt.calc_diff(got, ref) < 1e-3


def _device_semantics(lens: np.ndarray, m: int) -> np.ndarray:
    """What the kernels make of lengths the host cannot check: clamp to [0, m], cut the running sum at m."""
    ends = np.minimum(np.cumsum(np.clip(lens, 0, m)), m)
    return np.diff(np.concatenate([[0], ends]))


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("bad", [[10, 20, 5], [100, 200, 300], [-5, 150, -1]], ids=str)
def test_device_lens_the_host_cannot_check(build_dir, target, bad):
    """Lengths summing short of M (tail rows zeroed), past M (cut), negative (0): the generic kernel's rule."""
    rng = np.random.default_rng(_seed(target, bad))
    p = _fwd(rng, [60, 60, 60], n=40, k=64, out_dtype="float32")
    got = run_amd(build_dir, target, dataclasses.replace(p, groups=np.asarray(bad, np.int64)))
    want = grouped_gemm_numpy(dataclasses.replace(p, groups=_device_semantics(np.asarray(bad), p.m)))
    _close(got, p, want)


@pytest.mark.parametrize("target", list(TARGETS))
def test_rows_past_m_are_never_written(build_dir, target):
    """An out buffer with rows past M: the kernel writes exactly rows [0, M) (the tail of the launch's last group and
    the idle tiles write nothing past them)."""
    rng = np.random.default_rng(_seed(target, "poison"))
    p = _fwd(rng, [5, 0, 70], n=24, k=64, out_dtype="float32")
    big = np.full((p.m + 64, p.n), 7.0, np.float32)
    got = run_amd(build_dir, target, p, out=big[: p.m])
    assert (big[p.m :] == 7.0).all()
    _close(got, p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_one_group_is_the_dense_kernel_bitwise(build_dir, target):
    """G = 1 against the dense AMD kernel of the same target on the same emulator: the shared main loop
    (gemm_gfx950_tile.h / gemm_gfx942_tile.h) gives the same bits."""
    from test_gemm_amd_host import _lib as dense_lib
    from test_gemm_amd_host import run_host

    rng = np.random.default_rng(_seed(target, "dense"))
    m, n, k = 200, 72, 160
    qa, qb = mxrt.quantize_mx(_rand(rng, (m, k))), mxrt.quantize_mx(_rand(rng, (n, k)))
    p = grouped_gemm_problem(qa, (qb.data[None], qb.scales[None], "e4m3"), [m], kind="lens", out_dtype="bfloat16")
    grouped = run_amd(build_dir, target, p)
    dense, _, _ = run_host(dense_lib(build_dir, TARGETS[target]), target, qa, qb, out_dtype="bfloat16")
    np.testing.assert_array_equal(_bits(grouped), _bits(dense))


def _wgrad(rng, lens, n, k, align=32, out_dtype="float32", accumulate=False, fmt="e4m3"):
    lens = np.asarray(lens, np.int64)
    m = int(lens.sum())
    go, x = _rand(rng, (m, n)), _rand(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, fmt, colwise=True, col_align=align)
    qx = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=True, col_align=align)
    out = rng.standard_normal((lens.size, n, k)).astype(OUT[out_dtype]) if accumulate else None
    p = wgrad_problem(qg, qx, lens, align=align, out_dtype=out_dtype, out=out, accumulate=accumulate)
    return p, go, x


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "lens,align,fmt,out_dtype",
    [
        ([1, 200, 0, 37], 32, "e4m3", "float32"),
        ([300], 128, "e4m3", "bfloat16"),
        ([0, 3, 17, 0, 1, 40, 0, 5] * 2, 32, "e2m1", "float32"),
        ([64, 0, 130], 64, "e2m1", "bfloat16"),
    ],
    ids=["unbalanced-e4m3-f32", "one_group_128-bf16", "g16-e2m1-f32", "e2m1-bf16-align64"],
)
def test_wgrad(build_dir, target, lens, align, fmt, out_dtype):
    rng = np.random.default_rng(_seed(target, lens, fmt))
    p, go, x = _wgrad(rng, lens, n=72, k=136, align=align, fmt=fmt, out_dtype=out_dtype)
    got = run_amd(build_dir, target, p)
    _close(got, p)
    offs = mxrt.group_offsets(np.asarray(lens))
    ref = np.stack([go[offs[g] : offs[g + 1]].T @ x[offs[g] : offs[g + 1]] for g in range(len(lens))])
    assert mxrt.calc_diff(got, ref) < (2e-3 if fmt == "e4m3" else 3e-2)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_wgrad_accumulate(build_dir, target, out_dtype):
    rng = np.random.default_rng(_seed(target, out_dtype, "acc"))
    p, _, _ = _wgrad(rng, [5, 0, 90], n=40, k=72, out_dtype=out_dtype, accumulate=True)
    start = p.out.copy()
    got = run_amd(build_dir, target, p, out=p.out.copy())
    np.testing.assert_array_equal(_bits(got[1]), _bits(start[1]))  # an empty group leaves out unchanged
    _close(got, p)


# ---- the launcher end to end: backend="auto" on a gfx950 / gfx942 device --------------------------------------


@pytest.fixture(params=list(TARGETS))
def amd_device(request, monkeypatch, build_dir):
    """A stand-in cupy (tests/test_grouped_gemm_device_path.py) and device of the given AMD target whose kernel
    builds run the host SIMT build of the kernel the launcher chose; records (symbol, defines, grid) per launch."""
    import sys

    from test_grouped_gemm_device_path import _fake_cupy

    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler

    target = request.param
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    launches = []

    def build(spec, d, arch, **_kw):
        assert spec is SPECS[target], spec.symbol  # the tests below only run problems the AMD kernel takes
        lib = _lib(build_dir, target, dict(d))

        def kernel(grid, block, args, shared_mem=0):
            assert block == (256, 1, 1) and len(args) == 14
            assert all(type(a).__module__ == "cupy" for a in args[:6])  # never a host copy
            ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args[:6]]
            u = np.array([int(v) for v in args[6:]], np.uint32)
            rc = lib.simt_grouped(*ptrs, ctypes.c_void_p(u.ctypes.data), *grid, 2)
            assert rc == 0, lib.simt_error().decode()
            launches.append((spec.symbol, dict(d), grid))

        return kernel

    fake = arch_mod.Arch("amd", target, "fake", 64, 256, 65536)
    monkeypatch.setattr(compiler, "build", build)
    monkeypatch.setattr(arch_mod, "get_arch", lambda *a, **k: fake)
    return target, launches


def test_auto_on_an_amd_device_runs_the_amd_kernel(amd_device):
    """mxrt.grouped_gemm_mx / _wgrad with device operands and device group_lens: the launcher picks the target's
    AMD grouped kernel (backend="auto"), packs its arguments, and the result matches the numpy twin."""
    import sys

    from test_grouped_gemm_device_path import dev

    target, launches = amd_device
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(_seed(target, "auto"))
    lens = np.array([37, 0, 150, 1])
    m, n, k = int(lens.sum()), 72, 96
    x, w, dy = _rand(rng, (m, k)), _rand(rng, (4, n, k)), _rand(rng, (m, n))
    qx, qw, qdy = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(dy)
    for a, b in ((qx, qw.row), (qdy, qw.col)):  # forward, dgrad
        got = mxrt.grouped_gemm_mx(dev(a), dev(b), cp.asarray(lens, np.int32))
        assert type(got).__module__ == "cupy" and got.dtype == np.uint16  # bf16 bits
        p = grouped_gemm_problem(a, b, lens)
        _close(got.get().view(ml_dtypes.bfloat16), p)
    qg = mxrt.quantize_mx_grouped(dy, lens, colwise=True, col_align=32)
    qc = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32)
    start = _rand(rng, (4, n, k))
    acc = cp.asarray(start)
    mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qc.col), cp.asarray(lens), out=acc, accumulate=True)
    _close(np.asarray(acc), wgrad_problem(qg, qc, lens, out=start.copy(), accumulate=True))
    assert [(s, d["MODE"], d["ACCUM"]) for s, d, _ in launches] == [(f"gemm_mx_grouped_{target}", 0, 0)] * 2 + [
        (f"gemm_mx_grouped_{target}", 3, 1)
    ]
    assert launches[0][2] == (1, -(-m // 128) + 4 + 1, 1)
