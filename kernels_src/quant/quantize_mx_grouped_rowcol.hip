// kernel   quantize_mx_grouped_rowcol                                                 (extern "C")
// computes in ONE read of x [total_m,k] both outputs of quantize_mx_grouped(colwise=True): the rowwise padded
//          layout (align) and the colwise one, x^T [k, m_col_ub] with blocks of 32 along M in col_align-padded
//          groups; padding gets zero codes, pad-only blocks scale 127 (mxrt.formats.grouped.quantize_mx_grouped)
// args     const IN* x [total_m,k] | const i64* offs [3,G+1] (offs, offs_pad_row, offs_pad_col) |
//          u8* q_row [m_ub,k] (e2m1: [m_ub,ceil(k/2)]) | u8* s_row [m_ub,ceil(k/32)] | u8* q_col [k,m_col_ub]
//          (e2m1: [k,m_col_ub/2]) | u8* s_col [k,m_col_ub/32] | int num_groups, int m_ub, int m_col_ub, int k |
//          int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, _VEC_OUT, _VEC_OUT_COL) | int n_tail
// grid     (ceil(k/128), m_col_ub/32 + n_tail, 1): y < m_col_ub/32 is a 32-row tile of the colwise layout; the
//          n_tail CTAs above write the rowwise tail [offs_pad_row[G], m_ub) in a grid-stride loop
//          block (256,1,1)   smem 32*129*4 + 3*(MXG_MAX_GROUPS+1)*4 bytes (static)
// defines  THREADS (= 256), FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*)               set by mxrt/ops/grouped.py
//          (variants: mxrt/ops/grouped_kernels.py)
// requires G <= MXRT_MAX_GROUPS (1024); col_align % 32 == 0 and col_align % align == 0 (a group's rowwise rows
//          lie inside its colwise tiles); total_m*k, m_ub*k, m_col_ub*k < 2^31; offsets from
//          quantize_mx_grouped_offsets                                          checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE)
#error "THREADS, FMT and IN_DTYPE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_grouped_rowcol: THREADS must be 256 (128 row + 128 column blocks)");

#define TILE_M 32
#define TILE_K 128
#define TILE_PITCH (TILE_K + 1)

typedef MxrtFmt<FMT>::type Fmt;

extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_grouped_rowcol(const void* __restrict__ x, const i64* __restrict__ offs, u8* __restrict__ q_row,
                               u8* __restrict__ s_row, u8* __restrict__ q_col, u8* __restrict__ s_col,
                               i32 num_groups, i32 m_ub, i32 m_col_ub, i32 k, i32 scale_mode, i32 flags,
                               i32 n_tail) {
  __shared__ u32 tile[TILE_M * TILE_PITCH];
  __shared__ i32 s_offs[MXG_MAX_GROUPS + 1];
  __shared__ i32 s_prow[MXG_MAX_GROUPS + 1];
  __shared__ i32 s_pcol[MXG_MAX_GROUPS + 1];
  mxg_load_offsets<THREADS>(offs, num_groups, 0, s_offs);
  mxg_load_offsets<THREADS>(offs, num_groups, 1, s_prow);
  mxg_load_offsets<THREADS>(offs, num_groups, 2, s_pcol);
  mxrt_sync();

  const u32 tid = MXRT_TID_X;
  const u32 uk = (u32)k;
  const u32 col0 = MXRT_BID_X * TILE_K;
  const u32 nb = (uk + MXRT_BLOCK - 1) / MXRT_BLOCK;
  const u32 row_bytes = Fmt::BITS == 4 ? (uk + 1) / 2 : uk;
  const bool is_row = tid < TILE_K;
  const u32 lane = tid % 32;      // tile row (row threads)
  const u32 cblk = tid / 32;      // column block in the tile (row threads, 0..3)
  const u32 ccol = tid - TILE_K;  // tile column (column threads)
  const u32 c_row = col0 + cblk * MXRT_BLOCK;  // first column of a row thread's block
  const u32 n_col_tiles = (u32)m_col_ub / TILE_M;
  u32 words[8];

  if (MXRT_BID_Y >= n_col_tiles) {
    // rowwise tail: rows [offs_pad_row[G], m_ub) get zero codes and scale 127, 32 rows per step. No barrier
    // follows, so threads may leave early.
    if (!is_row || c_row >= uk) return;
    const u32 valid = uk - c_row < MXRT_BLOCK ? uk - c_row : MXRT_BLOCK;
    const u32 nbytes = Fmt::BITS == 4 ? (valid + 1) / 2 : valid;
    const bool vec = (flags & MXRT_FLAG_VEC_OUT) && valid == MXRT_BLOCK;
    for (u32 r = (u32)s_prow[num_groups] + (MXRT_BID_Y - n_col_tiles) * TILE_M + lane; r < (u32)m_ub;
         r += (u32)n_tail * TILE_M) {
      s_row[r * nb + c_row / MXRT_BLOCK] = (u8)MXG_PAD_SCALE;
      u8* dst = q_row + r * row_bytes + (Fmt::BITS == 4 ? c_row / 2 : c_row);
      if (vec) {
        const mxrt_u32x4 z = {0u, 0u, 0u, 0u};
#pragma unroll
        for (u32 v = 0; v < nbytes / 16; ++v) ((mxrt_u32x4*)dst)[v] = z;
      } else {
#pragma unroll 1
        for (u32 i = 0; i < nbytes; ++i) dst[i] = 0;
      }
    }
    return;
  }

  // ---- a 32-row tile of the colwise layout: group g, rows i0 .. i0+31 of the group ----
  const i32 R0 = (i32)(MXRT_BID_Y * TILE_M);
  const i32 g = mxg_find_group(s_pcol, num_groups, R0);
  i32 nreal = 0, nrow = 0, src0 = 0, dst0 = 0;
  if (g < num_groups) {
    const i32 i0 = R0 - s_pcol[g];
    const i32 len = s_offs[g + 1] - s_offs[g];
    const i32 len_row = s_prow[g + 1] - s_prow[g];
    nreal = len - i0 < 0 ? 0 : (len - i0 > TILE_M ? TILE_M : len - i0);          // real rows in the tile
    nrow = len_row - i0 < 0 ? 0 : (len_row - i0 > TILE_M ? TILE_M : len_row - i0);  // rowwise rows (real + pad)
    src0 = s_offs[g] + i0;
    dst0 = s_prow[g] + i0;
  }

  // ---- load the tile, zero past the real rows and past k ----
  constexpr u32 PER = 16 / MxrtIn<IN_DTYPE>::SIZE;
  constexpr u32 VECS_PER_ROW = TILE_K / PER;
  const bool full_cols = col0 + TILE_K <= uk;
#pragma unroll
  for (u32 it = 0; it < TILE_M * VECS_PER_ROW / THREADS; ++it) {
    const u32 v = it * THREADS + tid;
    const u32 r = v / VECS_PER_ROW;
    const u32 c = (v % VECS_PER_ROW) * PER;
    const bool real = (i32)r < nreal;
    const u32 base = ((u32)src0 + r) * uk + col0 + c;
    u32 vals[PER];
    if ((flags & MXRT_FLAG_VEC_IN) && full_cols && real) {
      mxrt_unpack16<IN_DTYPE>(*(const mxrt_u32x4*)((const u8*)x + (u64)base * MxrtIn<IN_DTYPE>::SIZE), vals);
    } else {
#pragma unroll
      for (u32 j = 0; j < PER; ++j) vals[j] = real && col0 + c + j < uk ? mxrt_load_elem<IN_DTYPE>(x, base + j) : 0u;
    }
#pragma unroll
    for (u32 j = 0; j < PER; ++j) tile[r * TILE_PITCH + c + j] = vals[j];
  }
  mxrt_sync();

  u32 bits[MXRT_BLOCK];
  if (is_row) {  // warp-uniform branch
#pragma unroll
    for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[lane * TILE_PITCH + cblk * MXRT_BLOCK + i];
  } else {
#pragma unroll
    for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[i * TILE_PITCH + ccol];
  }
  const bool real_block = is_row ? (i32)lane < nreal : nreal > 0;
  const u32 sb = real_block ? mxrt_e8m0_from_amax_bits<Fmt>(mxrt_amax_bits(bits), scale_mode) : MXG_PAD_SCALE;
  mxg_encode<Fmt, MXRT_BLOCK>(bits, sb, words);

  if (is_row) {
    if ((i32)lane < nrow && c_row < uk) {
      const u32 r = (u32)dst0 + lane;
      s_row[r * nb + c_row / MXRT_BLOCK] = (u8)sb;
      mxrt_store_block<Fmt>(q_row + r * row_bytes + (Fmt::BITS == 4 ? c_row / 2 : c_row), words, uk - c_row,
                            flags & MXRT_FLAG_VEC_OUT);
    }
  } else {
    const u32 c = col0 + ccol;
    if (c < uk) {
      const u32 col_bytes = Fmt::BITS == 4 ? (u32)m_col_ub / 2 : (u32)m_col_ub;
      s_col[c * ((u32)m_col_ub / MXRT_BLOCK) + MXRT_BID_Y] = (u8)sb;
      mxrt_store_block<Fmt>(q_col + c * col_bytes + (Fmt::BITS == 4 ? (u32)R0 / 2 : (u32)R0), words, MXRT_BLOCK,
                            flags & MXRT_FLAG_VEC_OUT_COL);
    }
  }
}
