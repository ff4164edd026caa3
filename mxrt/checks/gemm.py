"""``mxrt check`` cases for the dense MX GEMM and the matrix-instruction emulators, and their independent oracles.

Oracles written differently on purpose: :func:`blockwise_gemm` decodes with ml_dtypes and sums per-32 block dots
times scale products (the reference dequantizes with mxrt's decoder and runs one float64 matmul);
:func:`cute_layout` evaluates CUTLASS layout algebra strings (the emulators use the closed formulas of
MX_REFERENCE.md 6.2/6.3); the gfx950 lane checks read mxrt's preshuffled buffers the way the kernels do and
compare with what the instruction needs.
"""

from __future__ import annotations

from collections.abc import Iterable

import ml_dtypes
import numpy as np

from .core import CheckRow, backend_for, mismatches

#: DeepGEMM ``QuantConfig.max_diff()``: fp8 x fp8, one fp4 operand, fp4 x fp4 (MX_REFERENCE.md 5). e5m2 has no
#: DeepGEMM threshold; with 2 mantissa bits its element error is twice e4m3's, so mxrt uses 4e-3.
CALC_DIFF_LIMIT = {0: 1e-3, 1: 1e-2, 2: 2e-2}
CALC_DIFF_LIMIT_E5M2 = 4e-3
#: Emulated instruction vs float64 reference: hardware accumulation order is UNVERIFIED, so relative 1e-6.
EMULATOR_RTOL = 1e-6

_ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def calc_diff_limit(fa: str, fb: str) -> float:
    if "e5m2" in (fa, fb):
        return CALC_DIFF_LIMIT_E5M2
    return CALC_DIFF_LIMIT[(fa, fb).count("e2m1")]


def oracle_values(data: np.ndarray, fmt: str, k: int) -> np.ndarray:
    """float64 element values ``[rows, k]`` by ml_dtypes (fp4 nibbles split by shifts), not mxrt's decoder."""
    data = np.asarray(data, np.uint8)
    if fmt == "e2m1":
        codes = np.stack([data & 0xF, data >> 4], axis=-1).reshape(data.shape[0], -1)[:, :k]
        table = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        return table[codes]
    return data.view(_ML[fmt]).astype(np.float64)


def blockwise_gemm(qa, qb) -> np.ndarray:
    """``sum_kb 2^(sa-127) 2^(sb-127) * dot(block kb)`` in float64 (K zero-padded to the block), ml_dtypes decode."""
    (m, k), n = qa.shape, qb.shape[0]
    kb = -(-k // 32)
    va, vb = np.zeros((m, kb * 32)), np.zeros((n, kb * 32))
    va[:, :k], vb[:, :k] = oracle_values(qa.data, qa.fmt, k), oracle_values(qb.data, qb.fmt, k)
    sa = np.asarray(qa.scales).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    sb = np.asarray(qb.scales).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    blocks = np.einsum("mbk,nbk->mnb", va.reshape(m, kb, 32), vb.reshape(n, kb, 32))
    return np.einsum("mnb,mb,nb->mn", blocks, sa, sb)


def _flatten(t):
    return [x for e in t for x in _flatten(e)] if isinstance(t, tuple) else [t]


def cute_layout(shape: tuple, stride: tuple, index: np.ndarray) -> np.ndarray:
    """CuTe layout ``shape:stride`` evaluated at linear ``index`` (colexicographic: first mode fastest)."""
    idx = np.asarray(index, np.int64)
    out = np.zeros_like(idx)
    for s, d in zip(_flatten(shape), _flatten(stride), strict=True):
        out += (idx % s) * d
        idx = idx // s
    return out


def cute_tv(thr: tuple, val: tuple, n_thr: int, n_val: int) -> np.ndarray:
    """A (thread, value) -> index table ``[n_thr, n_val]`` for a CuTe TV layout ``(thr, val)`` given as
    ``(shape, stride)`` pairs per mode."""
    t = cute_layout(*thr, np.arange(n_thr))[:, None]
    v = cute_layout(*val, np.arange(n_val))[None, :]
    return t + v


# CUTLASS mma_traits_sm89.hpp SM89_16x8x32_F32E4M3E4M3F32_TN and mma_traits_sm90_gmma.hpp (MX_REFERENCE.md 6.2/6.3)
SM89_A = (((4, 8), (64, 1)), ((4, 2, 2), (16, 8, 256)))  # index m + 16 k of the 16x32 A
SM89_B = (((4, 8), (32, 1)), ((4, 2), (8, 128)))  # index n + 8 k of the 8x32 B^T
SM80_C = (((4, 8), (32, 1)), ((2, 2), (16, 8)))  # index m + 16 n of the 16x8 C
GMMA_A_64x32 = (((4, 8, 4), (256, 1, 16)), ((4, 2, 2), (64, 8, 1024)))  # index m + 64 k


def gmma_c_64xn(n: int):
    return ((4, 8, 4), (128, 1, 16)), ((2, 2, n // 8), (64, 8, 512))  # index m + 64 n


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _operands(m, n, k, fa, fb, seed):
    from ..api.quant import quantize_mx

    rng = _rng(seed)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    return x, w, quantize_mx(x, fa), quantize_mx(w, fb)


def _row(op, case, backend, metric, value, ok):
    return CheckRow(op, case, backend, metric, f"{value:.3g}" if isinstance(value, float) else str(value), bool(ok))


def check_reference(backend: str) -> Iterable[CheckRow]:
    """reference.gemm_mx vs the blockwise ml_dtypes oracle, and vs the unquantized product (calc_diff)."""
    from ..problems import GEMM_FORMAT_PAIRS
    from ..reference import calc_diff, gemm_mx, relative_error

    for i, (fa, fb) in enumerate(GEMM_FORMAT_PAIRS):
        for j, (m, n, k) in enumerate([(33, 65, 100), (64, 96, 256)]):
            x, w, qa, qb = _operands(m, n, k, fa, fb, 100 * i + j)
            d = gemm_mx(qa, qb, out_dtype="float64")
            case = f"{fa}x{fb} {m}x{n}x{k}"
            err = relative_error(blockwise_gemm(qa, qb), d)
            yield _row("reference.gemm_mx", case, "numpy", "rel_err vs blockwise", err, err <= 1e-13)
            cd, lim = calc_diff(d, x @ w.T), calc_diff_limit(fa, fb)
            yield _row("reference.gemm_mx", case, "numpy", f"calc_diff vs unquantized (<= {lim:g})", cd, cd <= lim)


def check_gemm_op(backend: str) -> Iterable[CheckRow]:
    """mxrt.gemm_mx on ``backend`` vs the reference, every pair and out dtype, split_k 1 and 3: bit for bit on numpy;
    on the GPU (fp32 FMA, one scale application per 32-block) fp32 out within relative Frobenius 1e-5 and bf16/fp16
    within calc_diff 1e-5, in both split-K accumulation modes."""
    from ..api.gemm import gemm_mx
    from ..problems import GEMM_FORMAT_PAIRS, GEMM_OUT_DTYPES
    from ..reference import calc_diff, relative_error
    from ..reference import gemm_mx as ref

    name = backend_for("gemm_mx", backend)
    for i, (fa, fb) in enumerate(GEMM_FORMAT_PAIRS):
        _, _, qa, qb = _operands(37, 19, 200, fa, fb, 7 + i)
        for dt in GEMM_OUT_DTYPES:
            want = ref(qa, qb, out_dtype=dt)
            modes = ((1, True), (3, True)) if name == "numpy" else ((1, True), (3, True), (3, False))
            for split_k, det in modes:
                case = f"{fa}x{fb} {dt} split_k={split_k}" + ("" if det else " atomic")
                got = gemm_mx(qa, qb, out_dtype=dt, split_k=split_k, deterministic=det, backend=name)
                if name == "numpy":
                    yield mismatches("gemm_mx", case, backend, got, want)
                    continue
                want64 = ref(qa, qb, out_dtype="float64")
                got64 = np.asarray(got).astype(np.float64)
                if dt == "float32":
                    err = relative_error(want64, got64)
                    yield _row("gemm_mx", case, name, "rel_err (<= 1e-5)", err, err <= 1e-5)
                else:
                    lim = 1e-5 * (1 if det else split_k)
                    cd = calc_diff(got64, want64)
                    yield _row("gemm_mx", case, name, f"calc_diff (<= {lim:g})", cd, cd <= lim)


def check_decode_gemm(backend: str) -> Iterable[CheckRow]:
    """Decode-sized gemm_mx (m <= 64 tokens, k % 128 == 0: the ``sm90_decode`` path on an sm_90a GPU, whatever the
    dispatcher picks elsewhere) vs the float64 reference: bit for bit on numpy, calc_diff <= 1e-5 on the GPU."""
    from ..api.gemm import gemm_mx
    from ..reference import calc_diff
    from ..reference import gemm_mx as ref

    name = backend_for("gemm_mx", backend)
    for m, fa, fb in ((1, "e4m3", "e4m3"), (16, "e4m3", "e2m1"), (64, "e5m2", "e4m3"), (7, "e2m1", "e2m1")):
        _, _, qa, qb = _operands(m, 136, 512, fa, fb, 40 + m)
        case = f"decode {m}x136x512 {fa}x{fb} bfloat16"
        got = gemm_mx(qa, qb, backend=name)
        if name == "numpy":
            yield mismatches("gemm_mx", case, backend, got, ref(qa, qb, out_dtype="bfloat16"))
            continue
        cd = calc_diff(np.asarray(got).astype(np.float64), ref(qa, qb, out_dtype="float64"))
        yield _row("gemm_mx", case, name, "calc_diff (<= 1e-05)", cd, cd <= 1e-5)


def check_moe_gemm(backend: str) -> Iterable[CheckRow]:
    """mxrt.moe_gemm_mx on moe_align_block_size layouts (gate/up and down, topk weights, a non-local expert) vs a
    per-slot float64 loop written here: equal after one rounding on numpy, calc_diff <= 1e-5 on the GPU."""
    from ..api.layouts import moe_align_block_size
    from ..api.moe_gemm import moe_gemm_mx
    from ..api.quant import dequantize_mx, quantize_mx
    from ..reference import calc_diff

    name = backend_for("moe_gemm_mx", backend)
    rng = _rng(77)
    t, e, top_k, bs, k, n = 5, 8, 2, 4, 256, 48
    ids = np.stack([rng.permutation(e)[:top_k] for _ in range(t)]).astype(np.int32)
    emap = np.where(np.arange(e) == 5, -1, np.arange(e) - (np.arange(e) > 5)).astype(np.int32)
    layout = moe_align_block_size(ids, bs, e, emap, backend="numpy")
    tw = rng.random((t, top_k)).astype(np.float32)
    w = quantize_mx(rng.standard_normal((e - 1, n, k)).astype(np.float32), axis=2)
    dw = dequantize_mx(w).astype(np.float64)
    for gemm, a_div in (("gate_up", top_k), ("down", 1)):
        x = quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
        dx = dequantize_mx(x).astype(np.float64)
        want = np.zeros((t * top_k, n))
        for slot, ge in enumerate(ids.reshape(-1)):
            if emap[ge] >= 0:
                want[slot] = dx[slot // a_div] @ dw[emap[ge]].T * np.float64(tw.reshape(-1)[slot])
        case = f"{gemm} T={t} E={e} top_k={top_k} bs={bs} topk_weights, 1 non-local expert"
        got = moe_gemm_mx(x, w, *layout, top_k=top_k, block_size=bs, a_div=a_div, topk_weights=tw, backend=name)
        if name == "numpy":
            yield mismatches("moe_gemm_mx", case, backend, got, want.astype(got.dtype))
            continue
        cd = calc_diff(np.asarray(got).astype(np.float64), want)
        yield _row("moe_gemm_mx", case, name, "calc_diff (<= 1e-05)", cd, cd <= 1e-5)


def check_scale_lanes(backend: str) -> Iterable[CheckRow]:
    """Every lane of every 16x16x128 instruction gets the scale it needs from the turbo16x4 / aiter32x8 buffers."""
    from ..api.layouts import preshuffle_scales
    from ..layouts import scale_layout_shape
    from ..reference.emulate import aiter32x8_lane_dwords, mfma_read_scales, turbo16x4_lane_scales
    from .layouts import padded_scales

    rows, cols = 70, 13
    s = _rng(5).integers(100, 160, (rows, cols), dtype=np.uint8)
    for layout in ("turbo16x4", "aiter32x8"):
        sm, sn = scale_layout_shape(layout, rows, cols)
        S = padded_scales(s, sm, sn, 127)
        p = preshuffle_scales(s, layout, backend=backend_for("preshuffle_scales", backend))
        got, want = [], []
        if layout == "turbo16x4":
            for band in range(sm // 16):
                for t in range(sn // 4):
                    got.append(mfma_read_scales(turbo16x4_lane_scales(p, cols, band, t), "16x16x128", 0))
                    want.append(S[16 * band : 16 * band + 16, 4 * t : 4 * t + 4])
        else:
            for i0 in range(sm // 32):
                for i3 in range(sn // 8):
                    dw = aiter32x8_lane_dwords(p, cols, i0, i3)
                    for i1 in (0, 1):
                        for i4 in (0, 1):
                            got.append(mfma_read_scales(dw, "16x16x128", 2 * i4 + i1))
                            r, c = 32 * i0 + 16 * i1, 8 * i3 + 4 * i4
                            want.append(S[r : r + 16, c : c + 4])
        yield mismatches("emulate", f"{layout} lane scales {rows}x{cols}", backend, np.stack(got), np.stack(want))


def check_weight_lanes(backend: str) -> Iterable[CheckRow]:
    """Every lane gets the B operand bytes of 16x16x128 from preshuffle_weight (aiter16x16), fp8 and fp4."""
    from ..formats import pack_fp4
    from ..layouts import preshuffle_weight
    from ..reference.emulate import aiter16x16_lane_bytes, mfma_pack_operand

    n, k = 40, 384
    for fmt in ("e4m3", "e2m1"):
        codes = _rng(6).integers(0, 256 if fmt == "e4m3" else 16, (n, k), dtype=np.uint8)
        w = preshuffle_weight(codes if fmt == "e4m3" else pack_fp4(codes))
        padded = np.zeros((48, k), np.uint8)
        padded[:n] = codes
        got = [aiter16x16_lane_bytes(w, fmt, n0, t) for n0 in range(3) for t in range(k // 128)]
        want = [
            mfma_pack_operand(padded[16 * n0 : 16 * n0 + 16, 128 * t : 128 * t + 128], fmt)
            for n0 in range(3)
            for t in range(k // 128)
        ]
        yield mismatches("emulate", f"aiter16x16 {fmt} lane bytes {n}x{k}", backend, np.stack(got), np.stack(want))


def check_emulated_gemm(backend: str) -> Iterable[CheckRow]:
    """A GEMM run through the 16x16x128 emulator from preshuffled buffers vs reference.gemm_mx (rel 1e-6)."""
    from ..api.layouts import preshuffle_scales
    from ..layouts import preshuffle_weight
    from ..reference import gemm_mx, relative_error
    from ..reference.emulate import gfx950_gemm_16x16x128

    m, n, k = 32, 48, 256
    for i, (fa, fb) in enumerate([("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")]):
        _, _, qa, qb = _operands(m, n, k, fa, fb, 30 + i)
        want = gemm_mx(qa, qb, out_dtype="float64")
        for layout in ("turbo16x4", "aiter32x8"):
            d = gfx950_gemm_16x16x128(
                qa.data,
                preshuffle_scales(qa.scales, layout, backend=backend_for("preshuffle_scales", backend)),
                preshuffle_weight(qb.data),
                preshuffle_scales(qb.scales, layout, backend=backend_for("preshuffle_scales", backend)),
                m=m,
                n=n,
                k=k,
                fmt_a=fa,
                fmt_b=fb,
                scale_layout=layout,
            )
            err = relative_error(want, d)
            yield _row("emulate", f"gfx950 16x16x128 {fa}x{fb} {layout}", "numpy", "rel_err", err, err <= EMULATOR_RTOL)


def check_hopper_maps(backend: str) -> Iterable[CheckRow]:
    """mma.sync m16n8k32 and wgmma m64nNk32 maps vs the CuTe layouts they were transcribed from."""
    from ..reference import emulate as E

    ra, ka = E.mma_m16n8k32_a_map()
    yield mismatches(
        "emulate", "m16n8k32 A vs SM89 ALayout", "numpy", (ra + 16 * ka).reshape(32, 16), cute_tv(*SM89_A, 32, 16)
    )
    nb, kb = E.mma_m16n8k32_b_map()
    yield mismatches(
        "emulate", "m16n8k32 B vs SM89 BLayout", "numpy", (nb + 8 * kb).reshape(32, 8), cute_tv(*SM89_B, 32, 8)
    )
    rc, cc = E.mma_m16n8k32_c_map()
    yield mismatches("emulate", "m16n8k32 C vs SM80_16x8_Row", "numpy", rc + 16 * cc, cute_tv(*SM80_C, 32, 4))
    rw, kw = E.wgmma_a_map()
    yield mismatches(
        "emulate", "wgmma A vs ALayout_64x32", "numpy", (rw + 64 * kw).reshape(128, 16), cute_tv(*GMMA_A_64x32, 128, 16)
    )
    for n in (8, 64, 256):
        r, c = E.wgmma_acc_map(n)
        yield mismatches(
            "emulate", f"wgmma acc n={n} vs CLayout_64xN", "numpy", r + 64 * c, cute_tv(*gmma_c_64xn(n), 128, n // 2)
        )


CASES: list = [
    check_reference,
    check_gemm_op,
    check_decode_gemm,
    check_moe_gemm,
    check_scale_lanes,
    check_weight_lanes,
    check_emulated_gemm,
    check_hopper_maps,
]
