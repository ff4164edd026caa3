// kernel   quantize_mx_dual                                                           (extern "C")
// computes in ONE read of x [m,k]: the rowwise MX quantization of x (blocks of 32 along k) and the rowwise
//          quantization of x^T (blocks of 32 along m, stored [k, m]); BLOCK_2D: one scale per 32x32 tile,
//          stored in both outputs for every row of the tile (mxrt.formats.mx.quantize_mx_dual)
// args     const IN* x [m,k] | u8* q_row [m,k] (e2m1: [m,ceil(k/2)]) | u8* s_row [m,ceil(k/32)] |
//          u8* q_col [k,m] (e2m1: [k,ceil(m/2)]) | u8* s_col [k,ceil(m/32)] | int m, int k |
//          int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, _VEC_OUT, _VEC_OUT_COL)
// grid     (ceil(k/128), ceil(m/32), 1)   block (256,1,1)   smem 32*129*4 + 4*32*4 bytes (static)
// defines  THREADS (= 256), FMT, IN_DTYPE, BLOCK_2D                            set by mxrt/ops/quant.py
// requires m*k < 2^31; ceil(m/32) <= 65535; flag VEC_IN: x 16-byte aligned, k*sizeof(IN) % 16 == 0;
//          flags VEC_OUT / VEC_OUT_COL: q_row / q_col 16-byte aligned with row bytes % 16 == 0
//                                                                               checked by mxrt/ops/quant.py
#include "../common/mx_block.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(BLOCK_2D)
#error "THREADS, FMT, IN_DTYPE and BLOCK_2D must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_dual: THREADS must be 256 (128 row blocks + 128 column blocks)");

#define TILE_M 32
#define TILE_K 128
#define TILE_PITCH (TILE_K + 1)  // one extra word per row: row and column walks are both conflict-free

typedef MxrtFmt<FMT>::type Fmt;

// Tile of 32 x 128: threads 0..127 (warps 0..3) quantize the 128 row blocks (warp w takes column block w of
// all 32 rows), threads 128..255 the 128 column blocks (one column each). The tile is read from global memory
// once, with 16-byte loads where aligned, into shared memory as fp32 bits.
extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_dual(const void* __restrict__ x, u8* __restrict__ q_row, u8* __restrict__ s_row,
                     u8* __restrict__ q_col, u8* __restrict__ s_col, i32 m, i32 k, i32 scale_mode,
                     i32 flags) {
  __shared__ u32 tile[TILE_M * TILE_PITCH];
  __shared__ u32 row_amax[TILE_K / MXRT_BLOCK][TILE_M];
  const u32 tid = MXRT_TID_X;
  const u32 col0 = MXRT_BID_X * TILE_K;
  const u32 row0 = MXRT_BID_Y * TILE_M;
  const u32 um = (u32)m, uk = (u32)k;

  // ---- load the tile, zero-padded past m and k ----
  constexpr u32 PER = 16 / MxrtIn<IN_DTYPE>::SIZE;  // elements per 16-byte vector
  constexpr u32 VECS_PER_ROW = TILE_K / PER;
  const bool full_cols = col0 + TILE_K <= uk;
#pragma unroll
  for (u32 it = 0; it < TILE_M * VECS_PER_ROW / THREADS; ++it) {
    const u32 v = it * THREADS + tid;
    const u32 r = v / VECS_PER_ROW;
    const u32 c = (v % VECS_PER_ROW) * PER;
    u32 vals[PER];
    if ((flags & MXRT_FLAG_VEC_IN) && full_cols && row0 + r < um) {
      const mxrt_u32x4 w =
          *(const mxrt_u32x4*)((const u8*)x + (u64)((row0 + r) * uk + col0 + c) * MxrtIn<IN_DTYPE>::SIZE);
      mxrt_unpack16<IN_DTYPE>(w, vals);
    } else {
#pragma unroll
      for (u32 j = 0; j < PER; ++j) {
        const bool in = row0 + r < um && col0 + c + j < uk;
        vals[j] = in ? mxrt_load_elem<IN_DTYPE>(x, (row0 + r) * uk + col0 + c + j) : 0u;
      }
    }
#pragma unroll
    for (u32 j = 0; j < PER; ++j) tile[r * TILE_PITCH + c + j] = vals[j];
  }
  mxrt_sync();

  // ---- each thread gathers its block: a row segment or a column segment ----
  const bool is_row = tid < TILE_K;
  const u32 lane = tid % 32;      // row index (row threads)
  const u32 cblk = tid / 32;      // column block (row threads, 0..3)
  const u32 ccol = tid - TILE_K;  // column index (column threads)
  u32 bits[MXRT_BLOCK];
  if (is_row) {  // warp-uniform branch
#pragma unroll
    for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[lane * TILE_PITCH + cblk * MXRT_BLOCK + i];
  } else {
#pragma unroll
    for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[i * TILE_PITCH + ccol];
  }
  u32 amax = mxrt_amax_bits(bits);

#if BLOCK_2D
  // one amax per 32x32 tile: the max of its 32 row-block amaxes
  if (is_row) row_amax[cblk][lane] = amax;
  mxrt_sync();
  const u32 tcb = is_row ? cblk : ccol / MXRT_BLOCK;
  amax = 0;
#pragma unroll
  for (int i = 0; i < TILE_M; ++i) amax = row_amax[tcb][i] > amax ? row_amax[tcb][i] : amax;
#endif
  const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode);
  u32 words[8];
  mxrt_encode_block<Fmt>(bits, sb, words);

  if (is_row) {
    const u32 r = row0 + lane;
    const u32 c = col0 + cblk * MXRT_BLOCK;
    if (r < um && c < uk) {
      s_row[r * ((uk + MXRT_BLOCK - 1) / MXRT_BLOCK) + c / MXRT_BLOCK] = (u8)sb;
      const u32 row_bytes = Fmt::BITS == 4 ? (uk + 1) / 2 : uk;
      mxrt_store_block<Fmt>(q_row + r * row_bytes + (Fmt::BITS == 4 ? c / 2 : c), words, uk - c,
                            flags & MXRT_FLAG_VEC_OUT);
    }
  } else {
    const u32 c = col0 + ccol;
    if (c < uk) {
      s_col[c * ((um + MXRT_BLOCK - 1) / MXRT_BLOCK) + row0 / MXRT_BLOCK] = (u8)sb;
      const u32 row_bytes = Fmt::BITS == 4 ? (um + 1) / 2 : um;
      mxrt_store_block<Fmt>(q_col + c * row_bytes + (Fmt::BITS == 4 ? row0 / 2 : row0), words, um - row0,
                            flags & MXRT_FLAG_VEC_OUT_COL);
    }
  }
}
