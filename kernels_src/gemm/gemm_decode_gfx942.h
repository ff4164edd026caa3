// gemm_decode_gfx942.h: the gfx942 mainloop of the AMD decode kernels gemm_mx_decode_gfx942.hip (dense) and
// gemm_mx_decode_gfx942_moe.hip (MoE): a wave's K steps of a CTA's 64 weight rows against its MT token tiles,
// with the token rows given per lane (DecRowsDense: the tokens themselves; DecRowsMoe: the MoE kernel's gathered
// rows).
// Work split, tails, epilogues: gemm_decode_amd.h.
//
// FNUZ as in gemm_gfx942_tile.h: OCP fp8 codes keep their bits (value / 2; -0 -> 0, NaN/Inf -> 0x80), e2m1 is
// widened to the e4m3 byte of the same value; every product is a quarter of the true one, x4 once at the end.
// Operand registers (ck_tile 16x16x32 f8): lane l holds row l%16, K [8*(l/16), +8) of the block in 64 bits. The
// scale bytes: lane l loads the blocks of a step for token l and for weight row n0 + l (one dword each); the
// factors of its outputs (tokens 4*(l/16) + r, weight row l%16 of a tile) come by ds_bpermute.
// MX blocks per wave step: 4 (128 K); 2 at MT = 4, where two register stages of 4 blocks spilled
#pragma once
#define D942_KB (MT == 4 ? 2u : 4u)
#define DEC_KSTEP (32u * D942_KB)
#include "gemm_gfx942_tile.h"
#include "gemm_decode_amd.h"

// One lane's 8 codes of block b of a 16-row tile: 8 fp8 bytes, or 8 e2m1 codes in the low 4 bytes.
template <int FMT, int WL>
MXRT_DEVICE u64 d942_load(const MxrtOperand& op, mxrt_rsrc rs, u32 row, u32 kel, u32 k_end) {
  if (FMT == MXRT_FMT_E2M1) return mxrt_buf_load_b32(rs, dec_off<WL>(op, row, kel, k_end, 8));
  return mxrt_buf_load_b64(rs, dec_off<WL>(op, row, kel, k_end, 8));
}

// Raw codes -> the FNUZ operand (G942_CONV: widen e2m1, or OCP -> FNUZ bits).
template <int FMT>
MXRT_DEVICE u64 d942_operand(u64 v) {
  u32 lo, hi;
  if (G942_CONV(FMT) == MXRT_CONV_WIDEN) {
    mxrt_e2m1x8_to_e4m3((u32)v, lo, hi);
  } else {
    const bool e5 = G942_CONV(FMT) == MXRT_CONV_FNUZ_E5M2;
    lo = mxrt_fnuz_from_ocp((u32)v, e5);
    hi = mxrt_fnuz_from_ocp((u32)(v >> 32), e5);
  }
  return (u64)lo | ((u64)hi << 32);
}

// acc + P * 2^(sx + sw - 254) with one rounding where the factor is a normal fp32 (mxrt_scale_steps' split
// otherwise), NaN when either byte is 0xFF. Integer min/max only (no comparison masks).
MXRT_DEVICE float d942_promote(float acc, float p, u32 sx, u32 sw) {
  const i32 e = (i32)(sx + sw) - 254;
  const i32 e1 = min(max(e, -126), 127);
  const i32 e2 = max(e - e1, -126);
  const u32 nan = (((sx + 1u) | (sw + 1u)) >> 8) & 1u;
  const float f2 = mxrt_f32_from_bits(((u32)(e2 + 127) << 23) | ((0u - nan) & 0x7FC00000u));
  return mxrt_fma(p * mxrt_pow2(e1), f2, acc);
}

// 1 when a byte of the word lies outside [64, 190] (then 2^(sx + sw - 254) may leave the normal range).
MXRT_DEVICE u32 d942_wide(u32 w) {
  u32 bad = 0u;
#pragma unroll
  for (u32 b = 0; b < D942_KB; ++b) {
    const i32 t = (i32)((w >> (8u * b)) & 0xFFu) - 64;
    bad |= ((u32)t | (u32)(126 - t)) >> 31;
  }
  return bad;
}

struct D942Step {
  u64 x[MT][D942_KB], w[4][D942_KB];  // [tile][block]
  // raw scale bytes of block b of the step and their dec_scale_load flags: token l / weight row n0 + l
  u32 sx[D942_KB], sw[D942_KB], okx[D942_KB], okw[D942_KB];

  // the step's scale bytes of this lane's token / weight row as one dword each (byte b = block b)
  MXRT_DEVICE void scale_words(u32& x, u32& w) const {
    x = 0u;
    w = 0u;
#pragma unroll
    for (u32 b = 0; b < D942_KB; ++b) {
      x |= dec_scale_fix(sx[b], okx[b]) << (8u * b);
      w |= dec_scale_fix(sw[b], okw[b]) << (8u * b);
    }
  }
};

template <int WL, class Rows>
MXRT_DEVICE void d942_load_step(const MxrtOperand& ox, const MxrtOperand& ow, mxrt_rsrc rsx, mxrt_rsrc rsw,
                                const DecTile& t, const Rows& xr, u32 s, D942Step& st) {
  const u32 lane = mxrt_lane(), li = lane % 16u, ks = t.k0 + s * DEC_KSTEP + 8u * (lane / 16u);
  const u32 kb = t.kb0 + D942_KB * s;
#pragma unroll
  for (u32 b = 0; b < D942_KB; ++b) {
#pragma unroll
    for (u32 j = 0; j < MT; ++j) st.x[j][b] = d942_load<A_FMT, DEC_WL_ROW>(ox, rsx, xr.x(j), ks + 32u * b, t.k1);
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) st.w[i][b] = d942_load<B_FMT, WL>(ow, rsw, t.n0 + 16u * i + li, ks + 32u * b, t.k1);
  }
#pragma unroll
  for (u32 b = 0; b < D942_KB; ++b) {
    st.sx[b] = dec_scale_load(ox, xr.xs(), kb + b, t.kb1, st.okx[b]);
    st.sw[b] = dec_scale_load(ow, t.n0 + lane, kb + b, t.kb1, st.okw[b]);
  }
}

// The wave's sums over its steps (zeroed here); weight codes in layout WL (DEC_WL_*, gemm_decode_amd.h), tokens
// row-major.
template <int WL, class Rows>
MXRT_DEVICE void d942_mainloop(const MxrtOperand& ox, const MxrtOperand& ow, const DecTile& t, const Rows& xr,
                               mxrt_v4f (&acc)[MT][4]) {
  const u32 wave = MXRT_TID_X / 64u, lane = mxrt_lane(), li = lane % 16u, q = lane / 16u;
#pragma unroll
  for (u32 j = 0; j < MT; ++j)
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) acc[j][i] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};
  const mxrt_rsrc rsx = dec_rsrc<DEC_WL_ROW>(ox);
  const mxrt_rsrc rsw = dec_rsrc<WL>(ow);
  D942Step nxt;
  d942_load_step<WL>(ox, ow, rsx, rsw, t, xr, wave, nxt);  // past the range: zero codes, scales 127 (unused)
  for (u32 s = wave; s < t.steps; s += DEC_WAVES) {
    const D942Step cur = nxt;
    if (s + DEC_WAVES < t.steps) d942_load_step<WL>(ox, ow, rsx, rsw, t, xr, s + DEC_WAVES, nxt);
    mxrt_sched_fence();  // the next step's loads ahead of this step's MFMAs
    // scale dwords of this lane's outputs: weight row 16i + l%16, tokens 16j + 4*(l/16) + r
    u32 sw[4], sx[MT][4], xword, wword;
    cur.scale_words(xword, wword);
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) sw[i] = mxrt_wave_bpermute(16u * i + li, wword);
#pragma unroll
    for (u32 j = 0; j < MT; ++j)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) sx[j][r] = mxrt_wave_bpermute(16u * j + 4u * q + r, xword);
    // Fast steps (every scale byte this lane uses in [64, 190]): acc = fma(P, 2^(sx + sw - 254), acc), one normal
    // factor built from the exponent bits; other lanes take d942_promote. The branch holds VALU only (every MFMA
    // of the block is issued before it), so a divergent wave stays correct.
    u32 wide = 0u;
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) wide |= d942_wide(sw[i]);
#pragma unroll
    for (u32 j = 0; j < MT; ++j)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) wide |= d942_wide(sx[j][r]);
#pragma unroll
    for (u32 b = 0; b < D942_KB; ++b) {
      u64 fw[4];
#pragma unroll
      for (u32 i = 0; i < 4u; ++i) fw[i] = d942_operand<B_FMT>(cur.w[i][b]);
      mxrt_v4f p[MT][4];
#pragma unroll
      for (u32 j = 0; j < MT; ++j) {
        const u64 fx = d942_operand<A_FMT>(cur.x[j][b]);
#pragma unroll
        for (u32 i = 0; i < 4u; ++i) p[j][i] = g942_mfma(fx, fw[i]);
      }
      if (wide == 0u) {
#pragma unroll
        for (u32 j = 0; j < MT; ++j)
#pragma unroll
          for (u32 i = 0; i < 4u; ++i)
#pragma unroll
            for (u32 r = 0; r < 4u; ++r) {
              const u32 e = ((sx[j][r] >> (8u * b)) & 0xFFu) + ((sw[i] >> (8u * b)) & 0xFFu);
              acc[j][i][r] = mxrt_fma(p[j][i][r], mxrt_f32_from_bits((e - 127u) << 23), acc[j][i][r]);
            }
      } else {
#pragma unroll
        for (u32 j = 0; j < MT; ++j)
#pragma unroll
          for (u32 i = 0; i < 4u; ++i)
#pragma unroll
            for (u32 r = 0; r < 4u; ++r)
              acc[j][i][r] = d942_promote(acc[j][i][r], p[j][i][r], (sx[j][r] >> (8u * b)) & 0xFFu,
                                          (sw[i] >> (8u * b)) & 0xFFu);
      }
      mxrt_sched_fence();  // one block at a time: issuing every MFMA of the step first held all their results
    }
  }
  // FNUZ codes hold half the OCP value: every product is a quarter of the true one
#pragma unroll
  for (u32 j = 0; j < MT; ++j)
#pragma unroll
    for (u32 i = 0; i < 4u; ++i)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) acc[j][i][r] *= 4.0f;
}

