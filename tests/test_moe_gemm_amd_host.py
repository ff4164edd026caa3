"""The AMD MoE decode kernels (kernels_src/gemm/gemm_mx_decode_gfx950_moe.hip, gemm_mx_decode_gfx942_moe.hip) run on
the CPU against the float64 twin of the dequantized inputs (mxrt.reference.moe_gemm.moe_gemm_f64).

tests/support/simt_amd_host.cpp built with -DSIMT_DECODE=1 -DSIMT_MOE=1 compiles one define set (A_FMT, B_FMT, MT) of
a MoE kernel for the host: the wave64 SIMT emulator of tests/test_gemm_decode_amd_host.py (fibers per GPU thread,
MFMAs and ds_bpermute as wave collectives from the documented operand maps, barriers under forward / backward /
scrambled fiber orders, blocks in a scrambled order). The launch is the one mxrt/ops/moe_gemm_amd.py computes (plan:
kernel, defines, grid; scalars) into an `out` the op zeroes first.

Checked: gate/up (a_div = top_k) and down (a_div = 1) on layouts from mxrt.moe_align_block_size at every token tile
(block sizes 16 / 32 / 64 and 128 in two chunks of slots), routing weights, expert parallelism (-1 experts), blocks
past num_tokens_post_padded, every format pair, bf16 / fp16 / fp32 out, n and K tails (a partial CTA of expert
rows, K not a multiple of the wave step), extreme scale pairs and NaN blocks, bitwise determinism across fiber
orders, rows no block reaches left 0, the envelope's typed declines, and `mxrt.moe_gemm_mx` end to end on a fake
gfx950 / gfx942 device. Bars: fp32 relative 1e-5 of the largest magnitude, 16-bit calc_diff 1e-5. What this cannot
prove: the hardware's accumulation order and precision, buffer-load behaviour (modelled), timing.
"""

from __future__ import annotations

import ctypes
import sys
import types
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest
from _hostcc import host_compiler
from test_gemm_decode_amd_host import OUT, TARGETS, _aligned, _lib, _seed

import mxrt
from mxrt import codes, reference
from mxrt.ops import gemm_decode_amd_kernels as K
from mxrt.ops import moe_gemm_amd
from mxrt.problems import GEMM_FORMAT_PAIRS, moe_gemm_problem
from mxrt.reference.moe_gemm import moe_gemm_f64, moe_slots

# host SIMT emulation, one library per define set (~3-10 s each to build): CI still runs it
pytestmark = pytest.mark.slow
F = codes.FMT_CODES
#: the builds the tests below use (target, A_FMT, B_FMT, MT), compiled up front two at a time
_BUILDS = sorted(
    {(t, F[a], F[b], 1) for t in TARGETS for a, b in GEMM_FORMAT_PAIRS}
    | {(t, F["e4m3"], F["e4m3"], mt) for t in TARGETS for mt in (2, 4)}
    | {(t, F["e4m3"], F["e2m1"], 4) for t in TARGETS}
)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    d = tmp_path_factory.mktemp("simt_amd_moe")
    with ThreadPoolExecutor(2) as pool:
        keys = [(t, {"A_FMT": a, "B_FMT": b, "MT": mt}) for t, a, b, mt in _BUILDS]
        list(pool.map(lambda key: _lib(d, key[0], key[1], moe=True), keys))
    return d


def _p(a):
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


def routing(rng, t, e, top_k, block_size, emap=None):
    """Random distinct experts per token, their routing weights and the vLLM layout (numpy)."""
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    w = rng.random((t, top_k)).astype(np.float32)
    return w, mxrt.moe_align_block_size(ids, block_size, e, emap, backend="numpy")


def operands(rng, m_act, e, n, k, fx="e4m3", fw="e4m3"):
    x = rng.standard_normal((m_act, k)) * np.exp2(rng.integers(-5, 6, (m_act, 1)))
    w = rng.standard_normal((e, n, k)) * np.exp2(rng.integers(-5, 6, (e, n, 1)))
    return mxrt.quantize_mx(x, fx, axis=1), mxrt.quantize_mx(w, fw, axis=2)


def _pieces(q):
    return (_aligned(np.ascontiguousarray(q.data)), np.ascontiguousarray(q.scales), q.fmt, q.shape[-1])


def run_moe(build_dir, target, qx, qw, layout, *, top_k, block_size, a_div=None, tw=None, out_dtype="float32",
            order=2):  # fmt: skip
    """Launch the host build as moe_gemm_amd.run() does (out zeroed, plan, scalars); returns (out, problem, plan)."""
    ids, experts, ntpp = layout
    p = moe_gemm_problem(_pieces(qx), _pieces(qw), ids, experts, ntpp, top_k=top_k, block_size=block_size,
                         topk_weights=tw, a_div=a_div, out_dtype=out_dtype)  # fmt: skip
    assert moe_gemm_amd.unsupported(target, p) is None
    pl = moe_gemm_amd.plan(target, p)
    assert pl.spec is moe_gemm_amd.SPECS[target] and pl.config.block == (256, 1, 1)
    mt = dict(pl.defines)["MT"]
    assert pl.config.grid == (-(-p.n // 64), min(p.expert_ids.size, p.numel), -(-block_size // (16 * mt)))
    out = np.zeros((p.numel, p.n), OUT[out_dtype])
    u = np.array(moe_gemm_amd.scalars(p), np.int32)
    tw_flat = None if tw is None else np.ascontiguousarray(tw, np.float32).reshape(-1)
    lib = _lib(build_dir, target, dict(pl.defines), moe=True)
    args = [p.x_codes, p.w_codes, p.x_scales, p.w_scales, out.view(np.uint16) if out.dtype.itemsize == 2 else out]
    args += [np.ascontiguousarray(a, np.int32) for a in (ids, experts, ntpp)]
    rc = lib.simt_moe(*(_p(a) for a in args), _p(tw_flat), _p(u), *pl.config.grid, order)
    assert rc == 0, lib.simt_error().decode()
    return out, p, pl


def check(out, p, *, nan_ok=None):
    """Written rows against the float64 twin (fp32 relative 1e-5, 16-bit calc_diff 1e-5); other rows exactly 0."""
    d64 = moe_gemm_f64(p)
    ids, _ = moe_slots(p)
    written = np.zeros(p.numel, bool)
    written[ids] = True
    got = out.astype(np.float64)
    assert not got[~written].any(), "a row no block reaches was written"
    g, w = got[written], d64[written]
    if nan_ok is not None:
        assert np.array_equal(np.isnan(g), nan_ok[written])
        g, w = np.where(nan_ok[written], 0.0, g), np.where(nan_ok[written], 0.0, w)
    assert np.isfinite(g).all(), "a written element is not finite"
    if out.dtype == np.float32:
        assert reference.relative_error(w, g) <= 1e-5
    else:
        assert reference.calc_diff(w, g) <= 1e-5
    return written


CASES = [(1, 8, 2, 16), (3, 16, 4, 32), (17, 8, 4, 64), (5, 4, 4, 128)]  # T, E, top_k, block_size: MT 1 / 2 / 4 / 4


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "T{}-E{}-top{}-bs{}".format(*c))
def test_gate_up_and_down(build_dir, target, gemm, case):
    """n = 72: a full CTA of expert rows and a tail of 8; k = 320: the last wave step partial."""
    t, e, top_k, bs = case
    rng = np.random.default_rng(_seed(target, gemm, case))
    tw, layout = routing(rng, t, e, top_k, bs)
    m_act, a_div = (t, None) if gemm == "gate_up" else (t * top_k, 1)
    qx, qw = operands(rng, m_act, e, 72, 320)
    out_dtype = ("bfloat16", "float16", "float32")[CASES.index(case) % 3]
    tw = tw if gemm == "down" else None
    out, p, pl = run_moe(build_dir, target, qx, qw, layout, top_k=top_k, block_size=bs, a_div=a_div, tw=tw,
                         out_dtype=out_dtype, order=CASES.index(case) % 3)  # fmt: skip
    assert dict(pl.defines)["MT"] == moe_gemm_amd.mt_for(bs)
    written = check(out, p)
    assert written.all()  # without an expert map every routed slot is written


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("pair", GEMM_FORMAT_PAIRS, ids="x".join)
def test_every_format_pair(build_dir, target, pair):
    rng = np.random.default_rng(_seed(target, pair))
    tw, layout = routing(rng, 3, 8, 2, 16)
    qx, qw = operands(rng, 3, 8, 40, 256, *pair)
    out, p, _ = run_moe(build_dir, target, qx, qw, layout, top_k=2, block_size=16, tw=tw, out_dtype="float32")
    check(out, p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_expert_parallel_and_idle_blocks(build_dir, target):
    """Experts mapped to -1 (another rank's) and blocks at or past num_tokens_post_padded are skipped: their slots'
    rows stay 0; padding slots (the sentinel numel) are never stored."""
    rng = np.random.default_rng(_seed(target, "ep"))
    e, t, top_k, bs = 16, 9, 4, 16
    emap = np.full(e, -1, np.int32)
    emap[::2] = np.arange(e // 2)  # even experts local, as local ids 0..7
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    sorted_ids, experts, ntpp = mxrt.moe_align_block_size(ids, bs, e, emap, backend="numpy")
    qx, qw = operands(rng, t, e // 2, 72, 192)
    layout = (sorted_ids, experts, ntpp)
    out, p, _ = run_moe(build_dir, target, qx, qw, layout, top_k=top_k, block_size=bs, out_dtype="bfloat16")
    written = check(out, p)
    assert written.any() and not written.all()  # the remote experts' slots
    local = np.flatnonzero((np.asarray(experts) >= 0) & (np.arange(experts.size) * bs < int(ntpp[0])))
    assert local.size >= 2
    cut = np.array([local[-1] * bs], np.int32)  # the last local block and every later one go idle
    out2, p2, _ = run_moe(build_dir, target, qx, qw, (sorted_ids, experts, cut), top_k=top_k, block_size=bs,
                          out_dtype="bfloat16")  # fmt: skip
    written2 = check(out2, p2)
    assert written2.sum() < written.sum() and not (written2 & ~written).any()


def _with_scales(q, scales):
    return mxrt.MXArray(q.data, np.asarray(scales, np.uint8), q.fmt, 32, q.axis, q.shape, "given")


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_extreme_scale_pairs(build_dir, target, out_dtype):
    """Per block, token scales in {0, 1, 2, 253, 254} and weight scales completing them to a normal product
    (sx + sw - 254 in [-10, 10]): a promotion as (P * 2^(sx-127)) * 2^(sw-127) would overflow or flush."""
    rng = np.random.default_rng(_seed(target, "extreme", out_dtype))
    tw, layout = routing(rng, 4, 8, 2, 16)
    qx, qw = operands(rng, 4, 8, 70, 320)
    kb = qx.scales.shape[-1]
    sx_col = np.array([0, 254, 1, 253, 2, 127, 0, 254, 1, 253])[:kb]
    sw_col = np.clip(254 - sx_col + rng.integers(-10, 11, kb), 0, 254)
    qx = _with_scales(qx, np.broadcast_to(sx_col, qx.scales.shape).copy())
    qw = _with_scales(qw, np.broadcast_to(sw_col, qw.scales.shape).copy())
    out, p, _ = run_moe(build_dir, target, qx, qw, layout, top_k=2, block_size=16, tw=tw, out_dtype=out_dtype)
    check(out, p)


@pytest.mark.parametrize("target", list(TARGETS))
def test_nan_blocks(build_dir, target):
    """A 0xFF scale makes its token's rows / its expert's column NaN, and nothing else."""
    rng = np.random.default_rng(_seed(target, "nan"))
    t, e, top_k = 4, 4, 2
    _, layout = routing(rng, t, e, top_k, 16)
    qx, qw = operands(rng, t, e, 72, 320)
    sx, sw = np.array(qx.scales), np.array(qw.scales)
    sx[1, 4] = 0xFF  # token 1: slots 2, 3 (gate/up: a_div = top_k)
    sw[2, 66, 9] = 0xFF  # expert 2, row 66 (the tail CTA), the last block
    qx, qw = _with_scales(qx, sx), _with_scales(qw, sw)
    out, p, _ = run_moe(build_dir, target, qx, qw, layout, top_k=top_k, block_size=16)
    nan = np.zeros((p.numel, p.n), bool)
    nan[2:4] = True
    ids, experts = moe_slots(p)
    nan[ids[experts == 2], 66] = True
    check(out, p, nan_ok=nan)


@pytest.mark.parametrize("target", list(TARGETS))
def test_bitwise_across_fiber_orders(build_dir, target):
    rng = np.random.default_rng(_seed(target, "orders"))
    tw, layout = routing(rng, 6, 8, 4, 32)
    qx, qw = operands(rng, 24, 8, 72, 448)
    outs = [run_moe(build_dir, target, qx, qw, layout, top_k=4, block_size=32, a_div=1, tw=tw, order=o)[0]
            for o in (0, 1, 2)]  # fmt: skip
    assert all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs[1:])


# ---- the envelope (shape-only: no arrays of that size) ----------------------------------------------------------


def _shape_problem(**kw):
    base = dict(x_fmt="e4m3", w_fmt="e4m3", out_dtype="bfloat16", k=7168, m_act=64, n=2048, e=256, numel=512,
                block_size=16, a_div=8, device=False, sorted_token_ids=np.zeros(4608),
                expert_ids=np.zeros(288))  # fmt: skip
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_envelope_declines_with_reasons():
    ok = _shape_problem()
    assert moe_gemm_amd.unsupported("gfx950", ok) is None and moe_gemm_amd.unsupported("gfx942", ok) is None
    assert "no AMD MoE decode kernel" in moe_gemm_amd.unsupported("gfx90a", ok)
    assert "16-byte aligned" in moe_gemm_amd.unsupported("gfx950", _shape_problem(k=7160))
    assert "16-byte aligned" in moe_gemm_amd.unsupported("gfx950", _shape_problem(k=7168 + 16, w_fmt="e2m1"))
    assert moe_gemm_amd.unsupported("gfx950", _shape_problem(k=7168 + 16, w_fmt="e4m3")) is None
    assert "out dtype" in moe_gemm_amd.unsupported("gfx950", _shape_problem(out_dtype="float64"))
    # the 2 GB guard: 256 experts of 2048 x 7168 e4m3 codes (3.76 GB) run (64-bit expert bases); one expert of 2^31
    # code bytes or more does not; nor activations of 2^31 bytes
    assert 256 * 2048 * 7168 >= 2**31 and moe_gemm_amd.unsupported("gfx950", ok) is None
    why = moe_gemm_amd.unsupported("gfx950", _shape_problem(n=2**31 // 7168 + 1))
    assert "one expert of w" in why and "2^31" in why
    assert "x holds" in moe_gemm_amd.unsupported("gfx942", _shape_problem(m_act=2**31 // 7168 + 1))
    why = moe_gemm_amd.unsupported("gfx950", _shape_problem(expert_ids=np.zeros(70000), numel=70000))
    assert "grid y / z" in why


def test_variants_and_specs():
    # the dense kernel's row-major builds (its WLB = 1 builds read shuffled weights; expert weights are row-major)
    plain = tuple(d for d in K.GEMM_MX_DECODE_GFX950.variants if "WLB" not in dict(d))
    assert moe_gemm_amd.SPECS["gfx950"].variants == plain and "WLB" not in moe_gemm_amd.SPECS["gfx950"].optional
    assert [moe_gemm_amd.mt_for(b) for b in (1, 16, 17, 32, 33, 64, 128, 256)] == [1, 1, 2, 2, 4, 4, 4, 4]
    variants = K.GEMM_MX_DECODE_GFX950_MOE.variants
    built = {(t, *(dict(d)[x] for x in ("A_FMT", "B_FMT", "MT"))) for t in TARGETS for d in variants}
    assert built >= set(_BUILDS)


# ---- mxrt.moe_gemm_mx end to end on a fake gfx950 / gfx942 device ----------------------------------------------


@pytest.fixture(params=list(TARGETS))
def amd_device(request, monkeypatch, build_dir):
    """A stand-in cupy (tests/test_grouped_gemm_device_path.py) and AMD device whose MoE kernel builds run the host
    SIMT build."""
    from test_grouped_gemm_device_path import _fake_cupy

    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler

    target = request.param
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    launches = []

    def build(spec, d, arch, **_kw):
        d = dict(d)
        assert spec is moe_gemm_amd.SPECS[target]

        def kernel(grid, block, args, shared_mem=0):
            launches.append((spec.symbol, d, grid))
            assert block == (256, 1, 1) and len(args) == 18
            assert all(type(a).__module__ == "cupy" for a in args[:8])  # never a host copy
            ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args[:8]]
            tw = args[8]
            ptrs.append(ctypes.c_void_p(0 if isinstance(tw, np.uint64) else tw.ctypes.data))
            assert all(isinstance(v, np.int32) for v in args[9:])
            u = np.array([int(v) for v in args[9:]], np.int32)
            lib = _lib(build_dir, target, d, moe=True)
            rc = lib.simt_moe(*ptrs, ctypes.c_void_p(u.ctypes.data), *grid, 2)
            assert rc == 0, lib.simt_error().decode()

        return kernel

    fake = arch_mod.Arch("amd", target, "fake", 64, 256, 65536)
    monkeypatch.setattr(compiler, "build", build)
    monkeypatch.setattr(arch_mod, "get_arch", lambda *a, **k: fake)
    from mxrt.ops import moe_gemm as moe_gemm_ops

    monkeypatch.setattr(moe_gemm_ops, "get_arch", lambda *a, **k: fake)
    return target, launches


def test_moe_gemm_mx_on_a_fake_amd_device(amd_device):
    """Device MXArrays and layout arrays: mxrt.moe_gemm_mx runs gemm_mx_decode_<target>_moe (no plan: ROCm launches
    through CuPy) and matches the numpy twin; a k outside the envelope is declined with the kernel's reason."""
    import dataclasses

    from mxrt.errors import UnsupportedArchError

    target, launches = amd_device
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(_seed(target, "e2e"))
    tw, layout = routing(rng, 5, 8, 2, 16)
    qx, qw = operands(rng, 5, 8, 72, 256, "e4m3", "e2m1")
    dx, dw = (dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales)) for q in (qx, qw))
    dl = [cp.asarray(a) for a in layout]
    for _ in range(2):  # a second call of the same signature: no plan on AMD, the same launch
        launches.clear()
        got = mxrt.moe_gemm_mx(dx, dw, *dl, top_k=2, block_size=16, topk_weights=cp.asarray(tw))
        assert type(got).__module__ == "cupy" and launches[0][0] == f"gemm_mx_decode_{target}_moe"
    want = mxrt.moe_gemm_mx(qx, qw, *layout, top_k=2, block_size=16, topk_weights=tw, backend="numpy")
    got64 = np.asarray(got).view(ml_dtypes.bfloat16).astype(np.float64)
    assert reference.calc_diff(want.astype(np.float64), got64) <= 1e-5
    qx2, qw2 = operands(rng, 5, 8, 72, 48, "e4m3", "e2m1")  # e2m1 rows of 24 bytes
    dx2, dw2 = (dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales)) for q in (qx2, qw2))
    with pytest.raises(UnsupportedArchError, match="16-byte aligned"):
        mxrt.moe_gemm_mx(dx2, dw2, *dl, top_k=2, block_size=16)
