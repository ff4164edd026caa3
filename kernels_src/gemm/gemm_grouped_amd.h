// gemm_grouped_amd.h: the body of the grouped AMD MFMA GEMM kernels (gemm_mx_grouped_gfx950.hip,
// gemm_mx_grouped_gfx942.hip). The group schedule is the generic grouped kernel's (gemm_grouped_tiles.h: lengths
// read on the device only, prefix sums in shared memory), the 128 x 128 tile is the dense kernel's main loop of
// the arch (gemm_gfx950_tile.h / gemm_gfx942_tile.h, through MXRT_GROUPED_MAINLOOP), the store is masked to the
// group's rows.
//
// MODE 0 lens (forward / dgrad): a [m, k] rows grouped by lens [G] (clamped to [0, m], cut at m); b [G, n, kb]
//          (kb >= k, elements past k unread); tile y = blockIdx.y over the groups' 128-row tiles, then tail tiles
//          that store zeros to rows [S, m) past the last group; tiles past those exit. A group's operand is its
//          own row range (base pointers offset to the group, buffer resources sized to its rows), so a tile never
//          reads a row of another group and never writes one. out [m, n].
// MODE 3 wgrad (variable K): a [m, k] and b [n, k] blocked along k (the padded M columns of
//          quantize_mx_grouped(colwise=True)); group g = blockIdx.z reduces over columns [P[g], P[g+1]), P the
//          prefix of ceil(clamp(lens, 0, k) / align) * align cut at k (align = `extra`, a multiple of 32);
//          out [G, m, n] = the sum (ACCUM: out + the sum in fp32, rounded once to OUT_DTYPE).
// Scales: row-major E8M0 [rows, ceil(k/32)] (b's per group [n, ceil(kb/32)]); out_dtype OUT_DTYPE (MXRT_OUT_*).
// No #pragma once: the body depends on the A_FMT / B_FMT of the build, and tests/support/simt_amd_host.cpp
// includes it once per format pair (each in its own namespace).
#include "gemm_grouped_tiles.h"

#if !defined(MODE) || !defined(OUT_DTYPE) || !defined(ACCUM)
#error "MODE, OUT_DTYPE and ACCUM must be defined by the launcher"
#endif
#ifndef MXRT_GROUPED_MAINLOOP
#error "the including kernel defines MXRT_GROUPED_MAINLOOP(oa, ob, t, lds, acc)"
#endif
MXRT_STATIC_ASSERT(MODE == 0 || MODE == 3, "MODE: 0 lens, 3 wgrad (the generic kernel serves the others)");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(ACCUM == 0 || MODE == 3, "ACCUM: the wgrad only");

MXRT_DEVICE u32 mxrt_grouped_row_bytes(bool fp4, u32 k) { return fp4 ? (k + 1u) / 2u : k; }

// Shared memory of the schedule: block-scan partials, group starts and tile prefix (G + 2 entries each).
struct MxrtGroupedLds {
  i64* part;
  i32* starts;
  i32* tiles;
};

// The wave's 64 x 64 results (C/D map of amd_gemm.h's epilogue) to rows [row0 + wr0, +64) of out + base, masked to
// the first `rows` rows of the group and the n columns.
MXRT_DEVICE void mxrt_grouped_store(void* out, u64 base, u32 row0, u32 rows, u32 n, u32 wr0, u32 wc0,
                                    mxrt_v4f (&acc)[4][4]) {
  const u32 lane = mxrt_lane();
  const u32 rq = 4u * (lane / 16u), cl = lane % 16u;
#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) {
        const u32 row = wr0 + 16u * i + rq + r, col = wc0 + 16u * j + cl;
        if (row >= rows || col >= n) continue;
        const u64 idx = base + (u64)(row0 + row) * n + col;
        float v = acc[i][j][r];
#if OUT_DTYPE == MXRT_OUT_F32
        if (ACCUM) v += ((float*)out)[idx];
        ((float*)out)[idx] = v;
#else
        if (ACCUM) v += mxrt_16_bits_to_f32<OUT_DTYPE>(((u16*)out)[idx]);
        ((u16*)out)[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v);
#endif
      }
}

MXRT_DEVICE void mxrt_grouped_amd(const u8* a, const u8* sa, const u8* b, const u8* sb, void* out, const void* groups,
                                  u32 m, u32 n, u32 k, u32 kb, u32 num_groups, u32 extra, u32 flags, u32 lens_i64,
                                  const MxrtGroupedLds& sh, u8* lds) {
  constexpr bool A4 = A_FMT == MXRT_FMT_E2M1, B4 = B_FMT == MXRT_FMT_E2M1;
  const u32 wave = MXRT_TID_X / 64u, wm = wave / 2u, wn = wave % 2u;
  const u32 G = num_groups, n0 = MXRT_BID_X * MXRT_GEMM_BN;
  const u32 a_rb = mxrt_grouped_row_bytes(A4, k), a_kbt = (k + 31u) / 32u;
  const bool vec_a = (flags & MXRT_GEMM_FLAG_VEC_A) != 0, vec_b = (flags & MXRT_GEMM_FLAG_VEC_B) != 0;
  mxrt_v4f acc[4][4];
  MxrtGemmTile t = {};
#if MODE == 0
  const u32 b_rb = mxrt_grouped_row_bytes(B4, kb), b_kbt = (kb + 31u) / 32u;
  gg_lens_tiles(groups, lens_i64, G, m, MXRT_GEMM_BM, sh.starts, sh.tiles, sh.part);
  const i32 tile = (i32)MXRT_BID_Y;
  if (tile >= sh.tiles[G + 1]) return;  // past the real tiles (uniform over the block)
  const i32 grp = gg_find(sh.tiles, (i32)G + 1, tile);
  const u32 row0 = (u32)sh.starts[grp], rows = (u32)(sh.starts[grp + 1] - sh.starts[grp]);
  const u32 m0 = (u32)(tile - sh.tiles[grp]) * MXRT_GEMM_BM;
  const u64 base = 0;
  if (grp < (i32)G) {  // uniform over the block; the tail tiles store zeros
    const MxrtOperand oa = {a + (u64)row0 * a_rb, sa + (u64)row0 * a_kbt, rows, a_rb, a_kbt, m0, vec_a, A4,
                            mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, a_kbt)};
    const MxrtOperand ob = {b + (u64)grp * n * b_rb, sb + (u64)grp * n * b_kbt, n, b_rb, b_kbt, n0, vec_b, B4,
                            mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, b_kbt)};
    t.k1 = k;
    t.kb1 = a_kbt;
    MXRT_GROUPED_MAINLOOP(oa, ob, t, lds, acc);
  } else {
#pragma unroll
    for (u32 i = 0; i < 4u; ++i)
#pragma unroll
      for (u32 j = 0; j < 4u; ++j) acc[i][j] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};
  }
#else
  // wgrad: every group's operands are the whole a / b; the group is its column (K) range
  (void)kb;
  const u32 g = MXRT_GEMM_BID_Z, m0 = MXRT_BID_Y * MXRT_GEMM_BM;
  gg_offsets(groups, lens_i64, G, (i64)k, (i64)extra, (i64)k, sh.starts, sh.part);
  t.k0 = (u32)sh.starts[g];
  t.k1 = (u32)sh.starts[g + 1];
  t.kb0 = t.k0 / 32u;
  t.kb1 = (t.k1 + 31u) / 32u;
  const u32 b_rb = a_rb;
  const MxrtOperand oa = {a, sa, m, a_rb, a_kbt, m0, vec_a, A4, mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, a_kbt)};
  const MxrtOperand ob = {b, sb, n, b_rb, a_kbt, n0, vec_b, B4, mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, a_kbt)};
  MXRT_GROUPED_MAINLOOP(oa, ob, t, lds, acc);
  const u64 base = (u64)g * m * n;
  const u32 row0 = 0, rows = m;
#endif
  mxrt_grouped_store(out, base, row0, rows, n, m0 + 64u * wm, n0 + 64u * wn, acc);
}
