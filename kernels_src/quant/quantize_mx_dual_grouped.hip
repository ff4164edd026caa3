// kernel   quantize_mx_dual_grouped                                                   (extern "C")
// computes for every group g of w [G,n,k], in ONE read: the rowwise MX quantization [G,n,k_pad] (blocks of
//          32 along k) and the colwise one [G,k,n_pad] (blocks of 32 along n); padding is zero codes, a block
//          (BLOCK_2D: 32x32 tile) holding only padding has scale 127 (mxrt.quantize_mx_dual_grouped)
// args     const IN* w [G,n,k] | u8* q_row [G,n,k_pad] (e2m1: k_pad/2) | u8* s_row [G,n,k_pad/32] |
//          u8* q_col [G,k,n_pad] (e2m1: n_pad/2) | u8* s_col [G,k,n_pad/32] | int n, int k, int k_pad,
//          int n_pad | int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, _VEC_OUT, _VEC_OUT_COL)
// grid     (ceil(k_pad/128), n_pad/32, G)   block (256,1,1)   smem 32*129*4 + 4*32*4 bytes (static)
// defines  THREADS (= 256), FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*), BLOCK_2D     set by mxrt/ops/grouped.py
//          (variants: mxrt/ops/grouped_kernels.py)
// requires k_pad, n_pad multiples of 32; G*n*k_pad, G*k*n_pad, G*n*k < 2^31; n_pad/32 <= 65535, G <= 65535;
//          VEC_IN: w 16-byte aligned, k*sizeof(IN) % 16 == 0; VEC_OUT(_COL): outputs 16-byte aligned with row
//          bytes % 16 == 0                                                      checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(BLOCK_2D)
#error "THREADS, FMT, IN_DTYPE and BLOCK_2D must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_dual_grouped: THREADS must be 256 (128 row + 128 column blocks)");

#define TILE_M 32
#define TILE_K 128
#define TILE_PITCH (TILE_K + 1)

typedef MxrtFmt<FMT>::type Fmt;

// A 32 (n) x 128 (k) tile of one group: threads 0..127 quantize its 128 row blocks, threads 128..255 its 128
// column blocks, from one zero-padded read of the tile into shared memory (as quantize_mx_dual).
extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_dual_grouped(const void* __restrict__ w, u8* __restrict__ q_row, u8* __restrict__ s_row,
                             u8* __restrict__ q_col, u8* __restrict__ s_col, i32 n, i32 k, i32 k_pad, i32 n_pad,
                             i32 scale_mode, i32 flags) {
  __shared__ u32 tile[TILE_M * TILE_PITCH];
  __shared__ u32 row_amax[TILE_K / MXRT_BLOCK][TILE_M];
  const u32 tid = MXRT_TID_X;
  const u32 col0 = MXRT_BID_X * TILE_K;
  const u32 row0 = MXRT_BID_Y * TILE_M;
#if defined(MXRT_CUDA)
  const u32 grp = (u32)blockIdx.z;
#else
  const u32 grp = (u32)__builtin_amdgcn_workgroup_id_z();
#endif
  const u32 un = (u32)n, uk = (u32)k;
  const u32 rb = Fmt::BITS == 4 ? (u32)k_pad / 2 : (u32)k_pad;  // rowwise row bytes
  const u32 cb = Fmt::BITS == 4 ? (u32)n_pad / 2 : (u32)n_pad;  // colwise row bytes
  const u32 in_base = grp * un * uk;

  // ---- load the tile, zero-padded past n and k ----
  constexpr u32 PER = 16 / MxrtIn<IN_DTYPE>::SIZE;
  constexpr u32 VECS_PER_ROW = TILE_K / PER;
  const bool full_cols = col0 + TILE_K <= uk;
#pragma unroll
  for (u32 it = 0; it < TILE_M * VECS_PER_ROW / THREADS; ++it) {
    const u32 v = it * THREADS + tid;
    const u32 r = v / VECS_PER_ROW;
    const u32 c = (v % VECS_PER_ROW) * PER;
    const bool in_row = row0 + r < un;
    const u32 base = in_base + (row0 + r) * uk + col0 + c;
    u32 vals[PER];
    if ((flags & MXRT_FLAG_VEC_IN) && full_cols && in_row) {
      mxrt_unpack16<IN_DTYPE>(*(const mxrt_u32x4*)((const u8*)w + (u64)base * MxrtIn<IN_DTYPE>::SIZE), vals);
    } else {
#pragma unroll
      for (u32 j = 0; j < PER; ++j) vals[j] = in_row && col0 + c + j < uk ? mxrt_load_elem<IN_DTYPE>(w, base + j) : 0u;
    }
#pragma unroll
    for (u32 j = 0; j < PER; ++j) tile[r * TILE_PITCH + c + j] = vals[j];
  }
  mxrt_sync();

  const bool is_row = tid < TILE_K;
  const u32 lane = tid % 32;
  const u32 cblk = tid / 32;
  const u32 ccol = tid - TILE_K;
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
  mxg_encode<Fmt, MXRT_BLOCK>(bits, sb, words);

  if (is_row) {
    const u32 r = row0 + lane;
    if (r < un && c_row < (u32)k_pad) {
      const u32 row = grp * un + r;
      s_row[row * ((u32)k_pad / MXRT_BLOCK) + c_row / MXRT_BLOCK] = (u8)sb;
      mxrt_store_block<Fmt>(q_row + row * rb + (Fmt::BITS == 4 ? c_row / 2 : c_row), words, MXRT_BLOCK,
                            flags & MXRT_FLAG_VEC_OUT);
    }
  } else {
    const u32 c = col0 + ccol;
    if (c < uk) {
      const u32 row = grp * uk + c;
      s_col[row * ((u32)n_pad / MXRT_BLOCK) + row0 / MXRT_BLOCK] = (u8)sb;
      mxrt_store_block<Fmt>(q_col + row * cb + (Fmt::BITS == 4 ? row0 / 2 : row0), words, MXRT_BLOCK,
                            flags & MXRT_FLAG_VEC_OUT_COL);
    }
  }
}
