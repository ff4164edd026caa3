"""Matrix-instruction emulators (MX_REFERENCE.md 6.1-6.3) and the proof that each preshuffled layout hands every
lane exactly the bytes and scale the instruction reads; whole tiles through the emulators vs reference.gemm_mx."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import mxrt
from mxrt import DtypeError, ShapeError, reference
from mxrt.checks.gemm import (
    EMULATOR_RTOL,
    SM80_C,
    SM89_A,
    SM89_B,
    GMMA_A_64x32,
    cute_tv,
    gmma_c_64xn,
)
from mxrt.checks.layouts import padded_scales
from mxrt.reference import emulate as E

INSTRS = list(E.MFMA_SCALE_SHAPES)
FMTS = ["e4m3", "e5m2", "e2m1"]
MFMA_PAIRS = [
    ("e4m3", "e4m3"),
    ("e5m2", "e4m3"),
    ("e5m2", "e5m2"),
    ("e2m1", "e2m1"),
    ("e4m3", "e2m1"),
    ("e2m1", "e4m3"),
]


def pid(p):
    return "x".join(p)


def rand_codes(shape, fmt, rng):
    """Random finite codes (no NaN/Inf) of ``fmt``, one per byte."""
    if fmt == "e2m1":
        return rng.integers(0, 16, shape, dtype=np.uint8)
    c = rng.integers(0, 256, shape, dtype=np.uint8)
    bad = np.isnan(mxrt.decode(c, fmt)) | np.isinf(mxrt.decode(c, fmt))
    c[bad] = 0x38  # 1.0 in e4m3 / 0.5 in e5m2
    return c


def mx(codes, scales, fmt):
    rows, k = codes.shape
    data = mxrt.pack_fp4(codes) if fmt == "e2m1" else codes
    return mxrt.MXArray(data, scales, fmt, 32, 1, (rows, k), "given")


# --- gfx950 operand maps ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("instr", INSTRS)
def test_mfma_operand_map_is_a_bijection_onto_the_lane_bytes(instr, fmt):
    lane, byte, nib = E.mfma_operand_map(instr, fmt)
    slot = (lane * 32 + byte) * 2 + np.maximum(nib, 0)
    used = 16 if fmt == "e2m1" else 32  # fp4: v[0:3] only
    assert byte.max() < used and lane.max() == 63
    assert len(np.unique(slot)) == slot.size == 64 * used * (2 if fmt == "e2m1" else 1)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("instr", INSTRS)
def test_mfma_pack_unpack_round_trip(instr, fmt):
    R, K = E.MFMA_SCALE_SHAPES[instr]
    codes = rand_codes((R, K), fmt, np.random.default_rng(1))
    reg = E.mfma_pack_operand(codes, fmt, instr)
    np.testing.assert_array_equal(E.mfma_unpack_operand(reg, fmt, instr), codes)
    if fmt == "e2m1":
        assert not reg[:, 16:].any()


def test_mfma_fp8_lane_holds_two_16_element_halves_and_fp4_32_contiguous():
    """Triton's chooseScaledMfmaScaleLayout comment, element by element (16x16x128, row 5)."""
    k = np.arange(128)
    codes = np.zeros((16, 128), np.uint8)
    codes[5] = k.astype(np.uint8)
    reg = E.mfma_pack_operand(codes, "e4m3")
    for g in range(4):
        np.testing.assert_array_equal(reg[5 + 16 * g], np.r_[16 * g : 16 * g + 16, 64 + 16 * g : 80 + 16 * g])
    codes4 = np.zeros((16, 128), np.uint8)
    codes4[5] = k % 16
    reg4 = E.mfma_pack_operand(codes4, "e2m1")
    for g in range(4):
        kk = np.arange(32 * g, 32 * g + 32) % 16
        np.testing.assert_array_equal(reg4[5 + 16 * g, :16], kk[0::2] | (kk[1::2] << 4))


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_row_major_lds_read_matches_operand_map(fmt):
    """Primus-Turbo compute_lds_offsets (16-byte chunks l/16 and l/16+4) hands each lane the A bytes of 6.1."""
    rng = np.random.default_rng(2)
    codes = rand_codes((48, 384), fmt, rng)
    data = mxrt.pack_fp4(codes) if fmt == "e2m1" else codes
    for r0 in (0, 16, 32):
        for t in range(3):
            want = E.mfma_pack_operand(codes[r0 : r0 + 16, 128 * t : 128 * t + 128], fmt)
            np.testing.assert_array_equal(E.row_major_lane_bytes(data, fmt, r0, t), want)


@pytest.mark.parametrize("instr", INSTRS)
def test_mfma_d_map_matches_opus_store_and_round_trips(instr):
    R, _ = E.MFMA_SCALE_SHAPES[instr]
    row, col = E.mfma_d_map(instr)
    lane = np.arange(64)[:, None]
    r = np.arange(row.shape[1])[None, :]
    if R == 16:  # aiter opus test_mxfp.cu: ptr_c[(group4*4 + i)*N + lane16]
        want_row = (lane // 16) * 4 + r
    else:  # ptr_c[(group*4 + i*8 + t)*N + lane32], i = r // 4, t = r % 4
        want_row = (lane // 32) * 4 + (r // 4) * 8 + r % 4
    np.testing.assert_array_equal(row, np.broadcast_to(want_row, row.shape))
    np.testing.assert_array_equal(col, np.broadcast_to(lane % R, col.shape))
    assert len(np.unique(row * R + col)) == R * R
    d = np.random.default_rng(3).standard_normal((R, R)).astype(np.float32)
    np.testing.assert_array_equal(E.mfma_regs_to_d(E.mfma_d_to_regs(d, instr), instr), d)


# --- gfx950 execute -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", MFMA_PAIRS, ids=pid)
@pytest.mark.parametrize("instr", INSTRS)
def test_mfma_scale_execute_vs_reference(instr, pair):
    fa, fb = pair
    R, K = E.MFMA_SCALE_SHAPES[instr]
    rng = np.random.default_rng(zlib.crc32(f"{instr}{fa}{fb}".encode()))
    ca, cb = rand_codes((R, K), fa, rng), rand_codes((R, K), fb, rng)
    sa = rng.integers(110, 140, (R, K // 32), dtype=np.uint8)
    sb = rng.integers(110, 140, (R, K // 32), dtype=np.uint8)
    opsel_a, opsel_b = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    # the other three bytes are garbage: only opsel may select the scale
    va = E.mfma_pack_scales(sa, instr, opsel_a, fill=200)
    vb = E.mfma_pack_scales(sb, instr, opsel_b, fill=60)
    c = rng.standard_normal((R, R)).astype(np.float32)
    d = E.mfma_scale(
        instr,
        E.mfma_pack_operand(ca, fa, instr),
        E.mfma_pack_operand(cb, fb, instr),
        va,
        vb,
        fmt_a=fa,
        fmt_b=fb,
        opsel_a=opsel_a,
        opsel_b=opsel_b,
        c=c,
    )
    want = reference.gemm_mx(mx(ca, sa, fa), mx(cb, sb, fb), out_dtype="float64") + c
    assert d.dtype == np.float32 and d.shape == (R, R)
    assert reference.relative_error(want, d) <= EMULATOR_RTOL
    wrong = E.mfma_scale(
        instr,
        E.mfma_pack_operand(ca, fa, instr),
        E.mfma_pack_operand(cb, fb, instr),
        va,
        vb,
        fmt_a=fa,
        fmt_b=fb,
        opsel_a=(opsel_a + 1) % 4,
        opsel_b=opsel_b,
        c=c,
    )
    assert reference.relative_error(want, wrong) > 1e-3


def test_mfma_nan_scale():
    ca = np.full((16, 128), 0x38, np.uint8)
    s = np.full((16, 4), 127, np.uint8)
    s[3, 2] = 0xFF
    reg = E.mfma_pack_operand(ca, "e4m3")
    ok = E.mfma_pack_scales(np.full((16, 4), 127, np.uint8))
    d = E.mfma_scale("16x16x128", reg, reg, E.mfma_pack_scales(s), ok)
    assert np.isnan(d[3]).all() and not np.isnan(np.delete(d, 3, 0)).any()
    assert d[0, 0] == 128.0


# --- the layouts hand every lane what the instruction reads ------------------------------------------------------


@pytest.mark.parametrize("shape", [(16, 4), (37, 10), (64, 12), (130, 3)], ids=lambda s: "x".join(map(str, s)))
def test_turbo16x4_lane_l_reads_row_l16_kblock_l_div_16(shape):
    rows, cols = shape
    s = np.random.default_rng(rows).integers(1, 255, shape, dtype=np.uint8)
    p = mxrt.preshuffle_scales(s, "turbo16x4", dtype=np.uint32)
    sm, sn = mxrt.scale_layout_shape("turbo16x4", rows, cols)
    S = padded_scales(s, sm, sn, 127)
    for band in range(sm // 16):
        for t in range(sn // 4):
            vgpr = E.turbo16x4_lane_scales(p, cols, band, t)
            want = S[16 * band : 16 * band + 16, 4 * t : 4 * t + 4]
            np.testing.assert_array_equal(E.mfma_read_scales(vgpr, "16x16x128", 0), want)
            np.testing.assert_array_equal(vgpr, E.mfma_pack_scales(want, "16x16x128", 0, fill=0))


@pytest.mark.parametrize("shape", [(32, 8), (70, 13), (256, 16), (300, 5)], ids=lambda s: "x".join(map(str, s)))
def test_aiter32x8_dword_serves_2_m_subtiles_x_2_k_steps_by_opsel(shape):
    rows, cols = shape
    s = np.random.default_rng(cols).integers(1, 255, shape, dtype=np.uint8)
    p = mxrt.preshuffle_scales(s, "aiter32x8")
    sm, sn = mxrt.scale_layout_shape("aiter32x8", rows, cols)
    S = padded_scales(s, sm, sn, 127)
    swapped_ok = True
    for i0 in range(sm // 32):
        for i3 in range(sn // 8):
            dw = E.aiter32x8_lane_dwords(p, cols, i0, i3)
            for i1 in (0, 1):
                for i4 in (0, 1):
                    r, c = 32 * i0 + 16 * i1, 8 * i3 + 4 * i4
                    want = S[r : r + 16, c : c + 4]
                    np.testing.assert_array_equal(E.mfma_read_scales(dw, "16x16x128", 2 * i4 + i1), want)
                    swapped_ok &= np.array_equal(E.mfma_read_scales(dw, "16x16x128", 2 * i1 + i4), want)
    assert not swapped_ok  # opsel = 2*i1 + i4 (M and K bits swapped) reads the wrong scales


def test_aiter32x8_does_not_serve_the_32x32x64_instruction():
    """32x32x64 wants row l%32, K-block l//32 in lane l; aiter's dwords hold rows i2 and 16+i2 per lane, so no
    opsel gives the 32x2 block: a 32x32x64 kernel needs a different scale layout (none shipped yet)."""
    s = np.random.default_rng(0).integers(1, 255, (32, 8), dtype=np.uint8)
    dw = E.aiter32x8_lane_dwords(mxrt.preshuffle_scales(s, "aiter32x8"), 8, 0, 0)
    for opsel in range(4):
        for kstep in range(4):
            assert not np.array_equal(E.mfma_read_scales(dw, "32x32x64", opsel), s[:, 2 * kstep : 2 * kstep + 2])


@pytest.mark.parametrize("shape", [(16, 128), (40, 384), (33, 256)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
def test_aiter16x16_weight_chunks_are_the_b_operand(fmt, shape):
    n, k = shape
    codes = rand_codes((n, k), fmt, np.random.default_rng(n + k))
    w = mxrt.preshuffle_weight(mxrt.pack_fp4(codes) if fmt == "e2m1" else codes)
    npad = -(-n // 16) * 16
    padded = np.zeros((npad, k), np.uint8)
    padded[:n] = codes
    for n0 in range(npad // 16):
        for t in range(k // 128):
            want = E.mfma_pack_operand(padded[16 * n0 : 16 * n0 + 16, 128 * t : 128 * t + 128], fmt)
            np.testing.assert_array_equal(E.aiter16x16_lane_bytes(w, fmt, n0, t), want)


@pytest.mark.parametrize("layout", ["turbo16x4", "aiter32x8"])
@pytest.mark.parametrize("pair", MFMA_PAIRS, ids=pid)
def test_gemm_through_the_emulator_from_preshuffled_buffers(pair, layout):
    fa, fb = pair
    m, n, k = 32, 48, 384
    rng = np.random.default_rng(len(layout) * 10 + len(fa + fb))
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-4, 5, (m, 1)))
    w = rng.standard_normal((n, k)) * np.exp2(rng.integers(-4, 5, (n, 1)))
    qa, qb = mxrt.quantize_mx(x, fa), mxrt.quantize_mx(w, fb)
    args = dict(m=m, n=n, k=k, fmt_a=fa, fmt_b=fb, scale_layout=layout)
    pa, pb = mxrt.preshuffle_scales(qa.scales, layout), mxrt.preshuffle_scales(qb.scales, layout)
    d = E.gfx950_gemm_16x16x128(qa.data, pa, mxrt.preshuffle_weight(qb.data), pb, **args)
    want = reference.gemm_mx(qa, qb, out_dtype="float64")
    assert reference.relative_error(want, d) <= EMULATOR_RTOL
    # the same loop fed row-major (unshuffled, padded) A scales of the same size must be wrong
    row_major = padded_scales(qa.scales, *mxrt.scale_layout_shape(layout, *qa.scales.shape), 127)
    bad = E.gfx950_gemm_16x16x128(qa.data, row_major, mxrt.preshuffle_weight(qb.data), pb, **args)
    assert reference.relative_error(want, bad) > 1e-3


def test_emulator_errors():
    with pytest.raises(DtypeError, match="fp6 not emulated"):
        E.mfma_operand_map("16x16x128", "e2m3")
    with pytest.raises(ShapeError, match="argument 'instr' is '16x16x32'"):
        E.mfma_scale_lanes("16x16x32")
    with pytest.raises(ShapeError, match="expected uint8"):
        E.mfma_pack_operand(np.zeros((16, 64), np.uint8), "e4m3")
    with pytest.raises(ShapeError, match="opsel"):
        E.mfma_pack_scales(np.zeros((16, 4), np.uint8), opsel=4)
    with pytest.raises(ShapeError, match="k % 128"):
        E.gfx950_gemm_16x16x128(
            None, None, None, None, m=16, n=16, k=96, fmt_a="e4m3", fmt_b="e4m3", scale_layout="turbo16x4"
        )
    with pytest.raises(DtypeError, match="fp4 operands"):
        E.mma_m16n8k32(np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32), fmt_a="e2m1")
    with pytest.raises(ShapeError, match="multiple of 8"):
        E.wgmma_acc_map(12)


# --- Hopper ---------------------------------------------------------------------------------------------------------


def test_mma_m16n8k32_maps_equal_the_cute_layouts():
    ra, ka = E.mma_m16n8k32_a_map()
    np.testing.assert_array_equal((ra + 16 * ka).reshape(32, 16), cute_tv(*SM89_A, 32, 16))
    nb, kb = E.mma_m16n8k32_b_map()
    np.testing.assert_array_equal((nb + 8 * kb).reshape(32, 8), cute_tv(*SM89_B, 32, 8))
    rc, cc = E.mma_m16n8k32_c_map()
    np.testing.assert_array_equal(rc + 16 * cc, cute_tv(*SM80_C, 32, 4))
    for idx, size in (((ra + 16 * ka), 512), ((nb + 8 * kb), 256), ((rc + 16 * cc), 128)):
        assert len(np.unique(idx)) == size


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_wgmma_maps_equal_the_cute_layouts(n):
    rw, kw = E.wgmma_a_map()
    np.testing.assert_array_equal((rw + 64 * kw).reshape(128, 16), cute_tv(*GMMA_A_64x32, 128, 16))
    r, c = E.wgmma_acc_map(n)
    np.testing.assert_array_equal(r + 64 * c, cute_tv(*gmma_c_64xn(n), 128, n // 2))
    assert len(np.unique(r + 64 * c)) == 64 * n


def test_wgmma_a_is_the_m16n8k32_pattern_per_warp():
    codes = np.random.default_rng(4).integers(0, 256, (64, 32), dtype=np.uint8)
    regs = E.wgmma_pack_a(codes)
    for w in range(4):
        np.testing.assert_array_equal(regs[32 * w : 32 * w + 32], E.mma_m16n8k32_pack_a(codes[16 * w : 16 * w + 16]))


@pytest.mark.parametrize("fmts", [("e4m3", "e4m3"), ("e5m2", "e4m3")], ids=pid)
def test_mma_m16n8k32_execute(fmts):
    fa, fb = fmts
    rng = np.random.default_rng(5)
    a, bt = rand_codes((16, 32), fa, rng), rand_codes((8, 32), fb, rng)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    rc, cc = E.mma_m16n8k32_c_map()
    d = E.mma_m16n8k32(E.mma_m16n8k32_pack_a(a), E.mma_m16n8k32_pack_b(bt), c[rc, cc], fmt_a=fa, fmt_b=fb)
    want = mxrt.decode(a, fa).astype(np.float64) @ mxrt.decode(bt, fb).astype(np.float64).T + c
    D = np.zeros((16, 8), np.float32)
    D[rc, cc] = d
    assert reference.relative_error(want, D) <= EMULATOR_RTOL


def test_mma_m16n8k32_mx_promotion_per_k32_vs_reference():
    rng = np.random.default_rng(6)
    k = 256
    x = rng.standard_normal((16, k)) * np.exp2(rng.integers(-5, 6, (16, 1)))
    w = rng.standard_normal((8, k)) * np.exp2(rng.integers(-5, 6, (8, 1)))
    qa, qb = mxrt.quantize_mx(x, "e4m3"), mxrt.quantize_mx(w, "e4m3")
    acc = E.mma_m16n8k32_mx(qa.data, qa.scales, qb.data, qb.scales)
    rc, cc = E.mma_m16n8k32_c_map()
    D = np.zeros((16, 8), np.float32)
    D[rc, cc] = acc
    want = reference.gemm_mx(qa, qb, out_dtype="float64")
    assert reference.relative_error(want, D) <= EMULATOR_RTOL
    # scaling by the wrong lane's rows (g + 8 <-> g) must show
    D_bad = np.zeros((16, 8), np.float32)
    D_bad[(rc + 8) % 16, cc] = acc
    assert reference.relative_error(want, D_bad) > 1e-3


@pytest.mark.parametrize("n", [8, 64])
def test_wgmma_execute(n):
    rng = np.random.default_rng(n)
    a, b = rand_codes((64, 32), "e4m3", rng), rand_codes((n, 32), "e4m3", rng)
    acc0 = rng.standard_normal((128, n // 2)).astype(np.float32)
    acc = E.wgmma_m64nNk32(E.wgmma_pack_a(a), b, acc0)
    r, c = E.wgmma_acc_map(n)
    D = np.zeros((64, n), np.float32)
    D[r, c] = acc
    D0 = np.zeros((64, n), np.float32)
    D0[r, c] = acc0
    want = mxrt.decode(a, "e4m3").astype(np.float64) @ mxrt.decode(b, "e4m3").astype(np.float64).T + D0
    assert reference.relative_error(want, D) <= EMULATOR_RTOL
