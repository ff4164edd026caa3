// gemm_decode_gfx950.h: the gfx950 mainloop of the AMD decode kernels gemm_mx_decode_gfx950.hip (dense) and
// gemm_mx_decode_gfx950_moe.hip (MoE): a wave's K steps of a CTA's 64 weight rows against its MT token tiles,
// with the token rows given per lane (DecRowsDense: the tokens themselves; DecRowsMoe: the MoE kernel's gathered
// rows).
// Work split, tails, epilogues: gemm_decode_amd.h.
//
// Operand registers (MX_REFERENCE.md 6.1): an 8-bit lane (row l%16, group g = l/16) holds K [16g, +16) in v[0:3]
// and [64+16g, +16) in v[4:7]; e2m1 x e2m1 runs natively (K [32g, +32) in v[0:3]); a lone e2m1 operand is widened
// to e4m3 in registers (the fp8 x fp4 K pairing is UNVERIFIED, as in gemm_gfx950_tile.h). The scale of row i and
// block kb is byte opsel (the tile's parity) of the scale VGPR of lane i + 16*kb.
#pragma once
#define DEC_KSTEP 128u  // 4 MX blocks: one MFMA per tile pair
#include "gemm_gfx950_tile.h"
#include "gemm_decode_amd.h"

#define D950_K8 0     // 8-bit codes
#define D950_FP4 1    // native e2m1 (both operands e2m1)
#define D950_WIDEN 2  // e2m1 widened to e4m3 in registers, then the 8-bit map
#define D950_KIND(F) ((F) == MXRT_FMT_E2M1 ? (G950_NATIVE_FP4 ? D950_FP4 : D950_WIDEN) : D950_K8)

// One lane's raw operand bytes of a 16-row tile and a K step, as loaded (the next step's are in flight).
struct D950Raw {
  mxrt_u32x4 lo, hi;
};

template <int KIND, int WL>
MXRT_DEVICE void d950_load(const MxrtOperand& op, mxrt_rsrc rs, u32 row, u32 ks, u32 k_end, D950Raw& f) {
  const u32 g = mxrt_lane() / 16u;
  if (KIND == D950_K8) {  // 16 codes per half
    f.lo = mxrt_buf_load16(rs, dec_off<WL>(op, row, ks + 16u * g, k_end, 16));
    f.hi = mxrt_buf_load16(rs, dec_off<WL>(op, row, ks + 64u + 16u * g, k_end, 16));
  } else if (KIND == D950_FP4) {  // 32 e2m1 codes
    f.lo = mxrt_buf_load16(rs, dec_off<WL>(op, row, ks + 32u * g, k_end, 32));
    f.hi = mxrt_u32x4{0u, 0u, 0u, 0u};
  } else {  // 16 e2m1 codes (8 bytes) per half
    const u64 lo = mxrt_buf_load_b64(rs, dec_off<WL>(op, row, ks + 16u * g, k_end, 16));
    const u64 hi = mxrt_buf_load_b64(rs, dec_off<WL>(op, row, ks + 64u + 16u * g, k_end, 16));
    f.lo = mxrt_u32x4{(u32)lo, (u32)(lo >> 32), 0u, 0u};
    f.hi = mxrt_u32x4{(u32)hi, (u32)(hi >> 32), 0u, 0u};
  }
}

template <int KIND>
MXRT_DEVICE mxrt_v8i d950_operand(const D950Raw& f) {
  u32 w[8];
  if (KIND == D950_WIDEN) {
    mxrt_e2m1x8_to_e4m3(f.lo.x, w[0], w[1]);
    mxrt_e2m1x8_to_e4m3(f.lo.y, w[2], w[3]);
    mxrt_e2m1x8_to_e4m3(f.hi.x, w[4], w[5]);
    mxrt_e2m1x8_to_e4m3(f.hi.y, w[6], w[7]);
  } else {
    w[0] = f.lo.x, w[1] = f.lo.y, w[2] = f.lo.z, w[3] = f.lo.w;
    w[4] = f.hi.x, w[5] = f.hi.y, w[6] = f.hi.z, w[7] = f.hi.w;
  }
  mxrt_v8i v;
#pragma unroll
  for (u32 q = 0; q < 8u; ++q) v[q] = (int)w[q];
  return v;
}

// One wave step's operands: MT token tiles and 4 weight tiles (raw bytes and scale VGPRs).
struct D950Step {
  D950Raw x[MT], w[4];
  u32 sx[MT], sw[4], okx[MT], okw[4];  // raw scale bytes and their dec_scale_load flags
};

template <int XK, int WK, int WL, class Rows>
MXRT_DEVICE void d950_load_step(const MxrtOperand& ox, const MxrtOperand& ow, mxrt_rsrc rsx, mxrt_rsrc rsw,
                                const DecTile& t, const Rows& xr, u32 s, D950Step& st) {
  const u32 lane = mxrt_lane(), li = lane % 16u, ks = t.k0 + s * DEC_KSTEP, kb = t.kb0 + 4u * s + lane / 16u;
#pragma unroll
  for (u32 j = 0; j < MT; ++j) {
    d950_load<XK, DEC_WL_ROW>(ox, rsx, xr.x(j), ks, t.k1, st.x[j]);
    st.sx[j] = dec_scale_load(ox, xr.x(j), kb, t.kb1, st.okx[j]);
  }
#pragma unroll
  for (u32 i = 0; i < 4u; ++i) {
    d950_load<WK, WL>(ow, rsw, t.n0 + 16u * i + li, ks, t.k1, st.w[i]);
    st.sw[i] = dec_scale_load(ow, t.n0 + 16u * i + li, kb, t.kb1, st.okw[i]);
  }
}

// The wave's sums over its steps: acc[j][i] (zeroed here), token tile j (rows xr.x(j)) x weight tile i; weight
// codes in layout WL (DEC_WL_*, gemm_decode_amd.h), token codes row-major.
template <int XK, int WK, int WL, class Rows>
MXRT_DEVICE void d950_mainloop(const MxrtOperand& ox, const MxrtOperand& ow, const DecTile& t, const Rows& xr,
                               mxrt_v4f (&acc)[MT][4]) {
  const u32 wave = MXRT_TID_X / 64u;
#pragma unroll
  for (u32 j = 0; j < MT; ++j)
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) acc[j][i] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};
  const mxrt_rsrc rsx = dec_rsrc<DEC_WL_ROW>(ox);
  const mxrt_rsrc rsw = dec_rsrc<WL>(ow);
  D950Step nxt;
  // past the range: zero codes, scales 127 (unused)
  d950_load_step<XK, WK, WL, Rows>(ox, ow, rsx, rsw, t, xr, wave, nxt);
  for (u32 s = wave; s < t.steps; s += DEC_WAVES) {
    const D950Step cur = nxt;
    if (s + DEC_WAVES < t.steps) d950_load_step<XK, WK, WL, Rows>(ox, ow, rsx, rsw, t, xr, s + DEC_WAVES, nxt);
    mxrt_sched_fence();  // the next step's loads ahead of this step's MFMAs
    // scale VGPRs: tile t's byte in byte (t & 1), the opsel its MFMAs use
    mxrt_v8i fx[MT];
    u32 sx[MT], sw[4];
#pragma unroll
    for (u32 j = 0; j < MT; ++j) {
      fx[j] = d950_operand<XK>(cur.x[j]);
      sx[j] = dec_scale_fix(cur.sx[j], cur.okx[j]) << (8u * (j & 1u));
    }
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) sw[i] = dec_scale_fix(cur.sw[i], cur.okw[i]) << (8u * (i & 1u));
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
      const mxrt_v8i fw = d950_operand<WK>(cur.w[i]);
#pragma unroll
      for (u32 j = 0; j < MT; ++j) {
        if (j % 2u == 0u && i % 2u == 0u) acc[j][i] = g950_mfma<0, 0>(fx[j], fw, acc[j][i], sx[j], sw[i]);
        if (j % 2u == 0u && i % 2u == 1u) acc[j][i] = g950_mfma<0, 1>(fx[j], fw, acc[j][i], sx[j], sw[i]);
        if (j % 2u == 1u && i % 2u == 0u) acc[j][i] = g950_mfma<1, 0>(fx[j], fw, acc[j][i], sx[j], sw[i]);
        if (j % 2u == 1u && i % 2u == 1u) acc[j][i] = g950_mfma<1, 1>(fx[j], fw, acc[j][i], sx[j], sw[i]);
      }
      mxrt_sched_fence();  // one weight tile's conversion at a time (hoisting all of them took ~400 VGPRs)
    }
  }
}

