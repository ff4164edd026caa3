"""Numpy emulators of the MX matrix instructions' operand maps (MX_REFERENCE.md 6.1-6.3).

Each instruction gets a *pack* side (logical tile -> the per-lane register arrays the hardware reads), an
*execute* side (register arrays -> invert the maps, decode, apply the per-32 scales, accumulate in float64,
round to fp32) and the accumulator's per-lane register map. On top sit models of what a gfx950 kernel loads
from mxrt's preshuffled buffers (:func:`turbo16x4_lane_scales`, :func:`aiter32x8_lane_dwords`,
:func:`aiter16x16_lane_bytes`), so tests prove on the CPU that each layout hands every lane exactly the bytes
and the scale the instruction reads.

Instructions:

- gfx950 ``v_mfma_scale_f32_16x16x128_f8f6f4`` and ``v_mfma_scale_f32_32x32x64_f8f6f4`` (``instr`` =
  ``"16x16x128"`` / ``"32x32x64"``), fp8/bf8 (e4m3/e5m2) and fp4 (e2m1) operands; fp6 is not emulated (its
  packed register map is UNVERIFIED in MX_REFERENCE.md).
- NVIDIA ``mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32`` (no scales: MX needs one promotion per k32,
  modelled by :func:`mma_m16n8k32_mx`).
- NVIDIA ``wgmma.mma_async m64nNk32`` 8-bit: A-from-registers map and accumulator map (B from shared memory,
  K-major, taken as a ``[N, 32]`` code matrix).

Limits stated by the spec and kept here: hardware accumulation order and internal precision are UNVERIFIED
(compare with a tolerance); a mixed fp8 x fp4 MFMA is emulated by inverting each operand's map on its own,
i.e. pairing logical K with logical K (the hardware's mixed pairing is UNVERIFIED); scale byte 0 is
emulated as 2^-127 (its hardware meaning is disputed, tests use other bytes).
"""

from __future__ import annotations

import numpy as np

from ..codes import FMT_CODES
from ..errors import DtypeError, ShapeError
from ..formats import decode, get_format

#: gfx950 scaled-MFMA shapes: instr -> (rows of A = cols of B, K per instruction).
MFMA_SCALE_SHAPES = {"16x16x128": (16, 128), "32x32x64": (32, 64)}
#: cbsz / blgp format codes of the scaled MFMA: mxrt's element format codes were chosen equal to them.
MFMA_FMT_CODES = FMT_CODES
_EMULATED = ("e4m3", "e5m2", "e2m1")


def _instr(instr: str, op: str) -> tuple[int, int]:
    if instr not in MFMA_SCALE_SHAPES:
        raise ShapeError(f"{op}: argument 'instr' is {instr!r}, expected one of {list(MFMA_SCALE_SHAPES)}")
    return MFMA_SCALE_SHAPES[instr]


def _fmt(fmt: str, op: str, arg: str = "fmt") -> str:
    name = get_format(fmt, op).name
    if name not in _EMULATED:
        raise DtypeError(f"{op}: argument '{arg}' is {fmt!r}, expected one of {list(_EMULATED)} (fp6 not emulated)")
    return name


def _le_u32(b: np.ndarray) -> np.ndarray:
    """uint8 [..., 4j] -> little-endian uint32 [..., j] (byte 0 is the lowest)."""
    return np.ascontiguousarray(b, np.uint8).view("<u4").astype(np.uint32)


def _le_bytes(w: np.ndarray) -> np.ndarray:
    """uint32 [..., j] -> uint8 [..., 4j], little-endian."""
    return np.ascontiguousarray(w, "<u4").view(np.uint8)


def _values(codes: np.ndarray, fmt: str) -> np.ndarray:
    return decode(codes.astype(np.uint8), fmt).astype(np.float64)


def _scale_value(byte: np.ndarray) -> np.ndarray:
    """E8M0 byte -> float64 2^(b-127), NaN for 0xFF."""
    b = np.asarray(byte).astype(np.int64)
    return np.where(b == 0xFF, np.nan, np.ldexp(1.0, b - 127))


# --- gfx950 v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4 ------------------------------------------------------


def mfma_operand_map(instr: str, fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where element ``(i, k)`` of the A tile (``B[k][j]``: ``i -> j``) lives in the 64 lanes' registers.

    Returns int64 ``(lane, byte, nibble)``, each ``[R, K]``; ``byte`` indexes the lane's 32 operand bytes (VGPR
    ``byte // 4``, bits ``8 * (byte % 4)``) and ``nibble`` is -1 for 8-bit formats, 0 (low) / 1 (high) for fp4.

    16x16x128: fp8 ``lane = i + 16*((k % 64)//16)``, ``byte = 16*(k//64) + k % 16``; fp4 ``lane = i + 16*(k//32)``,
    ``byte = (k % 32)//2``, low nibble = even k. 32x32x64: fp8 ``lane = i + 32*((k % 32)//16)``,
    ``byte = 16*(k//32) + k % 16``; fp4 ``lane = i + 32*(k//32)``, same bytes (MX_REFERENCE.md 6.1).
    """
    op = "mfma_operand_map"
    R, K = _instr(instr, op)
    fmt = _fmt(fmt, op)
    i, k = np.meshgrid(np.arange(R), np.arange(K), indexing="ij")
    if fmt == "e2m1":
        return i + R * (k // 32), (k % 32) // 2, k % 2
    if R == 16:
        return i + 16 * ((k % 64) // 16), 16 * (k // 64) + k % 16, np.full_like(k, -1)
    return i + 32 * ((k % 32) // 16), 16 * (k // 32) + k % 16, np.full_like(k, -1)


def mfma_pack_operand(codes: np.ndarray, fmt: str, instr: str = "16x16x128") -> np.ndarray:
    """Pack a logical tile of element codes ``uint8 [R, K]`` (one code per byte, fp4 unpacked) into the per-lane
    operand bytes ``uint8 [64, 32]`` the instruction reads (fp4 fills bytes 0..15 = v[0:3]; the rest stay 0)."""
    op = "mfma_pack_operand"
    R, K = _instr(instr, op)
    codes = np.asarray(codes)
    if codes.shape != (R, K) or codes.dtype != np.uint8:
        raise ShapeError(f"{op}: argument 'codes' is {codes.dtype}{codes.shape}, expected uint8{(R, K)}")
    lane, byte, nib = mfma_operand_map(instr, fmt)
    reg = np.zeros((64, 32), np.uint8)
    if (nib < 0).all():
        reg[lane, byte] = codes
    else:
        np.bitwise_or.at(reg, (lane, byte), ((codes & 0xF) << (4 * nib)).astype(np.uint8))
    return reg


def mfma_unpack_operand(reg: np.ndarray, fmt: str, instr: str = "16x16x128") -> np.ndarray:
    """Invert :func:`mfma_pack_operand`: the codes ``uint8 [R, K]`` the instruction sees in ``reg [64, 32]``."""
    op = "mfma_unpack_operand"
    _instr(instr, op)
    reg = np.asarray(reg)
    if reg.shape != (64, 32) or reg.dtype != np.uint8:
        raise ShapeError(f"{op}: argument 'reg' is {reg.dtype}{reg.shape}, expected uint8(64, 32)")
    lane, byte, nib = mfma_operand_map(instr, fmt)
    b = reg[lane, byte]
    return b if (nib < 0).all() else ((b >> (4 * nib)) & 0xF).astype(np.uint8)


def mfma_scale_lanes(instr: str = "16x16x128") -> tuple[np.ndarray, np.ndarray]:
    """``(row, kb)`` int64 ``[64]``: lane ``l`` supplies the scale of A row (B column) ``l % R`` and K-block
    ``l // R`` of the instruction's K range (scale lane = ``i + R*kb``)."""
    R, _ = _instr(instr, "mfma_scale_lanes")
    lanes = np.arange(64)
    return lanes % R, lanes // R


def mfma_pack_scales(s: np.ndarray, instr: str = "16x16x128", opsel: int = 0, fill: int = 127) -> np.ndarray:
    """Scale VGPR ``uint32 [64]`` for logical scales ``s: uint8 [R, K/32]``: byte ``opsel`` of lane ``i + R*kb``
    holds ``s[i, kb]``; the other three bytes hold ``fill``."""
    op = "mfma_pack_scales"
    R, K = _instr(instr, op)
    s = np.asarray(s)
    if s.shape != (R, K // 32) or s.dtype != np.uint8:
        raise ShapeError(f"{op}: argument 's' is {s.dtype}{s.shape}, expected uint8{(R, K // 32)}")
    if opsel not in (0, 1, 2, 3):
        raise ShapeError(f"{op}: argument 'opsel' is {opsel!r}, expected 0, 1, 2 or 3")
    row, kb = mfma_scale_lanes(instr)
    b = np.full((64, 4), fill, np.uint8)
    b[:, opsel] = s[row, kb]
    return _le_u32(b).reshape(64)


def mfma_read_scales(vgpr: np.ndarray, instr: str = "16x16x128", opsel: int = 0) -> np.ndarray:
    """What the instruction reads from a scale VGPR ``uint32 [64]``: ``uint8 [R, K/32]``, ``s[i, kb]`` = byte
    ``opsel`` of lane ``i + R*kb``."""
    op = "mfma_read_scales"
    R, K = _instr(instr, op)
    v = np.asarray(vgpr)
    if v.shape != (64,) or v.dtype.kind not in "iu":
        raise ShapeError(f"{op}: argument 'vgpr' is {v.dtype}{v.shape}, expected uint32(64,)")
    byte = ((v.astype(np.uint64) >> np.uint64(8 * opsel)) & np.uint64(0xFF)).astype(np.uint8)
    return byte.reshape(K // 32, R).T.copy()


def mfma_d_map(instr: str = "16x16x128") -> tuple[np.ndarray, np.ndarray]:
    """C/D register map: ``(row, col)`` int64 ``[64, nreg]``; register r of lane l holds ``D[row, col]``.

    16x16 (4 VGPRs): ``D[4*(l//16) + r][l % 16]``; 32x32 (16 VGPRs): ``D[8*(r//4) + 4*(l//32) + r % 4][l % 32]``.
    """
    R, _ = _instr(instr, "mfma_d_map")
    lane = np.arange(64)[:, None]
    if R == 16:
        r = np.arange(4)[None, :]
        return np.broadcast_to(4 * (lane // 16) + r, (64, 4)).copy(), np.broadcast_to(lane % 16, (64, 4)).copy()
    r = np.arange(16)[None, :]
    return (8 * (r // 4) + 4 * (lane // 32) + r % 4), np.broadcast_to(lane % 32, (64, 16)).copy()


def mfma_d_to_regs(d: np.ndarray, instr: str = "16x16x128") -> np.ndarray:
    """``D [R, R]`` -> per-lane accumulator registers ``[64, nreg]`` (same dtype)."""
    row, col = mfma_d_map(instr)
    return np.asarray(d)[row, col]


def mfma_regs_to_d(regs: np.ndarray, instr: str = "16x16x128") -> np.ndarray:
    """Per-lane accumulator registers ``[64, nreg]`` -> ``D [R, R]``."""
    R, _ = _instr(instr, "mfma_regs_to_d")
    row, col = mfma_d_map(instr)
    regs = np.asarray(regs)
    d = np.empty((R, R), regs.dtype)
    d[row, col] = regs
    return d


def mfma_scale(
    instr: str,
    a_reg: np.ndarray,
    b_reg: np.ndarray,
    scale_a: np.ndarray,
    scale_b: np.ndarray,
    *,
    fmt_a: str = "e4m3",
    fmt_b: str = "e4m3",
    opsel_a: int = 0,
    opsel_b: int = 0,
    c: np.ndarray | None = None,
) -> np.ndarray:
    """Execute ``v_mfma_scale_f32_<instr>_f8f6f4`` on register arrays; returns ``D: float32 [R, R]``.

    ``D[i][j] = C[i][j] + sum_kb 2^(sA(i,kb)-127) 2^(sB(j,kb)-127) sum_{k in kb} A[i][k] B[j][k]`` with A/B
    read from ``a_reg``/``b_reg`` ``uint8 [64, 32]`` through :func:`mfma_operand_map`, the scales from byte
    ``opsel`` of ``scale_a``/``scale_b`` ``uint32 [64]`` (lane ``i + R*kb``), float64 accumulation and one
    rounding to fp32. ``c`` is ``[R, R]`` (zeros by default).
    """
    R, K = _instr(instr, "mfma_scale")
    A = _values(mfma_unpack_operand(a_reg, fmt_a, instr), fmt_a)
    B = _values(mfma_unpack_operand(b_reg, fmt_b, instr), fmt_b)
    sa = _scale_value(mfma_read_scales(scale_a, instr, opsel_a))  # [R, K/32]
    sb = _scale_value(mfma_read_scales(scale_b, instr, opsel_b))
    blocks = np.einsum("ibk,jbk->ijb", A.reshape(R, K // 32, 32), B.reshape(R, K // 32, 32))
    acc = np.zeros((R, R)) if c is None else np.asarray(c, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return (acc + np.einsum("ijb,ib,jb->ij", blocks, sa, sb)).astype(np.float32)


# --- what a gfx950 kernel loads from mxrt's preshuffled buffers --------------------------------------------------


def turbo16x4_lane_scales(p: np.ndarray, cols: int, band: int, t: int) -> np.ndarray:
    """Primus-Turbo's per-lane scale load: lane ``l`` reads element ``band*16*sn + t*64 + l`` of the flat
    ``preshuffle_scales(s, "turbo16x4")`` buffer (``sn = align(cols, 4)``; 16-row band ``band``, 128-wide K step
    ``t``), zero-extended to uint32; the MFMA reads it with opsel 0 (MX_REFERENCE.md 3a)."""
    sn = -(-cols // 4) * 4
    flat = np.asarray(p).ravel()
    return flat[band * 16 * sn + t * 64 + np.arange(64)].astype(np.uint32)


def aiter32x8_lane_dwords(p: np.ndarray, cols: int, i0: int, i3: int) -> np.ndarray:
    """aiter's per-lane scale load: the 64 little-endian dwords of 32x8 tile ``(i0, i3)`` of the flat
    ``preshuffle_scales(s, "aiter32x8")`` buffer, lane ``L`` at byte ``i0*(sn/8)*256 + i3*256 + 4*L``. The
    MFMA for M-subtile ``i1`` and K step ``i4`` (K blocks ``8*i3 + 4*i4 ..``) uses ``opsel = 2*i4 + i1``
    (MX_REFERENCE.md 3b)."""
    sn = -(-cols // 8) * 8
    flat = np.asarray(p, np.uint8).ravel()
    base = i0 * (sn // 8) * 256 + i3 * 256
    return _le_u32(flat[base : base + 256]).reshape(64)


def aiter16x16_lane_bytes(w: np.ndarray, fmt: str, n0: int, t: int) -> np.ndarray:
    """The B operand registers ``uint8 [64, 32]`` a kernel loads from ``preshuffle_weight(codes)`` for the
    16-row band ``n0`` and the 128-wide K step ``t`` (16x16x128): lane ``l`` takes the 16-byte chunk at
    ``tile_base + l*16`` into v[0:3]; for fp8 also the chunk at ``tile_base + 1024 + l*16`` into v[4:7].
    ``tile_base = n0*16*kk + t*2048`` (fp8; ``kk`` = padded K) or ``n0*16*kk + t*1024`` (fp4 bytes)
    (MX_REFERENCE.md 3b')."""
    fmt = _fmt(fmt, "aiter16x16_lane_bytes")
    w = np.asarray(w, np.uint8)
    kk = w.shape[-1]
    flat = w.ravel()
    lanes = np.arange(64)[:, None] * 16 + np.arange(16)[None, :]
    reg = np.zeros((64, 32), np.uint8)
    if fmt == "e2m1":
        base = n0 * 16 * kk + t * 1024
        reg[:, :16] = flat[base + lanes]
    else:
        base = n0 * 16 * kk + t * 2048
        reg[:, :16] = flat[base + lanes]
        reg[:, 16:] = flat[base + 1024 + lanes]
    return reg


def row_major_lane_bytes(data: np.ndarray, fmt: str, r0: int, t: int) -> np.ndarray:
    """The A operand registers ``uint8 [64, 32]`` a 16x16x128 kernel reads from row-major codes ``data``
    (fp8 ``[M, K]`` bytes or packed fp4 ``[M, K/2]``; rows ``r0..r0+15``, K step ``t``), as Primus-Turbo's
    ``compute_lds_offsets`` does: lane ``l`` reads row ``r0 + l % 16``; fp8 16-byte chunks ``l//16`` and
    ``l//16 + 4`` of the 128-byte K row into v[0:3], v[4:7]; fp4 chunk ``l//16`` of the 64-byte row."""
    fmt = _fmt(fmt, "row_major_lane_bytes")
    data = np.asarray(data, np.uint8)
    lane = np.arange(64)
    rows = r0 + lane % 16
    reg = np.zeros((64, 32), np.uint8)
    if fmt == "e2m1":
        cols = t * 64 + 16 * (lane // 16)[:, None] + np.arange(16)[None, :]
        reg[:, :16] = data[rows[:, None], cols]
    else:
        lo = t * 128 + 16 * (lane // 16)[:, None] + np.arange(16)[None, :]
        reg[:, :16] = data[rows[:, None], lo]
        reg[:, 16:] = data[rows[:, None], lo + 64]
    return reg


def gfx950_gemm_16x16x128(
    a_data: np.ndarray,
    a_scales: np.ndarray,
    b_weight: np.ndarray,
    b_scales: np.ndarray,
    *,
    m: int,
    n: int,
    k: int,
    fmt_a: str,
    fmt_b: str,
    scale_layout: str,
) -> np.ndarray:
    """A model of a gfx950 MX GEMM main loop reading only preshuffled buffers; returns ``float32 [m, n]``.

    ``a_data``: row-major codes (fp8 ``[m, k]`` / packed fp4 ``[m, k/2]``) read by :func:`row_major_lane_bytes`;
    ``b_weight``: ``preshuffle_weight`` of b's codes read by :func:`aiter16x16_lane_bytes`; ``a_scales``,
    ``b_scales``: ``preshuffle_scales(s, scale_layout)`` for ``"turbo16x4"`` or ``"aiter32x8"``, read per lane
    by :func:`turbo16x4_lane_scales` / :func:`aiter32x8_lane_dwords` with the layout's opsel. Requires
    ``m % 16 == n % 16 == k % 128 == 0``. Each 16x16 output tile chains ``k / 128`` instructions through C
    (fp32 between steps, as the hardware's fp32 accumulator).
    """
    op = "gfx950_gemm_16x16x128"
    if m % 16 or n % 16 or k % 128:
        raise ShapeError(f"{op}: (m, n, k) is {(m, n, k)}, expected m % 16 == n % 16 == k % 128 == 0")
    if scale_layout not in ("turbo16x4", "aiter32x8"):
        raise ShapeError(f"{op}: argument 'scale_layout' is {scale_layout!r}, expected 'turbo16x4' or 'aiter32x8'")
    cols = k // 32
    d = np.zeros((m, n), np.float32)

    def scales(p: np.ndarray, r0: int, t: int) -> tuple[np.ndarray, int]:
        if scale_layout == "turbo16x4":
            return turbo16x4_lane_scales(p, cols, r0 // 16, t), 0
        i0, i1, i3, i4 = r0 // 32, (r0 // 16) % 2, t // 2, t % 2
        return aiter32x8_lane_dwords(p, cols, i0, i3), 2 * i4 + i1

    for r0 in range(0, m, 16):
        for c0 in range(0, n, 16):
            acc = np.zeros((16, 16), np.float32)
            for t in range(k // 128):
                sa, opa = scales(a_scales, r0, t)
                sb, opb = scales(b_scales, c0, t)
                acc = mfma_scale(
                    "16x16x128",
                    row_major_lane_bytes(a_data, fmt_a, r0, t),
                    aiter16x16_lane_bytes(b_weight, fmt_b, c0 // 16, t),
                    sa,
                    sb,
                    fmt_a=fmt_a,
                    fmt_b=fmt_b,
                    opsel_a=opa,
                    opsel_b=opb,
                    c=acc,
                )
            d[r0 : r0 + 16, c0 : c0 + 16] = acc
    return d


# --- NVIDIA mma.sync m16n8k32 (8-bit) -------------------------------------------------------------------------


def mma_m16n8k32_a_map() -> tuple[np.ndarray, np.ndarray]:
    """``(row, k)`` int64 ``[32 lanes, 4 regs, 4 bytes]`` of the A fragment (16x32, row-major):
    ``row = g + 8*(r & 1)``, ``k = 4*t + q + 16*(r >> 1)`` with ``g = lane >> 2``, ``t = lane & 3``."""
    lane, r, q = np.meshgrid(np.arange(32), np.arange(4), np.arange(4), indexing="ij")
    g, t = lane >> 2, lane & 3
    return g + 8 * (r & 1), 4 * t + q + 16 * (r >> 1)


def mma_m16n8k32_b_map() -> tuple[np.ndarray, np.ndarray]:
    """``(n, k)`` int64 ``[32, 2, 4]`` of the B fragment (32x8 "col", stored as ``B^T[n][k]``):
    ``n = g``, ``k = 4*t + q + 16*r``."""
    lane, r, q = np.meshgrid(np.arange(32), np.arange(2), np.arange(4), indexing="ij")
    return lane >> 2, 4 * (lane & 3) + q + 16 * r


def mma_m16n8k32_c_map() -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` int64 ``[32, 4]`` of the f32 C/D fragment: ``row = g + 8*(r >> 1)``, ``col = 2*t + (r & 1)``."""
    lane, r = np.meshgrid(np.arange(32), np.arange(4), indexing="ij")
    return (lane >> 2) + 8 * (r >> 1), 2 * (lane & 3) + (r & 1)


def mma_m16n8k32_pack_a(codes: np.ndarray) -> np.ndarray:
    """A tile codes ``uint8 [16, 32]`` -> ``uint32 [32, 4]`` registers (lower byte = lower element index)."""
    row, k = mma_m16n8k32_a_map()
    return _le_u32(np.asarray(codes, np.uint8)[row, k].reshape(32, 16)).reshape(32, 4)


def mma_m16n8k32_pack_b(codes_t: np.ndarray) -> np.ndarray:
    """B tile as ``B^T`` codes ``uint8 [8, 32]`` -> ``uint32 [32, 2]`` registers."""
    n, k = mma_m16n8k32_b_map()
    return _le_u32(np.asarray(codes_t, np.uint8)[n, k].reshape(32, 8)).reshape(32, 2)


def mma_m16n8k32(
    a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, fmt_a: str = "e4m3", fmt_b: str = "e4m3"
) -> np.ndarray:
    """Execute ``mma.sync.aligned.m16n8k32.row.col.f32.<fmt_a>.<fmt_b>.f32`` on fragments: ``a uint32 [32, 4]``,
    ``b uint32 [32, 2]``, ``c float32 [32, 4]`` -> ``d float32 [32, 4]`` (float64 sum, one fp32 rounding)."""
    fmt_a, fmt_b = _fmt(fmt_a, "mma_m16n8k32", "fmt_a"), _fmt(fmt_b, "mma_m16n8k32", "fmt_b")
    if "e2m1" in (fmt_a, fmt_b):
        raise DtypeError("mma_m16n8k32: fp4 operands are not part of the 8-bit m16n8k32 instruction")
    ra, ka = mma_m16n8k32_a_map()
    nb, kb = mma_m16n8k32_b_map()
    A = np.zeros((16, 32), np.uint8)
    A[ra, ka] = _le_bytes(np.asarray(a, np.uint32)).reshape(32, 4, 4)
    Bt = np.zeros((8, 32), np.uint8)
    Bt[nb, kb] = _le_bytes(np.asarray(b, np.uint32)).reshape(32, 2, 4)
    d = _values(A, fmt_a) @ _values(Bt, fmt_b).T
    rc, cc = mma_m16n8k32_c_map()
    acc = np.zeros((32, 4)) if c is None else np.asarray(c, np.float64)
    return (acc + d[rc, cc]).astype(np.float32)


def mma_m16n8k32_mx(
    a_codes: np.ndarray, a_scales: np.ndarray, bt_codes: np.ndarray, b_scales: np.ndarray, *, fmt: str = "e4m3"
) -> np.ndarray:
    """An MX ``[16, K] x [8, K]^T`` tile on m16n8k32 with one promotion per k32 block (DeepGEMM style, per 32).

    For every 32-wide K block: one MMA into a zero fragment, then each lane scales its 4 partials by the A scale of
    its rows (``g``, ``g + 8``) and the B scale of its columns (``2t``, ``2t + 1``) from :func:`mma_m16n8k32_c_map`
    and adds them to an fp32 accumulator. Returns the accumulator fragment ``float32 [32, 4]``.
    """
    a_codes, bt_codes = np.asarray(a_codes, np.uint8), np.asarray(bt_codes, np.uint8)
    K = a_codes.shape[1]
    if a_codes.shape != (16, K) or bt_codes.shape != (8, K) or K % 32:
        raise ShapeError(
            f"mma_m16n8k32_mx: codes are {a_codes.shape} and {bt_codes.shape}, expected [16, K] and [8, K], K % 32 == 0"
        )
    rc, cc = mma_m16n8k32_c_map()
    acc = np.zeros((32, 4), np.float32)
    for blk in range(K // 32):
        ks = slice(32 * blk, 32 * blk + 32)
        part = mma_m16n8k32(
            mma_m16n8k32_pack_a(a_codes[:, ks]), mma_m16n8k32_pack_b(bt_codes[:, ks]), fmt_a=fmt, fmt_b=fmt
        )
        scale = _scale_value(np.asarray(a_scales)[rc, blk]) * _scale_value(np.asarray(b_scales)[cc, blk])
        acc = (acc.astype(np.float64) + part.astype(np.float64) * scale).astype(np.float32)
    return acc


# --- NVIDIA wgmma m64nNk32 (8-bit) ----------------------------------------------------------------------------


def wgmma_a_map() -> tuple[np.ndarray, np.ndarray]:
    """``(row, k)`` int64 ``[128 threads, 4 regs, 4 bytes]`` of A from registers (64x32, 8-bit):
    warp ``w``, ``g``, ``t`` of the thread; value ``v = v0 + 4*v1 + 8*v2`` in register ``v1 + 2*v2``, byte ``v0``:
    ``row = 16*w + g + 8*v1``, ``k = 4*t + v0 + 16*v2`` (cute ALayout_64x32)."""
    thr, reg, v0 = np.meshgrid(np.arange(128), np.arange(4), np.arange(4), indexing="ij")
    w, lane = thr // 32, thr % 32
    g, t = lane >> 2, lane & 3
    v1, v2 = reg & 1, reg >> 1
    return 16 * w + g + 8 * v1, 4 * t + v0 + 16 * v2


def wgmma_acc_map(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` int64 ``[128, n/2]`` of the f32 accumulator: value ``v = v0 + 2*v1 + 4*v2`` of a thread is
    ``D[16*w + g + 8*v1][8*v2 + 2*t + v0]`` (cute CLayout_64xN)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 8 or n > 256 or n % 8:
        raise ShapeError(f"wgmma_acc_map: argument 'n' is {n!r}, expected a multiple of 8 in [8, 256]")
    thr, v = np.meshgrid(np.arange(128), np.arange(n // 2), indexing="ij")
    w, lane = thr // 32, thr % 32
    g, t = lane >> 2, lane & 3
    v0, v1, v2 = v & 1, (v >> 1) & 1, v >> 2
    return 16 * w + g + 8 * v1, 8 * v2 + 2 * t + v0


def wgmma_pack_a(codes: np.ndarray) -> np.ndarray:
    """A tile codes ``uint8 [64, 32]`` -> per-thread registers ``uint32 [128, 4]``."""
    row, k = wgmma_a_map()
    return _le_u32(np.asarray(codes, np.uint8)[row, k].reshape(128, 16)).reshape(128, 4)


def wgmma_m64nNk32(
    a: np.ndarray, b_codes: np.ndarray, acc: np.ndarray | None = None, *, fmt_a: str = "e4m3", fmt_b: str = "e4m3"
) -> np.ndarray:
    """Execute ``wgmma.mma_async m64nNk32.f32.<fmt_a>.<fmt_b>`` with A from registers ``uint32 [128, 4]`` and
    B from shared memory as K-major codes ``uint8 [N, 32]``; ``acc``/result ``float32 [128, N/2]``."""
    b_codes = np.asarray(b_codes, np.uint8)
    n = b_codes.shape[0]
    if b_codes.shape != (n, 32):
        raise ShapeError(f"wgmma_m64nNk32: argument 'b_codes' has shape {b_codes.shape}, expected [N, 32]")
    rc, cc = wgmma_acc_map(n)
    ra, ka = wgmma_a_map()
    A = np.zeros((64, 32), np.uint8)
    A[ra, ka] = _le_bytes(np.asarray(a, np.uint32)).reshape(128, 4, 4)
    d = _values(A, _fmt(fmt_a, "wgmma_m64nNk32")) @ _values(b_codes, _fmt(fmt_b, "wgmma_m64nNk32")).T
    base = np.zeros((128, n // 2)) if acc is None else np.asarray(acc, np.float64)
    return (base + d[rc, cc]).astype(np.float32)
