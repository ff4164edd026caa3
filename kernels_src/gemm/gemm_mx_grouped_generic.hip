// kernel   gemm_mx_grouped_generic                                                    (extern "C")
// computes grouped MX GEMMs out[rows of group g] = a_g @ b_g.T (MODE 0 lens, 1 indices, 2 masked) or the wgrads
//          out[g] (+)= a_g @ b_g.T (MODE 3 mxrt's colwise layout, 4 DeepGEMM's k-grouped), on the dense generic
//          kernel's main loop (gemm_generic_tile.h); groups read on the device only (details below)
// args     const u8* a | const u8* sa [m, ceil(k/32)] | const u8* b | const u8* sb [G*n or n, ceil(kb/32)] |
//          void* out | const void* groups (int32, or int64 when lens_i64) | u32 m, n, k, kb, num_groups, extra
//          (mode 2: max_m, 3: align) | u32 flags (MXRT_GEMM_FLAG_VEC_A/_B) | u32 lens_i64 | const u32* gate (null,
//          or a word: the grid returns at once while it is 0; the exact fallback of the torch route)
// grid     mode 0: (ceil(n/64), ceil(m/128)+G+1, 1); 1: (ceil(n/64), ceil(m/128), 1); 2: (ceil(n/64),
//          ceil(max_m/128), G); 3, 4: (ceil(n/64), ceil(m/128), G)   block (THREADS,1,1)   smem <= 35.6 KB static
// defines  THREADS (256), MODE, FMT_A, FMT_B, OUT_DTYPE, ACCUM (modes 3, 4), SCALE_F32 + SF_GMN_B (modes 1, 2, 4)
//                                                                  set by mxrt/ops/grouped_gemm.py
// requires G <= MXRT_MAX_GROUPS (modes 0, 3); grid y, z <= 65535; m, k < 2^31; scale offsets < 2^32
//                                                                  checked by mxrt/ops/grouped_gemm.py
//
// MODE (mxrt/problems/grouped_gemm.py kinds; b of modes 0-2 is [G, n, kb], kb >= k, elements past k unread):
//          0 lens:    a [m, k] rows grouped by lens [G]; tile y = blockIdx.y over the groups' row tiles (prefix sums
//                     in-kernel: lens clamped to [0, m], groups cut at m), then tail tiles that zero rows [S, m)
//                     past the last group; tiles past that exit. out [m, n].
//          1 indices: a [m, k], ids [m] (int32): tile y covers rows [128y, +128); for each group id present in the
//                     tile (ascending), the tile's product with b_g is stored to the rows whose id is g; ids < 0 or
//                     >= G are skipped (out rows untouched). out [m, n].
//          2 masked:  a [G*max_m, k], group g = blockIdx.z owns rows [g*max_m, +clamp(masked[g], 0, max_m));
//                     tiles past them exit; other rows untouched. out [G*max_m, n].
//          3 wgrad:   a [m, k] and b [n, k] (both blocked along k = padded M columns), group g = blockIdx.z reduces
//                     over columns [P[g], P[g+1]) with P the prefix of ceil(clamp(lens, 0, k)/align)*align cut at
//                     k; out [G, m, n] = the sum (ACCUM: out + the sum in fp32, rounded once to OUT_DTYPE).
//          4 k-grouped (DeepGEMM k_grouped_fp8_gemm_nt_contiguous): ks [G] on the device, k = sum(ks); group g's
//                     a_g [m, ks[g]] / b_g [n, ks[g]] K-major at flat offsets P[g]*m / P[g]*n; out [G, m, n] fp32.
#include "gemm_generic_tile.h"
#include "gemm_grouped_tiles.h"

#if !defined(MODE) || !defined(OUT_DTYPE) || !defined(ACCUM) || !defined(SCALE_F32) || !defined(SF_GMN_B)
#error "MODE, OUT_DTYPE, ACCUM, SCALE_F32 and SF_GMN_B must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(MODE >= 0 && MODE <= 4, "MODE: 0 lens, 1 indices, 2 masked, 3 wgrad, 4 DeepGEMM k-grouped");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(ACCUM == 0 || MODE >= 3, "ACCUM: the wgrads only");
MXRT_STATIC_ASSERT(!SCALE_F32 || MODE == 1 || MODE == 2 || MODE == 4, "SCALE_F32: the DeepGEMM modes only");
MXRT_STATIC_ASSERT(MODE != 4 || (FMT_A != MXRT_FMT_E2M1 && FMT_B != MXRT_FMT_E2M1), "MODE 4: fp8 codes");

// scale storage: E8M0 bytes per 32 elements of K, or (SCALE_F32) float32 per 128; B's rows per SF_GMN_B
#define SF_K (SCALE_F32 ? 128u : 32u)
#define SF_BYTES (SCALE_F32 ? 4u : 1u)

// AMD: the dense kernel's register budget (gemm_mx_generic.hip): exactly THREADS threads, one wave per SIMD.
#if defined(MXRT_HIP)
#pragma clang attribute push(__attribute__((amdgpu_flat_work_group_size(THREADS, THREADS), amdgpu_waves_per_eu(1, 1))), \
                             apply_to = function)
#endif
extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mx_grouped_generic(const u8* __restrict__ a, const u8* __restrict__ sa, const u8* __restrict__ b,
                            const u8* __restrict__ sb, void* __restrict__ out, const void* __restrict__ groups, u32 m,
                            u32 n, u32 k, u32 kb, u32 num_groups, u32 extra, u32 flags, u32 lens_i64,
                            const u32* __restrict__ gate) {
  if (gate != nullptr && *gate == 0u) return;  // the whole grid, before any barrier
  __shared__ i64 part[THREADS];
  const u32 tid = MXRT_TID_X, tx = tid % 16u, ty = tid / 16u;
  const u32 n0 = MXRT_BID_X * BN;
  const u32 a_kbt = (k + SF_K - 1) / SF_K, b_kbt = (kb + SF_K - 1) / SF_K, k_steps = (k + BK - 1) / BK;
  const u32 b_sf_rows = (n + SF_GMN_B - 1) / SF_GMN_B;  // scale rows of one group of b
  const u64 a_row_bytes = gg_row_bytes(FMT_A == MXRT_FMT_E2M1 ? 4u : 8u, k);
  const u64 b_row_bytes = gg_row_bytes(FMT_B == MXRT_FMT_E2M1 ? 4u : 8u, kb);
  GemmTile t{a, sa, b, sb, m, n, k, a_kbt, b_kbt, a_row_bytes, b_row_bytes, MXRT_SCALE_LAYOUT_NONE,
             MXRT_SCALE_LAYOUT_NONE, 0u, 0u, flags, 0u, n0, 0u, k_steps};
  float acc[8][4];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  (void)part;

#if MODE == 3
  // ---- wgrad: group z reduces over its padded column range ------------------------------------------------------
  __shared__ i32 starts[MXRT_MAX_GROUPS + 1];
  const u32 G = num_groups, g = MXRT_BID_Z;
  gg_offsets(groups, lens_i64, G, (i64)k, (i64)extra, (i64)k, starts, part);
  const u32 c0 = (u32)starts[g], c1 = (u32)starts[g + 1];
  t.m0 = MXRT_BID_Y * BM;
  t.kb0 = c0 / BK;
  t.kb1 = (c1 + BK - 1) / BK;
  gemm_generic_mainloop(t, acc);
  const u64 base = (u64)g * m * n;
  const u32 row0 = 0, rows = m, m0 = t.m0;
#elif MODE == 4
  // ---- DeepGEMM k-grouped: group z's a_g [m, K_g] and b_g [n, K_g] are K-major blocks at offsets P[g] * m and
  // P[g] * n of the flat a / b (P = prefix of ks, cut at k = sum(ks)); scales [m | n, k / SF_K] from column
  // P[g] / SF_K
  __shared__ i32 starts[MXRT_MAX_GROUPS + 1];
  const u32 G = num_groups, g = MXRT_BID_Z;
  gg_offsets(groups, lens_i64, G, (i64)k, 1, (i64)k, starts, part);
  const u32 k0 = (u32)starts[g], kg = (u32)(starts[g + 1] - starts[g]);
  t.a = a + (u64)k0 * m;
  t.b = b + (u64)k0 * n;
  t.sa = sa + (u64)(k0 / SF_K) * SF_BYTES;
  t.sb = sb + (u64)(k0 / SF_K) * SF_BYTES;
  t.k = kg;
  t.a_row_bytes = kg;
  t.b_row_bytes = kg;
  t.m0 = MXRT_BID_Y * BM;
  t.kb1 = (kg + BK - 1) / BK;
  gemm_generic_mainloop(t, acc);
  const u64 base = (u64)g * m * n;
  const u32 row0 = 0, rows = m, m0 = t.m0;
#elif MODE == 1
  // ---- indices: every group present in the tile, ascending ------------------------------------------------------
  __shared__ i32 ids[BM];
  __shared__ i32 next_g;
  const u32 m0 = MXRT_BID_Y * BM, row0 = 0, rows = m;
  const u64 base = 0;
  if (tid < BM) {
    const i32 v = m0 + tid < m ? ((const i32*)groups)[m0 + tid] : -1;
    ids[tid] = v < 0 || v >= (i32)num_groups ? -1 : v;
  }
  t.m0 = m0;
  __shared__ GemmTile tile_sh;
  if (tid == 0) tile_sh = t;
  for (i32 prev = -1;;) {
    mxrt_sync();  // ids written; the previous group's readers of next_g are done
    if (tid == 0) {
      i32 best = -1;
#pragma unroll 1
      for (u32 r = 0; r < BM; ++r) {
        const i32 v = ids[r];
        if (v > prev && (best < 0 || v < best)) best = v;
      }
      next_g = best;
    }
    mxrt_sync();
    const i32 gid = next_g;
    if (gid < 0) break;  // uniform over the block
    prev = gid;
    // the tile's operands are re-read from shared memory each round: hoisted out of the loop they spilled SGPRs
    GemmTile tg = tile_sh;
    tg.b += (u64)gid * n * b_row_bytes;
    tg.sb += (u64)gid * b_sf_rows * b_kbt * SF_BYTES;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    gemm_generic_mainloop(tg, acc);
#else
  // ---- lens / masked: one group's row tile ----------------------------------------------------------------------
#if MODE == 0
  __shared__ i32 starts[MXRT_MAX_GROUPS + 2];
  __shared__ i32 tiles[MXRT_MAX_GROUPS + 2];
  const u32 G = num_groups;
  gg_lens_tiles(groups, lens_i64, G, m, BM, starts, tiles, part);
  const i32 tile = (i32)MXRT_BID_Y;
  if (tile >= tiles[G + 1]) return;  // past the real tiles (uniform over the block)
  const i32 grp = gg_find(tiles, (i32)G + 1, tile);
  const u32 row0 = (u32)starts[grp], rows = (u32)(starts[grp + 1] - starts[grp]);
  const u32 m0 = (u32)(tile - tiles[grp]) * BM;
  const bool compute = grp < (i32)G;
#else
  const u32 grp = MXRT_BID_Z, max_m = extra;
  const i64 mm = gg_len(groups, grp, lens_i64);
  const u32 row0 = grp * max_m, rows = (u32)(mm < 0 ? 0 : (mm > (i64)max_m ? (i64)max_m : mm));
  const u32 m0 = MXRT_BID_Y * BM;
  if (m0 >= rows) return;  // uniform over the block
  const bool compute = true;
#endif
  const u64 base = 0;
  if (compute) {  // uniform over the block; the tail tiles keep acc = 0
    t.a = a + (u64)row0 * a_row_bytes;
    t.sa = sa + (u64)row0 * a_kbt * SF_BYTES;
    t.m = rows;
    t.m0 = m0;
    t.b = b + (u64)grp * n * b_row_bytes;
    t.sb = sb + (u64)grp * b_sf_rows * b_kbt * SF_BYTES;
    gemm_generic_mainloop(t, acc);
  }
#endif

  // ---- epilogue: masked stores of the 8 x 4 micro-tile ------------------------------------------------------------
#if MODE == 1
  u32 keep = 0;  // rows of this group, as bits (eight live 64-bit compare masks spilled SGPRs on AMD)
  for (int i = 0; i < 8; ++i) keep |= (u32)(ids[8u * ty + i] == gid) << i;
#endif
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const u32 r = m0 + 8u * ty + i;
    if (r >= rows) continue;
#if MODE == 1
    if (((keep >> i) & 1u) == 0) continue;
#endif
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const u32 c = n0 + 2u * tx + 32u * jj;
      if (c >= n) continue;
      const bool pair = c + 1u < n;
      const u64 idx = base + (u64)(row0 + r) * n + c;
      float v0 = acc[i][2 * jj], v1 = acc[i][2 * jj + 1];
#if OUT_DTYPE == MXRT_OUT_F32
      float* o = (float*)out;
#if ACCUM
      v0 += o[idx];
      if (pair) v1 += o[idx + 1u];
#endif
      o[idx] = v0;
      if (pair) o[idx + 1u] = v1;
#else
      u16* o = (u16*)out;
#if ACCUM
      v0 += mxrt_16_bits_to_f32<OUT_DTYPE>(o[idx]);
      if (pair) v1 += mxrt_16_bits_to_f32<OUT_DTYPE>(o[idx + 1u]);
#endif
      o[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v0);
      if (pair) o[idx + 1u] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v1);
#endif
    }
  }
#if MODE == 1
  }  // next group of the tile
#endif
}
#if defined(MXRT_HIP)
#pragma clang attribute pop
#endif
