"""``mxrt check`` cases for mxrt.formats: codecs, scale rules, quantize/dequantize, dual, blockscale."""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np

from ..api.quant import per_block_cast_to_fp8, per_token_cast_to_fp8, quantize_mx, quantize_mx_dual
from ..formats import (
    FORMATS,
    ScaleMode,
    ceil_to_ue8m0,
    compute_scales,
    decode,
    dequantize_mx,
    e8m0_decode,
    encode,
    unpack_fp4,
)
from ..formats.codecs import to_float32
from .core import CheckRow, backend_for, mismatches
from .independent import bf16_all, quantize_rows, rounding_bound, scale_bytes

# MX_REFERENCE.md 2.2: E4M3 scale byte per amax, columns FLOOR, CEIL, EVEN, RCEIL
SCALE_TABLE = {
    480.0: (127, 128, 127, 128),
    464.0: (127, 128, 127, 128),
    448.0: (127, 128, 127, 127),
    449.0: (127, 128, 127, 128),
    1.0: (119, 119, 119, 119),
    0.0: (0, 0, 0, 0),
    1e-5: (102, 103, 102, 102),
}
E4M3_BLOCK = [480, -3, 0.1, 1e-3, -0.0, 7, 255, -448] + [0] * 24
E4M3_BLOCK_CODES = {
    "floor": (127, [0x7E, 0xC4, 0x1D, 0x01, 0x80, 0x4E, 0x78, 0xFE]),
    "even": (127, [0x7E, 0xC4, 0x1D, 0x01, 0x80, 0x4E, 0x78, 0xFE]),
    "rceil": (128, [0x77, 0xBC, 0x15, 0x00, 0x80, 0x46, 0x70, 0xF6]),
    "ceil": (128, [0x77, 0xBC, 0x15, 0x00, 0x80, 0x46, 0x70, 0xF6]),
}
FP4_BLOCK = [6, -2.9, 0.7, 1.75, 0.25, 0.75, 3.5, -5] + [0] * 24
# b = 127 for FLOOR, EVEN and RCEIL (MX_REFERENCE.md 2.2). The spec says "every mode", but CEIL's own formula
# gives ceil(log2 6) - 2 = 1 (b = 128); codes of x/2 worked by hand: 5, 0xB, 1, 2, 0, 1, 4 (1.75 tie), 0xC (-2.5 tie).
FP4_BLOCK_BYTES = {
    "floor": (127, [0xD7, 0x41, 0x20, 0xE6]),
    "even": (127, [0xD7, 0x41, 0x20, 0xE6]),
    "rceil": (127, [0xD7, 0x41, 0x20, 0xE6]),
    "ceil": (128, [0xB5, 0x21, 0x10, 0xC4]),
}


def wide_range(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Heavy-tailed float32 data spanning 2^-140 .. 2^120, with zeros, -0 and exact format maxima mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-140, 120, size=(*shape[:-1], 1))).astype(np.float32)
    flat = x.reshape(-1)
    idx = rng.integers(0, flat.size, size=max(1, flat.size // 50))
    flat[idx[0::3]] = 0.0
    flat[idx[1::3]] = -0.0
    flat[idx[2::3]] = 448.0
    return x


def codec_exhaustive(backend: str) -> Iterator[CheckRow]:
    xs = bf16_all()
    x32 = to_float32(xs)
    for name, f in FORMATS.items():
        codes = np.arange(f.num_codes, dtype=np.uint8)
        yield mismatches(
            "decode",
            f"{name} all {f.num_codes} codes vs ml_dtypes",
            "numpy",
            decode(codes, name),
            codes.view(f.ml_dtype).astype(np.float32),
        )
        with np.errstate(invalid="ignore"):
            ref = np.clip(x32, -f.max_value, f.max_value).astype(f.ml_dtype).view(np.uint8)
        yield mismatches("encode", f"{name} all 65536 bf16 vs ml_dtypes(clip)", "numpy", encode(xs, name), ref)
    b = np.arange(256, dtype=np.uint8)
    yield mismatches(
        "e8m0_decode",
        "all 256 bytes vs ml_dtypes",
        "numpy",
        e8m0_decode(b),
        b.view(ml_dtypes.float8_e8m0fnu).astype(np.float32),
    )


def scale_rules(backend: str) -> Iterator[CheckRow]:
    amax = np.array(list(SCALE_TABLE), np.float32)
    e4m3 = FORMATS["e4m3"]
    for i, mode in enumerate(("floor", "ceil", "even", "rceil")):
        expected = np.array([v[i] for v in SCALE_TABLE.values()], np.uint8)
        yield mismatches(
            "compute_scales",
            f"e4m3 {mode} worked table (MX_REFERENCE 2.2)",
            "numpy",
            compute_scales(amax, e4m3, ScaleMode(mode)),
            expected,
        )
    a = np.abs(to_float32(bf16_all()))
    for name, f in FORMATS.items():
        for mode in ScaleMode:
            with np.errstate(invalid="ignore", over="ignore"):
                got, ref = compute_scales(a, f, mode), scale_bytes(a, f, mode.value)
            yield mismatches(
                "compute_scales", f"{name} {mode.value} every bf16 amax vs log2 formula", "numpy", got, ref
            )
    dg = np.array([1e-4 / 448, 1.0, 1.5, 3.0, 2.0**-130, 1e38], np.float32)
    yield mismatches(
        "ceil_to_ue8m0",
        "powers of two, clamp [1, 254]",
        "numpy",
        ceil_to_ue8m0(dg),
        np.array([2.0**-22, 1.0, 2.0, 4.0, 2.0**-126, 2.0**127], np.float32),
    )


def worked_examples(backend: str) -> Iterator[CheckRow]:
    x = np.array(E4M3_BLOCK, np.float32)
    for mode, (s, codes) in E4M3_BLOCK_CODES.items():
        q = quantize_mx(x, "e4m3", scale_mode=mode, backend=backend)
        yield mismatches(
            "quantize_mx",
            f"e4m3 {mode} block (MX_REFERENCE 2.2)",
            backend,
            np.concatenate([q.scales, q.data[:8]]),
            np.array([s, *codes], np.uint8),
        )
    for mode, (s, packed) in FP4_BLOCK_BYTES.items():
        q = quantize_mx(np.array(FP4_BLOCK, np.float32), "e2m1", scale_mode=mode, backend=backend)
        yield mismatches(
            "quantize_mx",
            f"e2m1 {mode} packed block (MX_REFERENCE 2.2)",
            backend,
            np.concatenate([q.scales, q.data[:4]]),
            np.array([s, *packed], np.uint8),
        )


def quantize_vs_oracle(backend: str) -> Iterator[CheckRow]:
    x = wide_range((24, 100), seed=1)
    x[3, 40:45] = np.nan
    x[5, 64] = np.inf
    x[7, 0:32] = 0.0
    x[9, :] = np.float32(2.0**-130)  # fp32 subnormals: scale 2^-127 territory
    for name, f in FORMATS.items():
        for mode in ScaleMode:
            q = quantize_mx(x, name, scale_mode=mode, backend=backend)
            codes, scales = quantize_rows(x, f, mode.value, 32)
            yield mismatches(
                "quantize_mx",
                f"{name} {mode.value} wide-range [24,100] vs oracle",
                backend,
                np.concatenate([q.codes.ravel(), q.scales.ravel()]),
                np.concatenate([codes.ravel(), scales.ravel()]),
            )


def roundtrip_bound(backend: str) -> Iterator[CheckRow]:
    x = wide_range((64, 96), seed=2)
    for name, f in FORMATS.items():
        for mode in ScaleMode:
            q = quantize_mx(x, name, scale_mode=mode, backend=backend)
            err = np.abs(dequantize_mx(q, np.float64) - x.astype(np.float64))
            s = np.repeat(q.scales, 32, axis=-1)[:, :96]
            bad = int(np.count_nonzero(err > rounding_bound(x, s, f)))
            yield CheckRow(
                "dequantize_mx",
                f"{name} {mode.value} |deq(q(x)) - x| <= half ulp",
                backend,
                "violations",
                f"{bad}/{x.size}",
                bad == 0,
            )


def dual_and_2d(backend: str) -> Iterator[CheckRow]:
    x = wide_range((70, 96), seed=3)
    for name in ("e4m3", "e2m1"):
        d = quantize_mx_dual(x, name, backend=backend)
        r = quantize_mx(x, name, backend=backend)
        c = quantize_mx(np.ascontiguousarray(x.T), name, backend=backend)
        yield mismatches(
            "quantize_mx_dual",
            f"{name} row == quantize_mx(x)",
            backend,
            np.concatenate([d.row.data.ravel(), d.row.scales.ravel()]),
            np.concatenate([r.data.ravel(), r.scales.ravel()]),
        )
        yield mismatches(
            "quantize_mx_dual",
            f"{name} col == quantize_mx(x.T)",
            backend,
            np.concatenate([d.col.data.ravel(), d.col.scales.ravel()]),
            np.concatenate([c.data.ravel(), c.scales.ravel()]),
        )
        d2 = quantize_mx_dual(x, name, block_2d=True, backend=backend)
        f = FORMATS[name]
        # independent: per 32x32 tile amax, then the oracle on each row with that tile's scale
        tiles = np.zeros((96, 96), np.float32)
        tiles[:70] = x
        amax = np.abs(tiles.reshape(3, 32, 3, 32)).max(axis=(1, 3))
        s_tile = scale_bytes(amax, f, "rceil")
        row_s = np.repeat(s_tile, 32, axis=0)[:70]
        y = x.astype(np.float64) / np.exp2(np.repeat(row_s.astype(np.float64) - 127, 32, axis=1))
        row_codes = np.clip(y, -f.max_value, f.max_value).astype(f.ml_dtype).view(np.uint8)
        got_row = d2.row.codes if name != "e2m1" else unpack_fp4(d2.row.data, 96)
        yield mismatches(
            "quantize_mx_dual",
            f"{name} 32x32 blocks vs tile formula",
            backend,
            np.concatenate([got_row.ravel(), d2.row.scales.ravel(), d2.col.codes.ravel()]),
            np.concatenate([row_codes.ravel(), row_s.ravel(), row_codes.T.ravel()]),
        )


def blockscale(backend: str) -> Iterator[CheckRow]:
    backend = backend_for("per_token_cast_to_fp8", backend)  # numpy-only ops so far: rows say where they ran
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((40, 300)) * np.exp2(rng.integers(-20, 20, (40, 1)))).astype(np.float32)
    x[0] = 0.0
    for ue8m0 in (False, True):
        q, sf = per_token_cast_to_fp8(x, use_ue8m0=ue8m0, backend=backend)
        pad = np.zeros((40, 384), np.float32)
        pad[:, :300] = x
        amax = np.maximum(np.abs(pad.reshape(40, 3, 128)).max(-1), np.float32(1e-4))
        ref_sf = amax / np.float32(448.0)
        if ue8m0:
            ref_sf = np.exp2(np.ceil(np.log2(ref_sf.astype(np.float64)))).astype(np.float32)
        y = pad.reshape(40, 3, 128) * (np.float32(1.0) / ref_sf[..., None])
        ref_q = y.reshape(40, 384)[:, :300].astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        yield mismatches(
            "per_token_cast_to_fp8",
            f"1x128 use_ue8m0={ue8m0} vs formula",
            backend,
            np.concatenate([q.ravel(), sf.ravel().view(np.uint8)]),
            np.concatenate([ref_q.ravel(), ref_sf.ravel().view(np.uint8)]),
        )
        qb, sfb = per_block_cast_to_fp8(x, use_ue8m0=ue8m0, backend=backend)
        deq = decode(qb, "e4m3").astype(np.float64) * np.repeat(np.repeat(sfb, 128, 0), 128, 1)[:40, :300]
        rel = float(np.linalg.norm(deq - x) / np.linalg.norm(x))
        yield CheckRow(
            "per_block_cast_to_fp8",
            f"128x128 use_ue8m0={ue8m0} rel. error",
            backend,
            "rel_err",
            f"{rel:.2e}",
            rel < 0.07,
        )


CASES = [codec_exhaustive, scale_rules, worked_examples, quantize_vs_oracle, roundtrip_bound, dual_and_2d, blockscale]
