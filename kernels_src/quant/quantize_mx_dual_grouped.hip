// kernel   quantize_mx_dual_grouped                                                   (extern "C")
// computes for every group g of w [G,n,k], in ONE read: the rowwise MX quantization [G,n,k_pad] (blocks of
//          32 along k) and the colwise one [G,k,n_pad] (blocks of 32 along n); padding is zero codes, a block
//          (BLOCK_2D: 32x32 tile) holding only padding has scale 127 (mxrt.quantize_mx_dual_grouped)
// args     const IN* w [G,n,k] | u8* q_row [G,n,k_pad] (e2m1: k_pad/2) | u8* s_row [G,n,k_pad/32] |
//          u8* q_col [G,k,n_pad] (e2m1: n_pad/2) | u8* s_col [G,k,n_pad/32] | int n, int k, int k_pad,
//          int n_pad | int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, _VEC_OUT, _VEC_OUT_COL) |
//          int num_units = G * ceil(n_pad/32/MXG_SUB) * ceil(k_pad/128) (units of MXG_SUB 32 x 128 tiles along n)
// grid     (<= num_units,1,1): a grid-stride loop over the units (the launcher: QDG_MIN_BLOCKS CTAs per SM / CU)
//          block (256,1,1)   smem 32*132*4 + 4*32*4 + sizeof(MxgStage) bytes (static)
// defines  THREADS (= 256), FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*), BLOCK_2D     set by mxrt/ops/grouped.py
//          (variants: mxrt/ops/grouped_kernels.py)
// requires k_pad, n_pad multiples of 32; G*n*k_pad, G*k*n_pad, G*n*k, num_units + grid < 2^31;
//          VEC_IN: w 16-byte aligned, k*sizeof(IN) % 16 == 0; VEC_OUT(_COL): outputs 16-byte aligned with row
//          bytes % 16 == 0                                                      checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(BLOCK_2D)
#error "THREADS, FMT, IN_DTYPE and BLOCK_2D must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_dual_grouped: THREADS must be 256 (128 row + 128 column blocks)");
// resident CTAs per SM / CU the build asks for (registers); the launcher sizes the persistent grid with it
#if defined(MXRT_HIP)
#define QDG_MIN_BLOCKS 2  // wave64 CDNA: 2 x 4 waves per CU leave 256 VGPRs a lane (3 spilled in 2-D fp6 builds)
#else
#define QDG_MIN_BLOCKS 4  // 64 registers, no spill (mxrt/ops/grouped_kernels.py PERSISTENT_CTAS mirrors it)
#endif

#define TILE_M 32
#define TILE_K 128
#define TILE_PITCH (TILE_K + 4)  // 16-byte rows: 16-byte fills / row reads, 8 rows span the 32 banks

typedef MxrtFmt<FMT>::type Fmt;

// Tiles of 32 (n) x 128 (k) of one group. A unit is MXG_SUB tiles stacked along n at one k position, units flattened
// u = (grp * quads + qy) * tiles_x + tx and walked by a grid-stride loop, a unit's tiles in order. In each tile
// threads 0..127 quantize its 128 row blocks and threads 128..255 its 128 column blocks from one zero-padded read of
// the tile in shared memory (as quantize_mx_dual), while the next tile's loads are in flight in registers (issued
// before the encode). The codes are staged in shared memory: the rows leave per tile, the columns per unit as full
// lines (mx_group.h, MxgStage).
constexpr u32 PER = 16 / MxrtIn<IN_DTYPE>::SIZE;   // input elements per 16-byte load
constexpr u32 VECS_PER_ROW = TILE_K / PER;
constexpr u32 LOADS = TILE_M * VECS_PER_ROW / THREADS;  // 16-byte loads per thread per tile (2 or 4)

// One tile's loads in flight: the raw 16-byte input vectors, zero past n and k, unpacked only when the next tile
// stages them (mxg_stage_tile; unpacked at the load, they stalled every warp on its fresh loads before the encode).
MXRT_DEVICE void dg_load(const void* __restrict__ w, u32 grp, u32 ty, u32 tx, u32 un, u32 uk, i32 flags,
                         mxrt_u32x4 (&raw)[LOADS]) {
  const u32 tid = MXRT_TID_X;
  const u32 col0 = tx * TILE_K, row0 = ty * TILE_M;
#pragma unroll
  for (u32 it = 0; it < LOADS; ++it) {
    const u32 v = it * THREADS + tid;
    const u32 r = v / VECS_PER_ROW;
    const u32 c = col0 + (v % VECS_PER_ROW) * PER;
    const u32 valid = row0 + r < un && c < uk ? uk - c : 0u;
    raw[it] = mxrt_load_raw16<IN_DTYPE>(w, grp * un * uk + (row0 + r) * uk + c, valid, flags & MXRT_FLAG_VEC_IN);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, QDG_MIN_BLOCKS)
    quantize_mx_dual_grouped(const void* __restrict__ w, u8* __restrict__ q_row, u8* __restrict__ s_row,
                             u8* __restrict__ q_col, u8* __restrict__ s_col, i32 n, i32 k, i32 k_pad, i32 n_pad,
                             i32 scale_mode, i32 flags, i32 num_units) {
  __shared__ __attribute__((aligned(16))) u32 tile[TILE_M * TILE_PITCH];
  __shared__ u32 row_amax[TILE_K / MXRT_BLOCK][TILE_M];
  __shared__ __attribute__((aligned(16))) MxgStage<Fmt> stage;
  const u32 tid = MXRT_TID_X;
  const u32 un = (u32)n, uk = (u32)k;
  const u32 tiles_x = ((u32)k_pad + TILE_K - 1) / TILE_K, tiles_y = (u32)n_pad / TILE_M;
  const u32 quads = (tiles_y + MXG_SUB - 1) / MXG_SUB;
  const u32 rb = Fmt::BITS == 4 ? (u32)k_pad / 2 : (u32)k_pad;  // rowwise row bytes
  const u32 cb = Fmt::BITS == 4 ? (u32)n_pad / 2 : (u32)n_pad;  // colwise row bytes
  const bool is_row = tid < TILE_K;
  const u32 lane = tid % 32;
  const u32 cblk = tid / 32;
  const u32 ccol = tid - TILE_K;
  const u32 step = MXRT_NBID_X;

  mxrt_u32x4 raw[LOADS];
  u32 u = MXRT_BID_X;
  if (u < (u32)num_units) {
    const u32 rest = u / tiles_x;
    dg_load(w, rest / quads, (rest % quads) * MXG_SUB, u % tiles_x, un, uk, flags, raw);
  }
  for (; u < (u32)num_units; u += step) {
    const u32 tx = u % tiles_x, rest = u / tiles_x;
    const u32 qy = rest % quads, grp = rest / quads;
    const u32 ty0 = qy * MXG_SUB;
    const u32 nsub = tiles_y - ty0 < MXG_SUB ? tiles_y - ty0 : MXG_SUB;
    const u32 col0 = tx * TILE_K;
#pragma unroll 1
    for (u32 sub = 0; sub < nsub; ++sub) {
      const u32 row0 = (ty0 + sub) * TILE_M;
      // ---- the tile in flight -> shared memory; the next one's loads issued ----
      mxg_stage_tile<IN_DTYPE, THREADS, TILE_PITCH>(raw, tile);
      mxrt_sync();
      if (sub + 1 < nsub) {
        dg_load(w, grp, ty0 + sub + 1, tx, un, uk, flags, raw);
      } else if (u + step < (u32)num_units) {
        const u32 un_ = u + step, rest_ = un_ / tiles_x;
        dg_load(w, rest_ / quads, (rest_ % quads) * MXG_SUB, un_ % tiles_x, un, uk, flags, raw);
      }

      u32 bits[MXRT_BLOCK];
      if (is_row) {  // warp-uniform branch
#pragma unroll
        for (int i = 0; i < MXRT_BLOCK; i += 4) {
          const mxrt_u32x4 v = *(const mxrt_u32x4*)&tile[lane * TILE_PITCH + cblk * MXRT_BLOCK + i];
          bits[i] = v.x;
          bits[i + 1] = v.y;
          bits[i + 2] = v.z;
          bits[i + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[i * TILE_PITCH + ccol];
      }
      u32 amax = mxrt_amax_bits(bits);
#if BLOCK_2D
      if (is_row) row_amax[cblk][lane] = amax;
      mxrt_sync();
      const u32 tcb = is_row ? cblk : ccol / MXRT_BLOCK;
      amax = 0;
#pragma unroll
      for (int i = 0; i < TILE_M; ++i) amax = row_amax[tcb][i] > amax ? row_amax[tcb][i] : amax;
#endif
      // a block of padding: past k (row threads) or past n (column threads); with 2-D blocks the same tiles
      const u32 c_row = col0 + cblk * MXRT_BLOCK;
      const bool real = is_row ? c_row < uk : row0 < un;
      const u32 sb = real ? mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode) : MXG_PAD_SCALE;
      u32 words[8];
      mxrt_encode_block<Fmt>(bits, sb, words);
      if (is_row) {
        mxg_stage_codes<Fmt>(stage.row + lane * MxgStage<Fmt>::RP + cblk * MxgStage<Fmt>::RB, words);
        stage.srow[lane * 4u + cblk] = (u8)sb;
      } else {
        mxg_stage_codes<Fmt>(stage.col + ccol * MxgStage<Fmt>::CP + sub * MxgStage<Fmt>::RB, words);
        stage.scol[ccol * MXG_SUB + sub] = (u8)sb;
      }
      mxrt_sync();  // staged; also: every read of tile and row_amax is done, so the next tile may refill them
      const u32 nrows = row0 < un ? (un - row0 < TILE_M ? un - row0 : TILE_M) : 0u;
      const u32 row_blocks = ((u32)k_pad - col0) / MXRT_BLOCK < 4u ? ((u32)k_pad - col0) / MXRT_BLOCK : 4u;
      const u64 row = (u64)grp * un + row0;
      mxg_store_rows<Fmt, THREADS>(stage, q_row + row * rb + (Fmt::BITS == 4 ? col0 / 2 : col0), rb,
                                   s_row + row * ((u32)k_pad / MXRT_BLOCK) + col0 / MXRT_BLOCK,
                                   (u32)k_pad / MXRT_BLOCK, nrows, row_blocks * MxgStage<Fmt>::RB, row_blocks,
                                   flags & MXRT_FLAG_VEC_OUT);
      // no barrier here: the next tile's first one orders these reads of `stage` before its staging writes
    }
    // the unit's column side, nsub blocks per column (staged before the last tile's second barrier)
    const u32 ncols = col0 < uk ? (uk - col0 < TILE_K ? uk - col0 : TILE_K) : 0u;
    const u64 crow = (u64)grp * uk + col0;
    const u32 r0 = ty0 * TILE_M;
    mxg_store_cols<Fmt, THREADS>(stage, q_col + crow * cb + (Fmt::BITS == 4 ? r0 / 2 : r0), cb,
                                 s_col + crow * ((u32)n_pad / MXRT_BLOCK) + ty0, (u32)n_pad / MXRT_BLOCK, ncols, nsub,
                                 flags & MXRT_FLAG_VEC_OUT_COL);
  }
}
