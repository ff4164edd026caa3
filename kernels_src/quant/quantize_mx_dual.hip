// kernel   quantize_mx_dual                                                           (extern "C")
// computes in ONE read of x [m,k]: the rowwise MX quantization of x (blocks of 32 along k) and the rowwise
//          quantization of x^T (blocks of 32 along m, stored [k, m]); BLOCK_2D: one scale per 32x32 tile,
//          stored in both outputs for every row of the tile (mxrt.formats.mx.quantize_mx_dual);
//          SCALE_LAYOUT != 0: both scale matrices are stored preshuffled (kernels_src/common/scale_layouts.h),
//          padding bytes written 127; flag SCALES_T: both stored transposed (transpose_u8.hip puts them in place)
// args     const IN* x [m,k] | u8* q_row [m,k] (e2m1: [m,ceil(k/2)]) | u8* s_row [m,ceil(k/32)], its layout, or
//          (SCALES_T) [ceil(k/32),m] | u8* q_col [k,m] (e2m1: [k,ceil(m/2)]) | u8* s_col [k,ceil(m/32)], its
//          layout, or (SCALES_T) [ceil(m/32),k] | int m, int k | int scale_mode (MXRT_SCALE_*) | int flags
//          (MXRT_FLAG_VEC_IN, _VEC_OUT, _VEC_OUT_COL, _SCALES_T)
// grid     (ceil(k/TILE_K), ceil(m/64), 1), swapped when DUAL_ROWS_FAST; TILE_K = 128 (16-bit) or 64 (fp32)
//          block (256,1,1)   smem 64*PITCH*4 + 8*4 + TILE_K*(COL_PITCH+2) + TILE_K*2 bytes (static, PITCH 65 | 66)
// defines  THREADS (= 256), FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*), BLOCK_2D, SCALE_LAYOUT (MXRT_SCALE_LAYOUT_*)
//                                                 set by mxrt/ops/quant.py (variants: mxrt/ops/quant_kernels.py)
// requires m*k < 2^31, scale storages < 2^31 bytes; ceil(m/64) <= 65535; VEC_IN: x 16-byte aligned, k*sizeof(IN)
//          % 16 == 0; VEC_OUT / VEC_OUT_COL: q_row / q_col 16-byte aligned, row bytes % 16 == 0; SCALES_T: plain
//          layout, m % 16 == 0, k % 16 == 0, s_row / s_col 16-byte aligned            checked by mxrt/ops/quant.py
#include "../common/mx_block.h"
#include "../common/scale_layouts.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(BLOCK_2D) || !defined(SCALE_LAYOUT)
#error "THREADS, FMT, IN_DTYPE, BLOCK_2D and SCALE_LAYOUT must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_dual: THREADS must be 256 (8 warps tile 64 rows x 64 words)");
MXRT_STATIC_ASSERT(SCALE_LAYOUT >= MXRT_SCALE_LAYOUT_NONE && SCALE_LAYOUT <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0,
                   "SCALE_LAYOUT: MXRT_SCALE_LAYOUT_NONE .. _DEEPGEMM_UE8M0 (mx_codes.h)");

// Tuning knobs with defaults (benchmarks/bench_quant.py --dual-variants times the alternatives):
// DUAL_ROWS_FAST: 1 = grid x walks tile rows (the CTAs that finish a 128-byte q_col line run back to back),
// 0 = grid x walks tile columns (mirrored by mxrt/ops/quant.py DUAL_ROWS_FAST). DUAL_MIN_BLOCKS (CUDA):
// resident blocks per SM asked of ptxas, 0 = none.
#ifndef DUAL_ROWS_FAST
#define DUAL_ROWS_FAST 0
#endif
// DUAL_MIN_BLOCKS=6 (40 registers, no spill for 1-D bf16/fp32 builds; fp16 and 2-D builds would spill) ran 23%
// faster on bf16 4096 x 2048 and the same elsewhere (H100, benchmarks/RESULTS.md), but one benchmark pass of that
// build differed from the default build's bytes once (7168 x 4096) while passing every GPU test: it stays off
// until that is explained (NOTES.md).
#ifndef DUAL_MIN_BLOCKS
#define DUAL_MIN_BLOCKS 0
#endif
#if defined(MXRT_CUDA) && DUAL_MIN_BLOCKS
#define DUAL_MIN_BLOCKS_ARG , DUAL_MIN_BLOCKS
#else
#define DUAL_MIN_BLOCKS_ARG
#endif

typedef MxrtFmt<FMT>::type Fmt;
typedef MxrtScaleLayout<SCALE_LAYOUT> Layout;

// The tile: 64 rows x 64 32-bit words of x, i.e. 64 x 128 elements (16-bit inputs) or 64 x 64 (fp32), kept raw
// in shared memory.
#define ESIZE (MxrtIn<IN_DTYPE>::SIZE)
#define EPW (4u / ESIZE)                              // elements per word: 2 or 1
#define PER (16u / ESIZE)                             // elements per 16-byte chunk: 8 or 4
#define TILE_M 64u
#define TILE_WORDS 64u
#define TILE_K (TILE_WORDS * EPW)
#define CHUNKS_PER_ROW (TILE_WORDS / 4u)              // 16
#define UNROLL (TILE_M * CHUNKS_PER_ROW / THREADS)    // 4 chunks per thread
#define LPB (MXRT_BLOCK / PER)                        // row path: lanes per 32-element block, 4 or 8
#define ROW_CODE_BYTES (Fmt::BITS == 4 ? PER / 2 : PER)
// Column path: a lane holds 2 adjacent columns x RPL rows: 16-bit inputs read one word (both columns) per row,
// fp32 two words. LPC lanes share a 32-row block; a warp spans ACROSS column pairs and 32 rows.
#define WPL (2u / EPW)                                // words per lane per row: 1 or 2
#define RPL (16u / WPL)                               // rows per lane: 16 or 8
#define LPC (MXRT_BLOCK / RPL)                        // 2 or 4
#define ACROSS (32u / LPC)                            // column pairs per warp: 16 or 8
#define COL_CODE_BYTES (Fmt::BITS == 4 ? RPL / 2 : RPL)
#define COL_TILE_BYTES (Fmt::BITS == 4 ? TILE_M / 2 : TILE_M)  // code bytes of one column of the tile
#define COL_PITCH (COL_TILE_BYTES + 16u)                          // staging pitch (16-byte multiple)
// Row pitch in words, chosen so that the column reads are free of bank conflicts: the LPC row segments a warp
// reads at once sit 16 banks apart (16 * 65 = 16 mod 32 for one word per lane; 8 * 66 = 16 mod 32 for the
// 8-byte reads of fp32, which are served per half warp).
#define PITCH (EPW == 2 ? 65u : 66u)
MXRT_STATIC_ASSERT(UNROLL == 4 && 4 * ACROSS * 2 == TILE_K, "quantize_mx_dual: the lane maps cover the tile");

// 1-D builds of 16-bit inputs take a block's amax from the packed words (mx_block.h MXRT_ABS16X2: a mask and a
// 16x2 max per two elements, the same bits); the 2-D fp16 builds, at their 64-register cap, spilled 64 bytes with it.
constexpr bool PACKED_AMAX = EPW == 2 && !BLOCK_2D;

// Row path: the codes and the scale of one 16-byte chunk (row r of x, columns cs .. cs+PER) whose LPB lanes
// have agreed on the scale byte sb. rs: the CTA's row scales staged [TILE_K / 32][TILE_M] (flag SCALES_T), or null.
MXRT_DEVICE void store_row_chunk(const u32* bits, u32 sb, u32 r, u32 cs, u32 m, u32 k, bool lead, bool vec,
                                 u8* __restrict__ q_row, u8* __restrict__ s_row, const Layout& lrow, u8* rs) {
  u32 words[(ROW_CODE_BYTES + 3) / 4];
  mxrt_encode_chunk<Fmt, PER>(bits, sb, words);
  if (r >= m || cs >= k) return;
  const u32 valid = k - cs < PER ? k - cs : PER;
  const u32 row_bytes = Fmt::BITS == 4 ? (k + 1) / 2 : k;
  const u32 nbytes = Fmt::BITS == 4 ? (valid + 1) / 2 : valid;
  mxrt_store_codes<ROW_CODE_BYTES>(q_row + r * row_bytes + (Fmt::BITS == 4 ? cs / 2 : cs), words, nbytes,
                                   vec && valid == PER);
  if (lead) {
    const u32 nb = (k + MXRT_BLOCK - 1) / MXRT_BLOCK;
    const u32 cb = cs / MXRT_BLOCK;
    if (SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE && rs != nullptr) {
      rs[(cs % TILE_K) / MXRT_BLOCK * TILE_M + r % TILE_M] = (u8)sb;
    } else {
      s_row[SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE ? r * nb + cb : lrow.offset(r, cb)] = (u8)sb;
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS DUAL_MIN_BLOCKS_ARG)
    quantize_mx_dual(const void* __restrict__ x, u8* __restrict__ q_row, u8* __restrict__ s_row,
                     u8* __restrict__ q_col, u8* __restrict__ s_col, i32 m_, i32 k_, i32 scale_mode, i32 flags) {
  __shared__ __attribute__((aligned(16))) u32 tile[TILE_M * PITCH];
  __shared__ u32 warp_amax[THREADS / 32];
  // the column side staged (codes of the tile's rows per column, its two scale bytes), stored once per CTA as
  // whole 16-byte chunks: straight from the lanes it took ~5 L2 write requests per read request (L2 at 86%)
  __shared__ __attribute__((aligned(16))) u8 col_stage[TILE_K * COL_PITCH];
  // the two scale sets staged, [2][TILE_K] (the column side's, per 32-row block) and [TILE_K / 32][TILE_M] (the row
  // side's, under flag SCALES_T): stored as bytes into their rows, or transposed in whole 16-byte chunks
  __shared__ __attribute__((aligned(16))) u8 col_scales[TILE_K * 2];
  __shared__ __attribute__((aligned(16))) u8 row_scales[TILE_K / MXRT_BLOCK * TILE_M];
  u8* const rs = (flags & MXRT_FLAG_SCALES_T) ? row_scales : nullptr;
  // SCALES_T: the transpose launch that follows (launched early) may take the SMs this grid's last wave leaves
  if (flags & MXRT_FLAG_SCALES_T) mxrt_grid_dependents_launch();
  const u32 m = (u32)m_, k = (u32)k_;
  const u32 tid = MXRT_TID_X;
  const u32 lane = tid % 32u, warp = tid / 32u;
  const u32 col0 = (DUAL_ROWS_FAST ? MXRT_BID_Y : MXRT_BID_X) * TILE_K;
  const u32 row0 = (DUAL_ROWS_FAST ? MXRT_BID_X : MXRT_BID_Y) * TILE_M;
  const Layout lrow(m, (k + MXRT_BLOCK - 1) / MXRT_BLOCK);
  const Layout lcol(k, (m + MXRT_BLOCK - 1) / MXRT_BLOCK);

  // ---- load: chunk c = u*THREADS + tid is row c/16, words 4*(c%16) .. +4 of the tile; zeros past m and k ----
  mxrt_u32x4 v[UNROLL];
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = u * THREADS + tid;
    const u32 r = row0 + c / CHUNKS_PER_ROW, cs = col0 + (c % CHUNKS_PER_ROW) * PER;
    const u32 valid = r < m && cs < k ? (k - cs < PER ? k - cs : PER) : 0u;
    v[u] = mxrt_load_raw16<IN_DTYPE>(x, r * k + cs, valid, flags & MXRT_FLAG_VEC_IN);
  }
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = u * THREADS + tid;
    u32* t = tile + (c / CHUNKS_PER_ROW) * PITCH + (c % CHUNKS_PER_ROW) * 4u;
    t[0] = v[u].x;
    t[1] = v[u].y;
    t[2] = v[u].z;
    t[3] = v[u].w;
  }

#if !BLOCK_2D
  // ---- row path, from the registers (before the barrier, overlapping the other warps' loads) ----
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = u * THREADS + tid;
    u32 bits[PER];
    mxrt_unpack16<IN_DTYPE>(v[u], bits);
    u32 amax;
    if constexpr (PACKED_AMAX) {  // the chunk's 4 words as packed magnitudes, then their two halves
      const u32 h = mxrt_max_u16x2(mxrt_max_u16x2(v[u].x & MXRT_ABS16X2, v[u].y & MXRT_ABS16X2),
                                   mxrt_max_u16x2(v[u].z & MXRT_ABS16X2, v[u].w & MXRT_ABS16X2));
      amax = mxrt_half_to_f32_bits<IN_DTYPE>((h & 0xFFFFu) > (h >> 16) ? h & 0xFFFFu : h >> 16);
    } else {
      amax = mxrt_amax_n<PER>(bits);
    }
#pragma unroll
    for (u32 o = 1; o < LPB; o <<= 1) {
      const u32 other = mxrt_shfl_xor(amax, (i32)o);
      amax = other > amax ? other : amax;
    }
    const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode);
    store_row_chunk(bits, sb, row0 + c / CHUNKS_PER_ROW, col0 + (c % CHUNKS_PER_ROW) * PER, m, k,
                    lane % LPB == 0, flags & MXRT_FLAG_VEC_OUT, q_row, s_row, lrow, rs);
  }
#endif
  mxrt_sync();

  // ---- column path: lane -> column pair p, rows rb*32 + seg*RPL .. +RPL of the tile ----
  const u32 p = (warp % 4u) * ACROSS + lane % ACROSS;
  const u32 seg = lane / ACROSS;
  const u32 rb = warp / 4u;
  const u32 tr0 = rb * MXRT_BLOCK + seg * RPL;  // first tile row of this lane
  u32 cbits[2][RPL];
  u32 pmax = 0;  // PACKED_AMAX: both columns' magnitudes, packed as the words hold them
#pragma unroll
  for (u32 i = 0; i < RPL; ++i) {
    const u32* t = tile + (tr0 + i) * PITCH + p * WPL;
    if (EPW == 2) {
      const u32 w = t[0];
      cbits[0][i] = mxrt_half_to_f32_bits<IN_DTYPE>(w & 0xFFFFu);
      cbits[1][i] = mxrt_half_to_f32_bits<IN_DTYPE>(w >> 16);
      if (PACKED_AMAX) pmax = mxrt_max_u16x2(pmax, w & MXRT_ABS16X2);
    } else {
      const mxrt_u32x2 w = *(const mxrt_u32x2*)t;
      cbits[0][i] = w.x;
      cbits[1][i] = w.y;
    }
  }
  u32 camax[2];
#pragma unroll
  for (u32 j = 0; j < 2; ++j) {
    if (PACKED_AMAX) {
      camax[j] = mxrt_half_to_f32_bits<IN_DTYPE>(j == 0 ? pmax & 0xFFFFu : pmax >> 16);
    } else {
      camax[j] = mxrt_amax_n<RPL>(cbits[j]);
    }
#pragma unroll
    for (u32 o = ACROSS; o < 32u; o <<= 1) {
      const u32 other = mxrt_shfl_xor(camax[j], (i32)o);
      camax[j] = other > camax[j] ? other : camax[j];
    }
  }
#if BLOCK_2D
  // one amax per 32x32 tile: warp w covers tile rows rb*32.. and 2*ACROSS columns of column block cb; the
  // warps of one 32x32 tile (1 for 16-bit inputs, 2 for fp32) combine through shared memory
  {
    u32 a = camax[0] > camax[1] ? camax[0] : camax[1];
#pragma unroll
    for (u32 o = 1; o < 32u; o <<= 1) {
      const u32 other = mxrt_shfl_xor(a, (i32)o);
      a = other > a ? other : a;
    }
    if (lane == 0) warp_amax[warp] = a;
  }
  mxrt_sync();
  // tile (rb, cb) = max over warps rb*4 + i whose columns fall in column block cb (i * 2*ACROSS / 32 == cb)
#define TILE_AMAX(rb_, cb_, out_)                                                 \
  {                                                                               \
    out_ = 0;                                                                     \
    _Pragma("unroll") for (u32 i_ = 0; i_ < 4u; ++i_) {                           \
      if ((i_ * 2u * ACROSS) / MXRT_BLOCK == (cb_)) {                             \
        const u32 w_ = warp_amax[(rb_) * 4u + i_];                                \
        out_ = w_ > out_ ? w_ : out_;                                             \
      }                                                                           \
    }                                                                             \
  }
  {
    u32 t2;
    TILE_AMAX(rb, (warp % 4u) * 2u * ACROSS / MXRT_BLOCK, t2);
    camax[0] = t2;
    camax[1] = t2;
  }
#endif
  // column codes and scales: q_col row c = col0 + 2p + j, bytes for x rows row0 + tr0 .. + RPL
#pragma unroll
  for (u32 j = 0; j < 2; ++j) {
    const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(camax[j], scale_mode);
    u32 words[(COL_CODE_BYTES + 3) / 4];
    mxrt_encode_chunk<Fmt, RPL>(cbits[j], sb, words);
    const u32 cl = 2u * p + j;  // the column within the tile
    u32* dst = (u32*)(col_stage + cl * COL_PITCH + (Fmt::BITS == 4 ? tr0 / 2 : tr0));
#pragma unroll
    for (u32 w = 0; w < COL_CODE_BYTES / 4; ++w) dst[w] = words[w];
    if (seg == 0) col_scales[tr0 / MXRT_BLOCK * TILE_K + cl] = (u8)sb;
  }

#if BLOCK_2D
  // ---- row path with the tile scales ----
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = u * THREADS + tid;
    const u32 tr = c / CHUNKS_PER_ROW, tj = c % CHUNKS_PER_ROW;
    u32 bits[PER];
    mxrt_unpack16<IN_DTYPE>(v[u], bits);
    u32 amax;
    TILE_AMAX(tr / MXRT_BLOCK, (tj * PER) / MXRT_BLOCK, amax);
    const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode);
    store_row_chunk(bits, sb, row0 + tr, col0 + tj * PER, m, k, lane % LPB == 0, flags & MXRT_FLAG_VEC_OUT, q_row,
                    s_row, lrow, rs);
  }
#undef TILE_AMAX
#endif

  // ---- the staged column side out: consecutive threads on consecutive 16-byte chunks of a column ----
  mxrt_sync();
  {
    constexpr u32 CH = COL_TILE_BYTES / 16u;
    const u32 rows = m - row0 < TILE_M ? m - row0 : TILE_M;
    const u32 nbytes = Fmt::BITS == 4 ? (rows + 1) / 2 : rows;
    const u32 ncols = k - col0 < TILE_K ? k - col0 : TILE_K;
    const u32 col_bytes = Fmt::BITS == 4 ? (m + 1) / 2 : m;
    u8* qc = q_col + (u64)col0 * col_bytes + (Fmt::BITS == 4 ? row0 / 2 : row0);
    for (u32 i = tid; i < TILE_K * CH; i += THREADS) {
      const u32 c = i / CH, ch = i % CH;
      if (c < ncols && 16u * ch < nbytes)
        mxrt_put16(qc + (u64)c * col_bytes + 16u * ch, col_stage + c * COL_PITCH + 16u * ch, nbytes - 16u * ch,
                   flags & MXRT_FLAG_VEC_OUT_COL);
    }
    const u32 mb = (m + MXRT_BLOCK - 1) / MXRT_BLOCK, b0 = row0 / MXRT_BLOCK;
    const u32 nblk = (rows + MXRT_BLOCK - 1) / MXRT_BLOCK;  // 1 or 2
    if (SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE && rs != nullptr) {
      // SCALES_T (m, k multiples of 16: rows and ncols are, so every chunk below is whole): s_row is [ceil(k/32), m]
      // and s_col [ceil(m/32), k]; the row side's TILE_K / 32 rows of TILE_M bytes, the column side's 2 rows of
      // TILE_K bytes, each in 16-byte chunks: whole sectors, where the bytes into [m, k/32] / [k, m/32] put a few
      // bytes into sectors that 8-16 CTAs share (measured: 13% of the kernel's time, RESULTS.md session 18)
      constexpr u32 RCH = TILE_M / 16u, CCH = TILE_K / 16u;
      const u32 ncb = (ncols + MXRT_BLOCK - 1) / MXRT_BLOCK;
      if (tid < TILE_K / MXRT_BLOCK * RCH) {
        const u32 cb = tid / RCH, j = tid % RCH;
        if (cb < ncb && 16u * j < rows)
          *(mxrt_u32x4*)(s_row + (u64)(col0 / MXRT_BLOCK + cb) * m + row0 + 16u * j) =
              *(const mxrt_u32x4*)(rs + cb * TILE_M + 16u * j);
      } else if (tid >= 64u && tid < 64u + 2u * CCH) {
        const u32 b = (tid - 64u) / CCH, j = (tid - 64u) % CCH;
        if (b < nblk && 16u * j < ncols)
          *(mxrt_u32x4*)(s_col + (u64)(b0 + b) * k + col0 + 16u * j) =
              *(const mxrt_u32x4*)(col_scales + b * TILE_K + 16u * j);
      }
    } else {
      for (u32 c = tid; c < ncols; c += THREADS) {
        if (SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE) {
          const u32 o = (col0 + c) * mb + b0;
          if (nblk == 2u && ((u64)(s_col + o) & 1u) == 0u) {
            *(unsigned short*)(s_col + o) = (unsigned short)(col_scales[c] | (col_scales[TILE_K + c] << 8));
          } else {
            for (u32 b = 0; b < nblk; ++b) s_col[o + b] = col_scales[b * TILE_K + c];
          }
        } else {
          for (u32 b = 0; b < nblk; ++b) s_col[lcol.offset(col0 + c, b0 + b)] = col_scales[b * TILE_K + c];
        }
      }
    }
  }

#if SCALE_LAYOUT != MXRT_SCALE_LAYOUT_NONE
  const u32 gt = (MXRT_BID_Y * MXRT_NBID_X + MXRT_BID_X) * THREADS + tid;
  const u32 stride = MXRT_NBID_X * MXRT_NBID_Y * THREADS;
  lrow.write_padding(s_row, gt, stride);
  lcol.write_padding(s_col, gt, stride);
#endif
}
