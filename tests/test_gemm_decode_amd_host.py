"""The AMD decode GEMM kernels (kernels_src/gemm/gemm_mx_decode_gfx950.hip, gemm_mx_decode_gfx942.hip) run on the
CPU against the float64 reference of the dequantized inputs (mxrt.reference.gemm_mx).

tests/support/simt_amd_host.cpp built with -DSIMT_DECODE=1 compiles one define set (A_FMT, B_FMT, MT) of a decode
kernel for the host: the wave64 SIMT emulator of tests/test_gemm_amd_host.py (fibers per GPU thread, MFMAs and
ds_bpermute as wave collectives modelled from the documented operand maps, barriers under forward / backward /
scrambled fiber orders, blocks in a scrambled order). The launch is the one mxrt/ops/gemm_decode_amd.py computes
(plan: kernel, defines, grid, split; scalars) and the split-K finish is the path's (fp32 slices summed in split
order like gemm_mx_splitk_reduce, or fp32 atomics into a zeroed buffer). Outputs and workspaces are poisoned.

Checked: M in {1, 2, 7, 16, 33, 64} (every token tile), n and K tails (a partial CTA of weight rows, K not a
multiple of the 128 step, a K block tail), every format pair, bf16 / fp16 / fp32 out, split-K (the caller's and the
path's own, deterministic bitwise across fiber orders, atomic), preshuffled scales, extreme scale pairs (one
factor at 2^-127 or 2^127, the pair's product normal) and NaN blocks (their token row / weight column only), and
`auto` end to end on a fake gfx950 / gfx942 device. Weight codes in the aiter 16x16 layout (b_weight_layout=
"aiter16x16", define WLB = 1: a build of its own): every format pair, token tile, n / row-byte padding, split-K
mode, preshuffled weight scales, extreme and NaN scales, each bitwise equal to the row-major launch; `auto` reads
the caller's shuffled buffer in place at m <= 64 and hands the dense path row-major codes above. Bars: fp32
relative 1e-5 of the largest magnitude, 16-bit calc_diff 1e-5. What this cannot prove: the hardware's accumulation
order and internal precision, buffer-load and atomic behaviour (modelled), and any timing.
"""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import host_compiler

import mxrt
from mxrt import codes, reference
from mxrt.ops import gemm_decode_amd
from mxrt.ops import gemm_decode_amd_kernels as K
from mxrt.problems import GEMM_FORMAT_PAIRS, gemm_problem

# host SIMT emulation, one library per define set (~3-10 s each to build): CI still runs it
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"gfx950": 950, "gfx942": 942}
OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
F = codes.FMT_CODES
_LIBS: dict[tuple, ctypes.CDLL] = {}
#: the builds the tests below use (target, A_FMT, B_FMT, MT), compiled up front two at a time, each also with the
#: weights in the aiter 16x16 layout (WLB = 1, the last key item)
_PLAIN = (
    {(t, F[a], F[b], 1) for t in TARGETS for a, b in GEMM_FORMAT_PAIRS}
    | {(t, F["e4m3"], F["e4m3"], mt) for t in TARGETS for mt in (2, 4)}
    | {(t, F["e4m3"], F["e2m1"], 4) for t in TARGETS}
    | {(t, F["e2m1"], F["e2m1"], 2) for t in TARGETS}
)
_BUILDS = sorted({(*key, wlb) for key in _PLAIN for wlb in (0, 1)})
WL = "aiter16x16"


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    d = tmp_path_factory.mktemp("simt_amd_decode")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda key: _lib(d, key[0], _defines(*key[1:])), _BUILDS))
    return d


def _defines(a_fmt: int, b_fmt: int, mt: int, wlb: int = 0) -> dict[str, int]:
    return dict(K.decode_amd_variant(a_fmt, b_fmt, mt, wlb))


def _lib(build_dir: Path, target: str, defines: dict[str, int], moe: bool = False) -> ctypes.CDLL:
    """The host build of one define set of the decode kernel (``moe``: of its MoE twin)."""
    d = {k: v for k, v in defines.items() if k != "THREADS"}
    key = (target, moe, *sorted(d.items()))
    if key not in _LIBS:
        tag = "_".join(f"{k}{v}" for k, v in sorted(d.items()))
        out = build_dir / f"simt_{'moe' if moe else 'decode'}_{target}_{tag}.so"
        if not out.exists():
            src = ROOT / "tests" / "support" / "simt_amd_host.cpp"
            cmd = [*host_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-psabi", "-DSIMT_DECODE=1"]
            cmd += ["-DSIMT_MOE=1"] if moe else []
            cmd += [f"-DSIMT_KERNEL={TARGETS[target]}", *(f"-D{k}={v}" for k, v in d.items())]
            tmp = out.with_suffix(".tmp.so")
            proc = subprocess.run([*cmd, str(src), "-o", str(tmp)], capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stderr[-4000:]
            tmp.rename(out)
        so = ctypes.CDLL(str(out))
        so.simt_error.restype = ctypes.c_char_p
        _LIBS[key] = so
    return _LIBS[key]


def _p(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


def _aligned(c: np.ndarray) -> np.ndarray:
    """A copy of ``c`` at a 16-byte aligned address (the path's envelope)."""
    buf = np.zeros(c.size + 16, np.uint8)
    start = (-buf.ctypes.data) % 16
    out = buf[start : start + c.size].reshape(c.shape)
    out[...] = c
    return out


def _pieces(q, layout=None, u32=False):
    s = np.asarray(q.scales)
    if layout is not None:
        s = mxrt.preshuffle_scales(s, layout, dtype=np.uint32 if u32 else None, backend="numpy")
    return (_aligned(np.ascontiguousarray(q.data)), np.ascontiguousarray(s), q.fmt, q.shape[1])


def _convert(x32: np.ndarray, out_dtype: str) -> np.ndarray:
    return x32.astype(OUT[out_dtype])  # ml_dtypes / numpy: round to nearest even, like gemm_mx_splitk_reduce


def run_dec(
    build_dir,
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
    num_cus=256,
    out=None,
    weight_layout=None,
):
    """Launch the host build as gemm_decode_amd's run() does (plan, scalars, split-K finish); returns (out, plan).
    ``weight_layout``: b's codes go in as mxrt.preshuffle_weight's buffer (b_weight_layout; the kernel reads it)."""
    pa, pb = _pieces(qa, layouts[0], u32[0]), _pieces(qb, layouts[1], u32[1])
    if weight_layout is not None:
        pb = (_aligned(mxrt.preshuffle_weight(np.asarray(qb.data), weight_layout)), *pb[1:])
    p = gemm_problem(
        pa,
        pb,
        out_dtype=out_dtype,
        split_k=split_k,
        deterministic=deterministic,
        a_scale_layout=layouts[0],
        b_scale_layout=layouts[1],
        b_weight_layout=weight_layout,
    )
    assert p.b_weight_layout == weight_layout
    assert gemm_decode_amd.unsupported(target, p, pa[0], pb[0], pa[1], pb[1]) is None
    pl = gemm_decode_amd.plan(target, p, num_cus)
    assert pl.spec is gemm_decode_amd.SPECS[target] and pl.config.block == (256, 1, 1)
    assert pl.config.grid == (-(-p.n // 64), 1, pl.split)
    lib = _lib(build_dir, target, dict(pl.defines))
    if out is None:
        out = np.empty((p.m, p.n), OUT[out_dtype])
        out.reshape(-1).view(np.uint8)[:] = 0xFF  # an element the path should write and does not is NaN
    code = codes.GEMM_OUT_DTYPE_CODES[out_dtype]
    f32 = codes.GEMM_OUT_DTYPE_CODES["float32"]

    def go(dst, c, mode):
        u = np.array(gemm_decode_amd.scalars(p, pl.split, pa[1], pb[1], c, mode), np.int32)
        rc = lib.simt_decode(_p(pa[0]), _p(pb[0]), _p(pa[1]), _p(pb[1]), _p(dst), _p(u), *pl.config.grid, order)
        assert rc == 0, lib.simt_error().decode()

    if pl.split == 1:
        go(out.view(np.uint16) if out.dtype.itemsize == 2 else out, code, gemm_decode_amd.MODE_STORE)
    elif deterministic:
        ws = np.full((pl.split, p.m, p.n), np.nan, np.float32)
        go(ws, f32, gemm_decode_amd.MODE_STORE)
        acc = ws[0].copy()
        for z in range(1, pl.split):
            acc += ws[z]  # split order, fp32: the reduce kernel's sum
        out[...] = _convert(acc, out_dtype)
    else:
        ws = np.zeros((p.m, p.n), np.float32)
        go(ws, f32, gemm_decode_amd.MODE_ATOMIC)
        out[...] = _convert(ws, out_dtype)
    return out, pl


def check(out, qa, qb, out_dtype):
    d64 = reference.gemm_mx(qa, qb, out_dtype="float64")
    got = out.astype(np.float64)
    assert np.isfinite(got).all(), "an element the kernel should write holds the poison"
    if out_dtype == "float32":
        assert reference.relative_error(d64, got) <= 1e-5
    else:
        assert reference.calc_diff(d64, got) <= 1e-5


def _operands(m, n, k, fa, fb, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-5, 6, (m, 1)))
    w = rng.standard_normal((n, k)) * np.exp2(rng.integers(-5, 6, (n, 1)))
    return mxrt.quantize_mx(x, fa, axis=1), mxrt.quantize_mx(w, fb, axis=1)


def _seed(*key) -> int:
    return zlib.crc32(repr(key).encode())


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 64])
def test_every_token_tile(build_dir, target, m):
    """n = 136: two full CTAs of 64 weight rows and a tail of 8; k = 320: 10 blocks, the last wave step half."""
    qa, qb = _operands(m, 136, 320, "e4m3", "e4m3", _seed(target, m))
    out, pl = run_dec(build_dir, target, qa, qb, out_dtype="bfloat16", order=m % 3)
    assert dict(pl.defines)["MT"] == next(t for t in K.DECODE_AMD_MT if 16 * t >= m) and pl.split == 1
    check(out, qa, qb, "bfloat16")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", list(GEMM_FORMAT_PAIRS), ids=lambda p: "x".join(p))
def test_every_format_pair(build_dir, target, pair):
    qa, qb = _operands(5, 72, 192, *pair, _seed(target, pair))
    out, _ = run_dec(build_dir, target, qa, qb, order=_seed(pair) % 3)
    check(out, qa, qb, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("out_dtype", list(OUT))
@pytest.mark.parametrize("pair,m", [(("e4m3", "e2m1"), 40), (("e2m1", "e2m1"), 20)], ids=["mixed-m40", "fp4-m20"])
def test_out_dtypes(build_dir, target, out_dtype, pair, m):
    """MXFP4 weights (e2m1) with e4m3 tokens (the weight widened to e4m3 in registers) and e2m1 x e2m1 (native on
    gfx950, both widened on gfx942), every out dtype."""
    qa, qb = _operands(m, 100, 256, *pair, _seed(target, out_dtype, pair))
    out, _ = run_dec(build_dir, target, qa, qb, out_dtype=out_dtype)
    check(out, qa, qb, out_dtype)
    if out_dtype != "float32":  # the fp32 sum order may move a rounding by one ulp, rarely
        want = reference.gemm_mx(qa, qb, out_dtype=out_dtype)
        assert np.mean(out.view(np.uint16) != want.view(np.uint16)) < 0.02


@pytest.mark.parametrize("target", list(TARGETS))
def test_k_block_tail(build_dir, target):
    """k = 144: 4.5 blocks (the last block half full) and one wave step past 128."""
    qa, qb = _operands(3, 70, 144, "e4m3", "e4m3", _seed(target, "ktail"))
    out, _ = run_dec(build_dir, target, qa, qb)
    check(out, qa, qb, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "split_k,deterministic,out_dtype",
    [(3, True, "float32"), (4, True, "bfloat16"), (2, False, "float32"), (3, False, "float16")],
    ids=["det3-f32", "det4-bf16", "atomic2-f32", "atomic3-f16"],
)
def test_split_k(build_dir, target, split_k, deterministic, out_dtype):
    """11 K blocks over the splits (uneven ranges that start and end inside a wave step)."""
    qa, qb = _operands(7, 80, 352, "e4m3", "e4m3", _seed(target, split_k, deterministic))
    out, pl = run_dec(build_dir, target, qa, qb, out_dtype=out_dtype, split_k=split_k, deterministic=deterministic)
    assert pl.split == split_k
    check(out, qa, qb, out_dtype)
    if deterministic:
        again, _ = run_dec(build_dir, target, qa, qb, out_dtype=out_dtype, split_k=split_k, order=1)
        assert (again.view(np.uint8) == out.view(np.uint8)).all()  # other fiber and block order, same bits


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_paths_own_split(build_dir, target):
    """split_k=1 with few CTAs for the CUs: the path splits K itself (deterministic), same bits in any order."""
    qa, qb = _operands(16, 64, 1024, "e4m3", "e4m3", _seed(target, "own"))
    out, pl = run_dec(build_dir, target, qa, qb, out_dtype="bfloat16", num_cus=8)
    assert pl.split == 2  # 32 blocks: at most 32 // 16 splits
    check(out, qa, qb, "bfloat16")
    again, _ = run_dec(build_dir, target, qa, qb, out_dtype="bfloat16", num_cus=8, order=0)
    assert (again.view(np.uint16) == out.view(np.uint16)).all()


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "layouts,u32", [(("aiter32x8", "aiter32x8"), (False, False)), (("turbo16x4", "turbo16x4"), (False, True))]
)
def test_preshuffled_scales(build_dir, target, layouts, u32):
    qa, qb = _operands(9, 130, 288, "e4m3", "e4m3", _seed(target, layouts))
    out, _ = run_dec(build_dir, target, qa, qb, layouts=layouts, u32=u32, split_k=2)
    check(out, qa, qb, "float32")


def _with_scales(q, scales):
    return mxrt.MXArray(
        data=q.data,
        scales=np.asarray(scales, np.uint8),
        fmt=q.fmt,
        block_size=32,
        axis=1,
        shape=q.shape,
        scale_mode="given",
    )


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_extreme_scale_pairs(build_dir, target, out_dtype):
    """Per block, token scales in {0, 1, 2, 253, 254} and weight scales completing them to a normal product
    (sa + sb - 254 in [-10, 10], bytes in [0, 254]): a promotion as (P * 2^(sa-127)) * 2^(sb-127) would overflow
    or flush."""
    qa, qb = _operands(6, 70, 320, "e4m3", "e4m3", _seed(target, "extreme", out_dtype))
    rng = np.random.default_rng(_seed(target, out_dtype))
    kb = qa.scales.shape[1]
    sa_col = np.array([0, 254, 1, 253, 2, 127, 0, 254, 1, 253])[:kb]
    sb_col = np.clip(254 - sa_col + rng.integers(-10, 11, kb), 0, 254)
    sa = np.broadcast_to(sa_col, qa.scales.shape).copy()
    sb = np.broadcast_to(sb_col, qb.scales.shape).copy()
    qa, qb = _with_scales(qa, sa), _with_scales(qb, sb)
    out, _ = run_dec(build_dir, target, qa, qb, out_dtype=out_dtype)
    check(out, qa, qb, out_dtype)


@pytest.mark.parametrize("target", list(TARGETS))
def test_fast_promotion_edges(build_dir, target):
    """Scale bytes at the edges of gfx942's one-FMA range [64, 190] and just outside it (63, 191), per block:
    in-range steps and wide steps give the same values (both round once where the factor is normal)."""
    qa, qb = _operands(6, 70, 384, "e4m3", "e4m3", _seed(target, "edges"))
    sa_col = np.array([64, 190, 63, 191, 127, 64, 190, 100, 150, 64, 190, 127])
    sb_col = np.array([190, 64, 191, 63, 127, 150, 100, 127, 127, 127, 100, 64])
    qa = _with_scales(qa, np.broadcast_to(sa_col, qa.scales.shape).copy())
    qb = _with_scales(qb, np.broadcast_to(sb_col, qb.scales.shape).copy())
    out, _ = run_dec(build_dir, target, qa, qb, split_k=3)  # splits of 4 blocks: one wide, two in range
    check(out, qa, qb, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("split_k", [1, 3])
def test_nan_blocks(build_dir, target, split_k):
    """A 0xFF scale makes its token row / weight column NaN and nothing else (also across split-K ranges: a NaN
    block of one split never meets the zero codes of another)."""
    qa, qb = _operands(5, 72, 320, "e4m3", "e4m3", _seed(target, "nan", split_k))
    sa, sb = np.array(qa.scales), np.array(qb.scales)
    sa[1, 4] = 0xFF
    sb[66, 9] = 0xFF  # a weight row in the tail CTA, the last block
    qa, qb = _with_scales(qa, sa), _with_scales(qb, sb)
    out, _ = run_dec(build_dir, target, qa, qb, split_k=split_k)
    assert np.isnan(out[1]).all() and np.isnan(out[:, 66]).all()
    keep_r, keep_c = np.delete(np.arange(5), 1), np.delete(np.arange(72), 66)
    rest = out[np.ix_(keep_r, keep_c)].astype(np.float64)
    want = reference.gemm_mx(qa, qb, out_dtype="float64")[np.ix_(keep_r, keep_c)]
    assert np.isfinite(rest).all() and reference.relative_error(want, rest) <= 1e-5


@pytest.mark.parametrize("target", list(TARGETS))
def test_nothing_written_past_out(build_dir, target):
    """out is a view into a larger buffer: rows past m keep their bytes."""
    qa, qb = _operands(7, 40, 128, "e4m3", "e4m3", _seed(target, "past"))
    big = np.full((7 + 9, 40), 7.0, np.float32)
    run_dec(build_dir, target, qa, qb, out=big[:7])
    assert (big[7:] == 7.0).all()
    check(big[:7], qa, qb, "float32")


# ---- weight codes in the aiter 16x16 layout (b_weight_layout="aiter16x16", WLB = 1) ------------------------------


def run_shuffled(build_dir, target, qa, qb, **kw):
    """The launch with the weight codes in the aiter 16x16 layout, and the same launch with row-major codes: the
    plans differ by WLB = 1 only and the results bitwise (the same chunks, loaded from other offsets)."""
    sh, pl_sh = run_dec(build_dir, target, qa, qb, weight_layout=WL, **kw)
    out, pl = run_dec(build_dir, target, qa, qb, **kw)
    assert dict(pl_sh.defines) == {**dict(pl.defines), "WLB": 1} and "WLB" not in dict(pl.defines)
    assert (pl_sh.config, pl_sh.split) == (pl.config, pl.split)
    assert (sh.view(np.uint8) == out.view(np.uint8)).all(), "shuffled and row-major weights differ"
    return sh, pl_sh


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", list(GEMM_FORMAT_PAIRS), ids=lambda p: "x".join(p))
def test_shuffled_weights_every_format_pair(build_dir, target, pair):
    """n = 72 (a partial 16-row tile: padded to 80, and a partial CTA), k = 224: 7 blocks (K not a multiple of the
    128 step) and row bytes 224 / 112 padded to 224 / 128 (e2m1: the 8- and 4-byte loads of the widened codes)."""
    qa, qb = _operands(5, 72, 224, *pair, _seed(target, pair, WL))
    out, _ = run_shuffled(build_dir, target, qa, qb, order=_seed(pair) % 3)
    check(out, qa, qb, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("m,pair", [(1, "e4m3"), (16, "e4m3"), (17, "e4m3"), (33, "e2m1"), (64, "e4m3")])
def test_shuffled_weights_every_token_tile(build_dir, target, m, pair):
    """n = 136 (two CTAs and 8 rows: half a 16-row tile), k = 320 (2.5 steps); MXFP4 weights at MT = 4."""
    qa, qb = _operands(m, 136, 320, "e4m3", pair, _seed(target, m, WL))
    out, pl = run_shuffled(build_dir, target, qa, qb, out_dtype="bfloat16", order=m % 3)
    assert dict(pl.defines)["MT"] == next(t for t in K.DECODE_AMD_MT if 16 * t >= m)
    check(out, qa, qb, "bfloat16")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "split_k,deterministic,out_dtype,fb",
    [(3, True, "float32", "e4m3"), (4, True, "bfloat16", "e2m1"), (2, False, "float32", "e4m3")],
    ids=["det3-f32", "det4-bf16-fp4w", "atomic2-f32"],
)
def test_shuffled_weights_split_k(build_dir, target, split_k, deterministic, out_dtype, fb):
    """11 K blocks over the splits (ranges that end inside a 32-byte column pair of the layout)."""
    qa, qb = _operands(7, 80, 352, "e4m3", fb, _seed(target, split_k, deterministic, WL))
    out, pl = run_shuffled(build_dir, target, qa, qb, out_dtype=out_dtype, split_k=split_k, deterministic=deterministic)
    assert pl.split == split_k
    check(out, qa, qb, out_dtype)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "layouts,u32", [((None, "aiter32x8"), (False, False)), (("turbo16x4", "turbo16x4"), (False, True))]
)
def test_shuffled_weights_with_preshuffled_scales(build_dir, target, layouts, u32):
    """The weight scales preshuffled too (n = 144: a multiple of 16, as a preshuffled scale layout makes n the
    padded row count), k = 272: row bytes padded to 288."""
    qa, qb = _operands(9, 144, 272, "e4m3", "e4m3", _seed(target, layouts, WL))
    out, _ = run_shuffled(build_dir, target, qa, qb, layouts=layouts, u32=u32, split_k=2)
    check(out, qa, qb, "float32")


@pytest.mark.parametrize("target", list(TARGETS))
def test_shuffled_weights_extreme_and_nan_scales(build_dir, target):
    """Extreme scale pairs per block (normal products) plus a NaN block of a token and of a weight row in the
    tail CTA: NaN there only, the same bits as row-major weights."""
    qa, qb = _operands(6, 70, 320, "e4m3", "e4m3", _seed(target, "extreme", WL))
    kb = qa.scales.shape[1]
    sa_col = np.array([0, 254, 1, 253, 2, 127, 0, 254, 1, 253])[:kb]
    sb_col = np.clip(254 - sa_col + np.random.default_rng(_seed(target, WL)).integers(-10, 11, kb), 0, 254)
    sa = np.broadcast_to(sa_col, qa.scales.shape).copy()
    sb = np.broadcast_to(sb_col, qb.scales.shape).copy()
    sa[1, 4], sb[66, 9] = 0xFF, 0xFF
    qa, qb = _with_scales(qa, sa), _with_scales(qb, sb)
    out, _ = run_shuffled(build_dir, target, qa, qb, split_k=3)
    assert np.isnan(out[1]).all() and np.isnan(out[:, 66]).all()
    keep_r, keep_c = np.delete(np.arange(6), 1), np.delete(np.arange(70), 66)
    rest = out[np.ix_(keep_r, keep_c)].astype(np.float64)
    want = reference.gemm_mx(qa, qb, out_dtype="float64")[np.ix_(keep_r, keep_c)]
    assert np.isfinite(rest).all() and reference.relative_error(want, rest) <= 1e-5


# ---- backend="auto" end to end on a fake gfx950 / gfx942 device ------------------------------------------------


@pytest.fixture(params=list(TARGETS))
def amd_device(request, monkeypatch, build_dir):
    """A stand-in cupy (tests/test_grouped_gemm_device_path.py) and AMD device whose kernel builds run the host SIMT
    build of the decode kernel (the split-K reduce as its numpy twin); other kernels are recorded, not run."""
    from test_grouped_gemm_device_path import _fake_cupy, _Ptr

    from mxrt.ops import gemm as gemm_ops
    from mxrt.ops import gemm_kernels, gemm_splitk
    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler

    target = request.param
    cp = _fake_cupy()
    cp.copyto = np.copyto  # gemm_mx's unshuffle fallback (mxrt.ops.gemm.unshuffled_weight)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(_Ptr, "device_id", 0, raising=False)  # gemm_mx's launch-plan key reads it
    launches = []

    def build(spec, d, arch, **_kw):
        d = dict(d)

        def kernel(grid, block, args, shared_mem=0):
            launches.append((spec.symbol, d, grid, args))
            if spec is gemm_decode_amd.SPECS[target]:
                assert block == (256, 1, 1) and len(args) == 13
                assert all(type(a).__module__ == "cupy" for a in args[:5])  # never a host copy
                ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args[:5]]
                assert all(isinstance(v, np.int32) for v in args[5:])
                u = np.array([int(v) for v in args[5:]], np.int32)
                rc = _lib(build_dir, target, d).simt_decode(*ptrs, ctypes.c_void_p(u.ctypes.data), *grid, 2)
                assert rc == 0, _lib(build_dir, target, d).simt_error().decode()
            elif spec is gemm_kernels.GEMM_MX_SPLITK_REDUCE:
                ws, out, mn, splits = args
                acc = np.array(ws.reshape(-1)[: int(splits) * int(mn)]).reshape(int(splits), int(mn))
                s = acc[0].copy()
                for z in range(1, int(splits)):
                    s += acc[z]
                name = {v: k for k, v in codes.GEMM_OUT_DTYPE_CODES.items()}[d["OUT_DTYPE"]]
                out.reshape(-1).view(np.uint8)[:] = _convert(s, name).view(np.uint8)

        return kernel

    fake = arch_mod.Arch("amd", target, "fake", 64, 256, 65536)
    monkeypatch.setattr(compiler, "build", build)
    monkeypatch.setattr(gemm_splitk, "build", build)
    monkeypatch.setattr(arch_mod, "get_arch", lambda *a, **k: fake)
    monkeypatch.setattr(gemm_ops, "get_arch", lambda *a, **k: fake)
    return target, launches


def test_auto_picks_the_decode_path_for_small_m(amd_device):
    """mxrt.gemm_mx on device MXArrays: m <= 64 runs gemm_mx_decode_<target> (auto, the path's own split on a
    long K), and the result matches the reference; m = 65 goes to the dense kernel; unaligned rows decline."""
    from test_grouped_gemm_device_path import dev

    target, launches = amd_device
    sym = f"gemm_mx_decode_{target}"
    for m, n, k, out_dtype in ((1, 72, 96, "bfloat16"), (64, 136, 128, "float32"), (33, 64, 2048, "bfloat16")):
        qa, qb = _operands(m, n, k, "e4m3", "e2m1", _seed(target, m, "auto"))
        launches.clear()
        got = mxrt.gemm_mx(dev(qa), dev(qb), out_dtype=out_dtype)
        assert type(got).__module__ == "cupy"
        assert launches[0][0] == sym, launches
        host = np.asarray(got)
        check(host.view(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else host, qa, qb, out_dtype)
        if k == 2048:  # 1 CTA for 256 CUs: split 4 (64 blocks // 16), fp32 slices + the reduce
            assert launches[0][2] == (1, 1, 4) and launches[1][0] == "gemm_mx_splitk_reduce"
    qa, qb = _operands(65, 72, 96, "e4m3", "e4m3", _seed(target, "dense"))
    launches.clear()
    mxrt.gemm_mx(dev(qa), dev(qb))
    assert launches[0][0] == f"gemm_mx_{target}"
    qa, qb = _operands(4, 72, 48, "e4m3", "e2m1", _seed(target, "unaligned"))  # e2m1 rows of 24 bytes
    launches.clear()
    mxrt.gemm_mx(dev(qa), dev(qb))
    assert launches[0][0] == f"gemm_mx_{target}"


def test_variants_cover_the_builds():
    assert len(K.GEMM_MX_DECODE_GFX950.variants) == 2 * len(GEMM_FORMAT_PAIRS) * len(K.DECODE_AMD_MT)
    built = {
        (t, *(dict(d).get(x, 0) for x in ("A_FMT", "B_FMT", "MT", "WLB")))
        for t in TARGETS
        for d in K.GEMM_MX_DECODE_GFX950.variants
    }
    assert built >= set(_BUILDS)
    assert dataclasses.is_dataclass(gemm_decode_amd.DecodeAmdPlan)


def test_auto_reads_shuffled_weights_in_place(amd_device):
    """gemm_mx(..., b_weight_layout="aiter16x16") on device pieces: m <= 64 runs the decode kernel (WLB = 1) on the
    caller's shuffled buffer (no copy) and matches the reference; m = 65 falls back to the dense kernel, which gets
    the row-major codes (gemm_mx's device unshuffle)."""
    from support.gemm_cases import shuffled_weight
    from test_grouped_gemm_device_path import dev

    target, launches = amd_device
    sym = f"gemm_mx_decode_{target}"
    for m, n, k, fb, out_dtype in ((1, 72, 96, "e2m1", "bfloat16"), (33, 64, 2048, "e4m3", "float32")):
        qa, qb = _operands(m, n, k, "e4m3", fb, _seed(target, m, "auto", WL))
        b = shuffled_weight(qb, device=True)
        launches.clear()
        got = mxrt.gemm_mx(dev(qa), b, out_dtype=out_dtype, b_weight_layout=WL)
        assert type(got).__module__ == "cupy"
        assert launches[0][0] == sym and launches[0][1]["WLB"] == 1, launches
        assert launches[0][3][1] is b[0]  # the caller's buffer, read in place
        host = np.asarray(got)
        check(host.view(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else host, qa, qb, out_dtype)
    qa, qb = _operands(65, 72, 96, "e4m3", "e4m3", _seed(target, "dense", WL))
    b = shuffled_weight(qb, device=True)
    launches.clear()
    mxrt.gemm_mx(dev(qa), b, b_weight_layout=WL)
    assert launches[0][0] == f"gemm_mx_{target}"
    codes = np.asarray(launches[0][3][1])
    assert codes.shape == (72, 96) and (codes == np.asarray(qb.data)).all()
