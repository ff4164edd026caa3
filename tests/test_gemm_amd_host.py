"""The AMD MFMA GEMM kernels (gfx950 / gfx942) run on the CPU: their lane logic, against the float64 reference.

No AMD GPU is available, so tests/support/simt_amd_host.cpp compiles kernels_src/gemm/gemm_mx_gfx950.hip and
gemm_mx_gfx942.hip for the host (each GPU thread a fiber, wave64 collectives for the MFMAs and lane permutes,
barriers with scrambled fiber orders) and emulates the matrix instructions from their documented operand maps.
The instruction emulations are first checked on their own against independent models (mxrt.reference.emulate for
the gfx950 scaled MFMA, an ml_dtypes FNUZ decode of the composable_kernel operand map for gfx942); then the GEMMs,
launched with the plan that mxrt/ops/gemm_amd.py computes, are compared with mxrt.reference.gemm_mx on the
dequantized inputs and, loosely, on the unquantized ones. What this cannot prove: the hardware's accumulation
order and internal precision, and the exact behaviour of buffer loads and packed atomics (modelled here).
"""

from __future__ import annotations

import ctypes
import subprocess
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_device_codecs import _compiler

import mxrt
from mxrt import codes, reference
from mxrt.checks.gemm import calc_diff_limit
from mxrt.ops import gemm_amd, gemm_amd_kernels
from mxrt.problems import GEMM_FORMAT_PAIRS, gemm_problem
from mxrt.reference import emulate

# host SIMT emulation of the AMD GEMMs (tests/support/simt_amd_host.cpp): ~25 s; CI still runs it
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"gfx950": 950, "gfx942": 942}
FMT = {f: codes.FMT_CODES[f] for f in ("e4m3", "e5m2", "e2m1")}  # the formats the host MFMA emulates
OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
_LIBS: dict[int, ctypes.CDLL] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if _compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_amd")


def _lib(build_dir: Path, kernel: int) -> ctypes.CDLL:
    if kernel not in _LIBS:
        out = build_dir / f"simt_amd_{kernel}.so"
        src = ROOT / "tests" / "support" / "simt_amd_host.cpp"
        cmd = [*_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-psabi", f"-DSIMT_KERNEL={kernel}"]
        proc = subprocess.run([*cmd, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        so = ctypes.CDLL(str(out))
        so.simt_error.restype = ctypes.c_char_p
        so.simt_collectives.restype = ctypes.c_ulonglong
        _LIBS[kernel] = so
    return _LIBS[kernel]


def _p(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


def _codes(rng, shape, fmt) -> np.ndarray:
    """Random finite codes of ``fmt`` (one per byte; e2m1 in the low nibble)."""
    if fmt == "e2m1":
        return rng.integers(0, 16, shape, dtype=np.uint8)
    c = rng.integers(0, 256, shape, dtype=np.uint8)
    bad = (c & 0x7F) >= (0x7C if fmt == "e5m2" else 0x7F)
    return np.where(bad, c & 0x3F, c).astype(np.uint8)


# ---- the instruction emulations on their own -------------------------------------------------------------------

PAIRS_950 = [(a, b) for a in FMT for b in FMT]


@pytest.mark.parametrize("opsel", [(0, 0), (1, 2), (3, 1)], ids=lambda o: f"opsel{o[0]}{o[1]}")
@pytest.mark.parametrize("pair", PAIRS_950, ids=lambda p: "x".join(p))
def test_host_mfma_scale_matches_reference_emulator(build_dir, pair, opsel):
    """simt's v_mfma_scale_f32_16x16x128_f8f6f4 == mxrt.reference.emulate.mfma_scale on random registers, with
    junk in the scale bytes the opsel does not pick."""
    lib = _lib(build_dir, 950)
    rng = np.random.default_rng(zlib.crc32(repr((pair, opsel)).encode()))
    fa, fb = pair
    ta, tb = _codes(rng, (16, 128), fa), _codes(rng, (16, 128), fb)
    a_reg, b_reg = emulate.mfma_pack_operand(ta, fa), emulate.mfma_pack_operand(tb, fb)
    sa_log = rng.integers(110, 145, (16, 4), dtype=np.uint8)
    sb_log = rng.integers(110, 145, (16, 4), dtype=np.uint8)
    sa = emulate.mfma_pack_scales(sa_log, opsel=opsel[0], fill=0xFF)  # unpicked bytes NaN: a wrong byte shows
    sb = emulate.mfma_pack_scales(sb_log, opsel=opsel[1], fill=0xFF)
    c_d = rng.standard_normal((16, 16)).astype(np.float32)
    want = emulate.mfma_scale(
        "16x16x128", a_reg, b_reg, sa, sb, fmt_a=fa, fmt_b=fb, opsel_a=opsel[0], opsel_b=opsel[1], c=c_d
    )
    c_regs = np.ascontiguousarray(emulate.mfma_d_to_regs(c_d), np.float32)
    d_regs = np.full((64, 4), np.nan, np.float32)
    rc = lib.simt_instr(
        950, _p(a_reg), _p(b_reg), _p(c_regs), _p(sa), _p(sb), FMT[fa], FMT[fb], opsel[0], opsel[1], _p(d_regs)
    )
    assert rc == 0, lib.simt_error()
    got = emulate.mfma_regs_to_d(d_regs)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)


def _fnuz(codes: np.ndarray, bf8: bool) -> np.ndarray:
    dt = ml_dtypes.float8_e5m2fnuz if bf8 else ml_dtypes.float8_e4m3fnuz
    return codes.view(dt).astype(np.float64)


@pytest.mark.parametrize("pair", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["fp8_fp8", "fp8_bf8", "bf8_fp8", "bf8_bf8"])
def test_host_mfma_fp8_matches_ck_map(build_dir, pair):
    """simt's v_mfma_f32_16x16x32_*: A[i][k] = lane i + 16*(k//8), byte k%8 (ck_tile kAMLane 16, kABKLane 4,
    kABKPerLane 8), decoded as FNUZ by ml_dtypes; D = C + A @ B.T in the 16x16 C/D map."""
    lib = _lib(build_dir, 942)
    rng = np.random.default_rng(zlib.crc32(repr(pair).encode()))
    a_reg = rng.integers(0, 256, (64, 8), dtype=np.uint8)
    b_reg = rng.integers(0, 256, (64, 8), dtype=np.uint8)
    a_reg[a_reg == 0x80] = 0x81  # no NaN inputs
    b_reg[b_reg == 0x80] = 0x01
    i, k = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    A = _fnuz(a_reg[i + 16 * (k // 8), k % 8], pair[0])
    B = _fnuz(b_reg[i + 16 * (k // 8), k % 8], pair[1])
    c_d = rng.standard_normal((16, 16)).astype(np.float32)
    want = (c_d + A @ B.T).astype(np.float32)
    c_regs = np.ascontiguousarray(emulate.mfma_d_to_regs(c_d), np.float32)
    d_regs = np.full((64, 4), np.nan, np.float32)
    zeros = np.zeros(64, np.uint32)
    rc = lib.simt_instr(942, _p(a_reg), _p(b_reg), _p(c_regs), _p(zeros), _p(zeros), *pair, 0, 0, _p(d_regs))
    assert rc == 0, lib.simt_error()
    np.testing.assert_allclose(emulate.mfma_regs_to_d(d_regs), want, rtol=1e-6, atol=1e-30)


# ---- the GEMM kernels ------------------------------------------------------------------------------------------


def _operands(m, n, k, fa, fb, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-5, 6, (m, 1)))
    w = rng.standard_normal((n, k)) * np.exp2(rng.integers(-5, 6, (n, 1)))
    return x, w, mxrt.quantize_mx(x, fa, axis=1), mxrt.quantize_mx(w, fb, axis=1)


def _pieces(q, layout, u32=False):
    s = np.asarray(q.scales)
    if layout is not None:
        s = mxrt.preshuffle_scales(s, layout, dtype=np.uint32 if u32 else None, backend="numpy")
    return (np.ascontiguousarray(q.data), np.ascontiguousarray(s), q.fmt, q.shape[1])


def run_host(
    lib,
    target,
    qa,
    qb,
    *,
    out_dtype="float32",
    split_k=1,
    deterministic=True,
    layouts=(None, None),
    u32=(False, False),
    order=2,
    misalign=False,
):
    """Launch the host build with gemm_amd.plan's grid and arguments; returns (out, plan, counters)."""
    pa, pb = _pieces(qa, layouts[0], u32[0]), _pieces(qb, layouts[1], u32[1])
    if misalign:  # codes one byte past a 16-byte boundary: the kernel must take its byte-load path

        def shift(c):
            buf = np.zeros(c.size + 32, np.uint8)
            start = (-buf.ctypes.data) % 16 + 1
            buf[start : start + c.size] = c.ravel()
            return buf[start : start + c.size].reshape(c.shape)

        pa, pb = (shift(pa[0]), *pa[1:]), (shift(pb[0]), *pb[1:])
    p = gemm_problem(
        pa,
        pb,
        out_dtype=out_dtype,
        split_k=split_k,
        deterministic=deterministic,
        a_scale_layout=layouts[0],
        b_scale_layout=layouts[1],
    )
    out = np.full((p.m, p.n), 0xA5A5, np.uint16).view(np.float16) if out_dtype != "float32" else None
    out = out.view(OUT[out_dtype]) if out is not None else np.full((p.m, p.n), np.nan, np.float32)
    assert gemm_amd.unsupported(target, p, pa[0], pb[0], pa[1], pb[1], out) is None
    pl = gemm_amd.plan(target, p, pa[0], pb[0], pa[1], pb[1], out)
    ws = np.full(pl.workspace, np.nan, np.float32) if pl.workspace else None
    counters = np.zeros(pl.counters, np.uint32) if pl.counters else None
    if pl.mode == gemm_amd.MODE_ATOMIC:
        out[...] = 0
    rc = lib.simt_gemm(
        FMT[p.a_fmt],
        FMT[p.b_fmt],
        dict(pl.defines)["EDGE"],
        _p(pa[0]),
        _p(pb[0]),
        _p(pa[1]),
        _p(pb[1]),
        _p(out),
        _p(ws),
        _p(counters),
        *pl.scalars,
        *pl.config.grid,
        order,
    )
    assert rc == 0, lib.simt_error()
    return out, pl, counters


def check(out, qa, qb, x, w, out_dtype):
    d64 = reference.gemm_mx(qa, qb, out_dtype="float64")
    got = out.astype(np.float64)
    assert np.isfinite(got).all()
    if out_dtype == "float32":
        assert reference.relative_error(d64, got) <= 1e-5
    else:
        assert reference.calc_diff(d64, got) <= 1e-5
    # semantic drift vs the unquantized product: no worse than the reference's own (the rows here span 2^-5..2^5,
    # which moves calc_diff around DeepGEMM's randn thresholds; test_gemm_randn_thresholds checks those)
    xw = x @ w.T
    ref_out = reference.gemm_mx(qa, qb, out_dtype=out_dtype).astype(np.float64)
    assert reference.calc_diff(xw, got) <= 1.01 * reference.calc_diff(xw, ref_out) + 1e-6


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", list(GEMM_FORMAT_PAIRS), ids=lambda p: "x".join(p))
def test_gemm_randn_thresholds(build_dir, target, pair):
    """DeepGEMM's calc_diff limits against the unquantized product on randn inputs (MX_REFERENCE.md 5)."""
    lib = _lib(build_dir, TARGETS[target])
    rng = np.random.default_rng(zlib.crc32(repr((target, pair, "randn")).encode()))
    x, w = rng.standard_normal((64, 256)), rng.standard_normal((96, 256))
    qa, qb = mxrt.quantize_mx(x, pair[0], axis=1), mxrt.quantize_mx(w, pair[1], axis=1)
    out, _, _ = run_host(lib, target, qa, qb, out_dtype="bfloat16")
    assert reference.calc_diff(x @ w.T, out.astype(np.float64)) <= calc_diff_limit(*pair)
    assert reference.calc_diff(reference.gemm_mx(qa, qb, out_dtype="float64"), out.astype(np.float64)) <= 1e-5


SHAPES = [(32, 48, 100), (128, 128, 256), (5, 3, 31), (130, 20, 160), (17, 140, 33)]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", list(GEMM_FORMAT_PAIRS), ids=lambda p: "x".join(p))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_every_pair_and_shape(build_dir, target, pair, shape):
    m, n, k = shape
    lib = _lib(build_dir, TARGETS[target])
    x, w, qa, qb = _operands(m, n, k, *pair, seed=zlib.crc32(repr((target, pair, shape)).encode()))
    out, pl, _ = run_host(lib, target, qa, qb, order=zlib.crc32(repr(shape).encode()) % 3)
    assert pl.config.grid == (-(-n // 128), -(-m // 128), 1)
    assert dict(pl.defines)["EDGE"] == (
        0 if (shape == (128, 128, 256) and target == "gfx950") or shape == (128, 128, 256) else 1
    )
    check(out, qa, qb, x, w, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("e5m2", "e4m3")], ids=lambda p: "x".join(p))
def test_gemm_16bit_outputs(build_dir, target, out_dtype, pair):
    lib = _lib(build_dir, TARGETS[target])
    x, w, qa, qb = _operands(40, 72, 256, *pair, seed=zlib.crc32(repr((target, out_dtype, pair)).encode()))
    out, _, _ = run_host(lib, target, qa, qb, out_dtype=out_dtype)
    check(out, qa, qb, x, w, out_dtype)
    want = reference.gemm_mx(qa, qb, out_dtype=out_dtype)
    # the fp32 accumulation order may move a rounding by one ulp, rarely
    assert np.mean(out.view(np.uint16) != want.view(np.uint16)) < 0.02


LAYOUTS = [("aiter32x8", "aiter32x8"), ("turbo16x4", None), (None, "turbo16x4"), ("aiter32x8", "turbo16x4")]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda lt: f"{lt[0]}-{lt[1]}")
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e4m3")], ids=lambda p: "x".join(p))
def test_gemm_preshuffled_scales(build_dir, target, layouts, pair):
    """aiter32x8 (one dword per lane for two tiles and two K steps, opsel 0/1) and turbo16x4 (uint8 and the
    zero-extended uint32 form) read in place; shapes that pad both the rows and the K blocks."""
    lib = _lib(build_dir, TARGETS[target])
    x, w, qa, qb = _operands(70, 130, 300, *pair, seed=zlib.crc32(repr((target, layouts, pair)).encode()))
    out, pl, _ = run_host(lib, target, qa, qb, layouts=layouts, u32=(False, layouts[1] == "turbo16x4"))
    assert pl.scalars[4] == codes.SCALE_LAYOUT_CODES[layouts[0]]
    u32 = codes.SCALE_LAYOUT_TURBO16X4_U32
    assert pl.scalars[5] == (u32 if layouts[1] == "turbo16x4" else codes.SCALE_LAYOUT_CODES[layouts[1]])
    check(out, qa, qb, x, w, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "split_k,deterministic,out_dtype,layouts",
    [
        (3, True, "float32", (None, None)),
        (4, True, "bfloat16", ("aiter32x8", "aiter32x8")),  # splits of 2 and 3 blocks: aiter's byte path
        (2, False, "float32", (None, None)),
        (3, False, "bfloat16", (None, None)),
        (2, False, "float16", ("turbo16x4", None)),
    ],
    ids=["det3-f32", "det4-bf16-aiter", "atomic2-f32", "atomic3-bf16", "atomic2-f16-turbo"],
)
def test_gemm_split_k(build_dir, target, split_k, deterministic, out_dtype, layouts):
    lib = _lib(build_dir, TARGETS[target])
    m, n, k = 130, 36, 330  # 11 K blocks: uneven splits, a K tail, an M edge tile
    x, w, qa, qb = _operands(m, n, k, "e4m3", "e4m3", seed=zlib.crc32(repr((target, split_k, out_dtype)).encode()))
    out, pl, counters = run_host(
        lib, target, qa, qb, out_dtype=out_dtype, split_k=split_k, deterministic=deterministic, layouts=layouts
    )
    assert pl.config.grid[2] == split_k
    assert pl.mode == (gemm_amd.MODE_WORKSPACE if deterministic else gemm_amd.MODE_ATOMIC)
    if deterministic:
        assert (counters == 0).all()  # the last CTA of each tile reset its counter
        again, _, _ = run_host(lib, target, qa, qb, out_dtype=out_dtype, split_k=split_k, layouts=layouts, order=1)
        assert (again.view(np.uint8) == out.view(np.uint8)).all()  # other fiber order, same bits
    if out_dtype != "float32" and not deterministic:  # each split rounds to 16 bits before its atomic add
        d64 = reference.gemm_mx(qa, qb, out_dtype="float64")
        assert reference.calc_diff(d64, out.astype(np.float64)) <= 1e-4
        return
    check(out, qa, qb, x, w, out_dtype)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "pair,split_k,deterministic",
    [
        (("e4m3", "e4m3"), 1, True),
        (("e2m1", "e2m1"), 1, True),
        (("e4m3", "e2m1"), 2, True),
        (("e5m2", "e4m3"), 2, False),
    ],
    ids=["e4m3", "e2m1", "mixed-det2", "e5m2-atomic2"],
)
def test_gemm_interior_build(build_dir, target, pair, split_k, deterministic):
    """m, n multiples of 128 and K ranges multiples of the stage: the plan picks the EDGE=0 build (no masking)."""
    lib = _lib(build_dir, TARGETS[target])
    x, w, qa, qb = _operands(256, 128, 512, *pair, seed=zlib.crc32(repr((target, pair, "interior")).encode()))
    out, pl, counters = run_host(
        lib, target, qa, qb, split_k=split_k, deterministic=deterministic, layouts=("aiter32x8", None)
    )
    assert dict(pl.defines)["EDGE"] == 0
    assert counters is None or (counters == 0).all()
    check(out, qa, qb, x, w, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1")], ids=lambda p: "x".join(p))
def test_gemm_unaligned_codes_take_the_byte_path(build_dir, target, pair):
    lib = _lib(build_dir, TARGETS[target])
    x, w, qa, qb = _operands(20, 24, 128, *pair, seed=zlib.crc32(repr((target, pair, "mis")).encode()))
    out, pl, _ = run_host(lib, target, qa, qb, misalign=True)
    assert pl.scalars[8] == 0 and dict(pl.defines)["EDGE"] == 1  # no VEC flag
    check(out, qa, qb, x, w, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
def test_nan_scale_propagates_to_its_rows_only(build_dir, target):
    lib = _lib(build_dir, TARGETS[target])
    _, _, qa, qb = _operands(20, 24, 96, "e4m3", "e4m3", seed=7)
    s = np.array(qa.scales)
    s[3, 1] = 0xFF
    qa = mxrt.MXArray(data=qa.data, scales=s, fmt="e4m3", block_size=32, axis=1, shape=qa.shape, scale_mode="given")
    out, _, _ = run_host(lib, target, qa, qb)
    assert np.isnan(out[3]).all()
    rest = np.delete(out, 3, axis=0).astype(np.float64)
    want = np.delete(reference.gemm_mx(qa, qb, out_dtype="float64"), 3, axis=0)
    assert reference.relative_error(want, rest) <= 1e-5


def test_fmt_pairs_match_the_reference_list():
    assert gemm_amd_kernels.GEMM_AMD_FMT_PAIRS == tuple((FMT[a], FMT[b]) for a, b in GEMM_FORMAT_PAIRS)
