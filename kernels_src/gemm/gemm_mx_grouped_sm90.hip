// kernel   gemm_mx_grouped_sm90                                                       (extern "C")
// computes grouped MX GEMMs out[rows of group g] = a_g @ b_g.T (MODE 0 lens, 1 indices, 2 masked) and the variable-K
//          wgrad out[g] (+)= a_g @ b_g.T (MODE 3), as gemm_mx_grouped_generic.hip, on gemm_mx_sm90's CTA tile
//          (gemm_sm90_tile.h) under gemm_grouped_tiles.h's device-side schedule; groups read on the device only
// args     const __grid_constant__ mxrt_tmap tma (A codes [m, kp] u8, box BM x 128, SWIZZLE_128B, zero OOB fill), tmb
//          (B codes [G*n, kp], MODE 3 [n, kp], row stride >= kp, box BN x 128) | const u8* sa [m, sa_stride] | sb
//          [G*n or n, sb_stride] (E8M0) | void* out [m, n] (MODE 3 [G, m, n]) | const void* groups (int32; MODE 0 / 2
//          / 3 int64 with flags & 2) | u32 m, n, k, sa_stride, sb_stride, num_groups, extra (MODE 2 max_m, 3 align),
//          tiles_m | u32 flags (1: n even and out aligned to 2 elements, pairs stored as one word; 2: int64 groups)
// grid     (tiles_m * ceil(n/BN), 1, MODE 2 / 3 ? G : 1), tiles_m = MODE 0 ceil(m/BM)+G+1, 1 / 3 ceil(m/BM), 2
//          ceil(max_m/BM)   block (THREADS,1,1)   smem as gemm_mx_sm90 (MODE 0 / 3's schedule lives in it first)
// defines  MODE, A_FMT, B_FMT (e4m3 / e5m2: e2m1 expanded first), OUT_DTYPE, ACCUM (MODE 3), BM (128 / 256), BN
//          (128), STAGES, DBUF (MODE 1: 0)                             set by mxrt/ops/grouped_gemm_sm90.py
// requires sm_90a; kp % 16 == 0, code bases and B's row stride 16-byte aligned (TMA); m, G*n < 2^31; G <=
//          MXRT_MAX_GROUPS (MODE 0 / 3), <= 65535 (MODE 2 / 3); MODE 3 align % 32 == 0, G*m*n < 2^31; no split-K
//          (ATOMIC 0)                                                   checked by grouped_gemm_sm90.py
//
// MODE 0 lens:    a [m, k] rows grouped by lens [G] (clamped to [0, m], cut at m); row tile y of the schedule (the
//                 rasterised tile index, GROUP_M row tiles sweeping the columns together) belongs to group
//                 gg_find(tiles, G + 1, y); the tail group G (rows [S, m) past the last group) stores zeros; tiles
//                 past it exit. A's TMA box starts at the tile's first row (rows of the next group come along,
//                 scale factor 0, never stored); B's at row g*n + n0 (columns past n likewise).
// MODE 1 indices: a [m, k], ids [m]: row tile y covers rows [BM y, +BM); every group id present (ascending) runs
//                 the tile (barriers re-initialised between groups; DBUF 0: the loop around the main loop spilled
//                 with two partials) and stores the rows whose id is g; ids < 0 or >= G are skipped (rows untouched).
// MODE 2 masked:  a [G*max_m, k], group z owns rows [z*max_m, +clamp(masked[z], 0, max_m)); other rows untouched.
// MODE 3 wgrad:   a [m, k], b [n, k] (the colwise grouped layout: K = the padded token columns); group z = grid z
//                 reduces over columns [P[z], P[z+1]) with P the prefix of ceil(clamp(lens, 0, k) / align) * align
//                 cut at k (as gemm_mx_grouped_generic's MODE 3): the tile's main loop over MX blocks [P[z] / 32,
//                 ceil(P[z+1] / 32)) (the TMA boxes start at column 32 kb0; steps past kb1 are skipped). out[z] =
//                 the sum (ACCUM: out[z] + the sum in fp32, rounded once); an empty group stores zeros (ACCUM: out
//                 + 0, rounded once), as the generic kernel and the numpy twin.
#define ATOMIC 0
#define DIAG 0
#include "gemm_sm90_tile.h"
MXRT_STATIC_ASSERT(SLA == MXRT_SCALE_LAYOUT_NONE && SLB == MXRT_SCALE_LAYOUT_NONE,
                   "the grouped kernel reads row-major scales (its Sm90Job holds scale rows)");

#if !defined(MODE)
#error "MODE must be defined by the launcher"
#endif
#if !defined(ACCUM)
#error "ACCUM must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(MODE >= 0 && MODE <= 3, "MODE: 0 lens, 1 indices, 2 masked, 3 wgrad (k-grouped: generic kernel)");
MXRT_STATIC_ASSERT(ACCUM == 0 || MODE == 3, "ACCUM: the wgrad only");
MXRT_STATIC_ASSERT(BN == 128 && (BM == 128 || BM == 256), "the grouped tiles: BM 128 or 256, BN 128");
MXRT_STATIC_ASSERT(MODE != 1 || DBUF == 0, "MODE 1: DBUF 0 (the per-group loop spilled with two partials)");

#if defined(MXRT_CUDA)
#include "gemm_grouped_tiles.h"

#define GG_FLAG_PAIRS 1u
#define GG_FLAG_I64 2u
#define OUT_BYTES (OUT_DTYPE == MXRT_OUT_F32 ? 4u : 2u)

// MODE 1: rows of the tile whose id is the round's group
struct gg_keep_id {
  const i32* ids;
  u32 m0;
  i32 gid;
  MXRT_DEVICE bool operator()(u32 row) const { return ids[row - m0] == gid; }
};

#if MODE == 3 && ACCUM
// store_half of gemm_sm90_tile.h with out's old values added first (fp32), rounded once by store_pair
MXRT_DEVICE float gg_old(const void* out, u64 idx) {
#if OUT_DTYPE == MXRT_OUT_F32
  return reinterpret_cast<const float*>(out)[idx];
#else
  return mxrt_16_bits_to_f32<OUT_DTYPE>(reinterpret_cast<const u16*>(out)[idx]);
#endif
}
MXRT_DEVICE void gg_store_half_acc(void* out, const float (&acc)[64], u32 row0, u32 col0, int m, int n, bool even_n) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const u32 col = col0 + 8u * j;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u32 row = row0 + 8u * h;
      if (row < (u32)m && col < (u32)n) {
        const bool second = col + 1u < (u32)n;
        const u64 idx = (u64)row * (u32)n + col;
        const float v0 = acc[4 * j + 2 * h] + gg_old(out, idx);
        const float v1 = second ? acc[4 * j + 2 * h + 1] + gg_old(out, idx + 1u) : 0.0f;
        store_pair(out, idx, v0, v1, second && even_n, second);
      }
    }
  }
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_mx_grouped_sm90(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                         const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out,
                         const void* __restrict__ groups, u32 m, u32 n, u32 k, u32 sa_stride, u32 sb_stride,
                         u32 num_groups, u32 extra, u32 tiles_m, u32 flags) {
  extern __shared__ u8 smem_raw[];
  const Sm90Smem S = sm90_smem(smem_raw);
  const u32 tid = MXRT_TID_X;
  // rasterised tile (as gemm_mx_sm90): GROUP_M row tiles sweep the column tiles together
  const u32 tiles_n = (n + BN - 1) / BN;
  const u32 bid = MXRT_BID_X, per_group = GROUP_M * tiles_n, first_m = (bid / per_group) * GROUP_M;
  const u32 gsize = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
  const u32 tm = first_m + (bid % per_group) % gsize, n0 = ((bid % per_group) / gsize) * BN;
  const u32 kbs = (k + 31u) / 32u, lens_i64 = (flags & GG_FLAG_I64) ? 1u : 0u;
  const bool pairs = (flags & GG_FLAG_PAIRS) != 0u;
  const void* ta = &tma;  // generic addresses of the kernel parameters (param space, __grid_constant__)
  const void* tb = &tmb;
  float acc0[64], acc1[64];

#if MODE == 1
  // ---- indices: every group present in the tile, ascending, through one pipeline --------------------------------
  __shared__ i32 ids[BM];
  __shared__ i32 wmin[THREADS / 32];
  const u32 m0 = tm * BM;
  if (tid < BM) {
    const i32 v = m0 + tid < m ? ((const i32*)groups)[m0 + tid] : -1;
    ids[tid] = v < 0 || v >= (i32)num_groups ? -1 : v;
  }
  __syncthreads();
#pragma unroll 1
  for (i32 prev = -1;;) {
    // the smallest id above the previous round's (block min: warp reductions, then the warp minima)
    const i32 v = tid < BM && ids[tid] > prev ? ids[tid] : 0x7FFFFFFF;
    const i32 wv = __reduce_min_sync(0xFFFFFFFFu, v);
    if (tid % 32u == 0u) wmin[tid / 32u] = wv;
    __syncthreads();
    i32 gid = wmin[0];
#pragma unroll
    for (u32 w = 1; w < THREADS / 32; ++w) gid = wmin[w] < gid ? wmin[w] : gid;
    if (gid == 0x7FFFFFFF) break;  // uniform over the block
    // fresh barriers per group (the previous round's stages are all consumed); the barrier inside also orders
    // every thread's wmin reads before the next round's writes
    sm90_init(S, ta, tb, prev >= 0);
    prev = gid;
    const Sm90Job job{sa + (u64)m0 * sa_stride,
                      sb + ((u64)gid * n + n0) * sb_stride,
                      sa_stride,
                      sb_stride,
                      m - m0,
                      n - n0,
                      (i32)m0,
                      (i32)((u32)gid * n + n0),
                      0u,
                      kbs};
    sm90_mainloop(S, job, ta, tb, acc0, acc1);
    sm90_store(out, acc0, acc1, m0, n0, (int)m, (int)n, pairs, gg_keep_id{ids, m0, gid});
    __syncthreads();  // every thread's last empty-barrier arrival precedes a re-initialisation
  }
#elif MODE == 3
  // ---- wgrad: group z's padded column range from the device lens (prefix in the stage memory, then released) ----
  const u32 G = num_groups, grp = MXRT_BID_Z;
  {
    i64* part = reinterpret_cast<i64*>(S.tile_a);
    i32* starts = reinterpret_cast<i32*>(S.tile_a + THREADS * 8);
    gg_offsets(groups, lens_i64, G, (i64)k, (i64)extra, (i64)k, starts, part);
  }
  const i32* starts = reinterpret_cast<const i32*>(S.tile_a + THREADS * 8);
  const u32 c0 = (u32)starts[grp], c1 = (u32)starts[grp + 1];
  // every thread's schedule reads precede the TMA (async proxy) and scale writes into the same shared memory
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const u32 m0 = tm * BM;
  if (c1 > c0) {  // uniform over the block
    sm90_init(S, ta, tb);
    const Sm90Job job{sa + (u64)m0 * sa_stride, sb + (u64)n0 * sb_stride, sa_stride, sb_stride, m - m0, n - n0,
                      (i32)m0, (i32)n0, c0 / 32u, (c1 + 31u) / 32u};
    sm90_mainloop(S, job, ta, tb, acc0, acc1);
  } else {
#pragma unroll
    for (int v = 0; v < 64; ++v) acc0[v] = acc1[v] = 0.0f;
  }
  void* out_g = reinterpret_cast<u8*>(out) + (u64)grp * m * n * OUT_BYTES;  // out[z]
#if ACCUM
  {
    const u32 lrow = sm90_lrow(), lcol = sm90_lcol();
    gg_store_half_acc(out_g, acc0, m0 + lrow, n0 + lcol, (int)m, (int)n, pairs);
#if RPW == 128
    gg_store_half_acc(out_g, acc1, m0 + lrow + 64u, n0 + lcol, (int)m, (int)n, pairs);
#endif
  }
#else
  sm90_store(out_g, acc0, acc1, m0, n0, (int)m, (int)n, pairs, sm90_keep_all{});
#endif
  (void)kbs;
#else
#if MODE == 0
  // ---- lens: the schedule (prefix sums of the device lens) in the stage memory, before the pipeline uses it ----
  i64* part = reinterpret_cast<i64*>(S.tile_a);
  i32* starts = reinterpret_cast<i32*>(S.tile_a + THREADS * 8);
  i32* tiles = starts + (MXRT_MAX_GROUPS + 2);
  const u32 G = num_groups;
  gg_lens_tiles(groups, lens_i64, G, m, BM, starts, tiles, part);
  if ((i32)tm >= tiles[G + 1]) return;  // past the real tiles (uniform over the block)
  const i32 grp = gg_find(tiles, (i32)G + 1, (i32)tm);
  const u32 row0 = (u32)starts[grp], rows = (u32)(starts[grp + 1] - starts[grp]);
  const u32 m0 = (u32)((i32)tm - tiles[grp]) * BM;
  const bool compute = grp < (i32)G;  // group G: the tail rows, stored as zeros
  // every thread's schedule reads precede the TMA (async proxy) and scale writes into the same shared memory
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
#else
  // ---- masked: group z owns rows [z * max_m, + clamp(masked[z], 0, max_m)) ------------------------------------
  const u32 grp = MXRT_BID_Z, max_m = extra;
  const i64 mm = gg_len(groups, grp, lens_i64);
  const u32 row0 = grp * max_m, rows = (u32)(mm < 0 ? 0 : (mm > (i64)max_m ? (i64)max_m : mm));
  const u32 m0 = tm * BM;
  if (m0 >= rows) return;  // uniform over the block
  const bool compute = true;
#endif
  if (compute) {  // uniform over the block
    sm90_init(S, ta, tb);
    const Sm90Job job{sa + (u64)(row0 + m0) * sa_stride,
                      sb + ((u64)grp * n + n0) * sb_stride,
                      sa_stride,
                      sb_stride,
                      rows - m0,
                      n - n0,
                      (i32)(row0 + m0),
                      (i32)((u32)grp * n + n0),
                      0u,
                      kbs};
    sm90_mainloop(S, job, ta, tb, acc0, acc1);
  } else {
#pragma unroll
    for (int v = 0; v < 64; ++v) acc0[v] = acc1[v] = 0.0f;
  }
  void* out_g = reinterpret_cast<u8*>(out) + (u64)row0 * n * OUT_BYTES;  // the group's first row
  sm90_store(out_g, acc0, acc1, m0, n0, (int)rows, (int)n, pairs, sm90_keep_all{});
#endif
}

#endif  // MXRT_CUDA
