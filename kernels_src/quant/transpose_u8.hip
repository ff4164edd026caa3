// kernel   transpose_u8                                                               (extern "C")
// computes dst[c, r] = src[r, c] for two byte matrices in one launch: quantize_mx_dual's scale sets stored
//          transposed (flag SCALES_T) put into [m, ceil(k/32)] and [k, ceil(m/32)] (mxrt/ops/quant.py); the
//          row+col grouped quantizer's s_col (one matrix; mxrt/ops/grouped.py)
// args     const u8* src0 [rows0, cols0] | u8* dst0 [cols0, rows0] | int rows0, int cols0 | const u8* src1 |
//          u8* dst1 | int rows1, int cols1 | int tiles0 (matrix 0's 128 x 128 tiles)
// grid     (tiles0 + tiles1, 1, 1): 128 x 128-byte source tiles, matrix 0's first, each matrix row-major over its
//          tiles     block (256,1,1)   smem 128 * 128 bytes (static)
// defines  THREADS (= 256)                                     set by mxrt/ops/quant.py (spec: ops/quant_kernels.py)
// requires cols % 16 == 0 and src 16-byte aligned (16-byte loads), rows * cols < 2^31     checked by mxrt/ops/quant.py
//          launched early after the quantizer that wrote src (quantize_mx_dual, quantize_mx_grouped_rowcol:
//          programmatic dependent launch): waits for it first (prelude.h)
#include "../common/prelude.h"

#if !defined(THREADS)
#error "THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "transpose_u8: THREADS must be 256 (8 warps over a 128 x 128 tile)");

#define TT 128u

// 16 bytes of a destination row: one 16-byte store where the address allows, else 8- / 4-byte words, else bytes.
MXRT_DEVICE void tr_store16(u8* d, const u32 (&w)[4]) {
  const u32 a = (u32)(u64)d;
  if ((a & 15u) == 0u) {
    mxrt_u32x4 o;
    o.x = w[0];
    o.y = w[1];
    o.z = w[2];
    o.w = w[3];
    *(mxrt_u32x4*)d = o;
  } else if ((a & 3u) == 0u) {
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) ((u32*)d)[i] = w[i];
  } else {
    for (u32 i = 0; i < 16u; ++i) d[i] = (u8)(w[i / 4u] >> (8u * (i % 4u)));
  }
}

// Every thread loads 4 16-byte chunks of the tile (8 threads per 128-byte source row) into shared memory, then
// gathers 4 source columns (j .. j + 3, j = 64 h + 4 (lane / 2)) of 16 source rows (i0 = 32 (warp / 2) + 16 (lane
// % 2)) as 16 words, transposes them 4 x 4 bytes at a time (8 byte permutes each) and stores 16 bytes into each of
// its 4 destination rows: lanes 2l and 2l + 1 write the two halves of one 32-byte sector. Chunk c of source row r
// sits at chunk c ^ 4 ((r / 16) % 2) of its shared row, so the two lanes' halves of the gather read the two halves
// of the banks (no conflict; the 16-byte chunk stores of a quarter warp cover one row, conflict-free as well).
extern "C" __global__ void __launch_bounds__(THREADS)
    transpose_u8(const u8* __restrict__ src0, u8* __restrict__ dst0, i32 rows0, i32 cols0, const u8* __restrict__ src1,
                 u8* __restrict__ dst1, i32 rows1, i32 cols1, i32 tiles0) {
  __shared__ __attribute__((aligned(16))) u8 t[TT * TT];
  mxrt_grid_dependency_wait();  // launched early after the quantizer (prelude.h): its scales complete from here
  const u32 tid = MXRT_TID_X;
  u32 b = MXRT_BID_X;
  const bool second = b >= (u32)tiles0;
  if (second) b -= (u32)tiles0;
  const u8* src = second ? src1 : src0;
  u8* dst = second ? dst1 : dst0;
  const u32 rows = (u32)(second ? rows1 : rows0), cols = (u32)(second ? cols1 : cols0);
  const u32 tx = (cols + TT - 1) / TT;
  const u32 r0 = (b / tx) * TT, c0 = (b % tx) * TT;
  // load: chunk q = tid + 256 i -> source row q / 8, 16-byte chunk q % 8 (cols % 16 == 0: all in or all out)
#pragma unroll
  for (u32 i = 0; i < 4u; ++i) {
    const u32 q = tid + THREADS * i, lr = q / 8u, ch = q % 8u;
    if (r0 + lr < rows && c0 + ch * 16u < cols)
      *(mxrt_u32x4*)(t + lr * TT + ((ch ^ (((lr / 16u) & 1u) * 4u)) * 16u)) =
          *(const mxrt_u32x4*)(src + (u64)(r0 + lr) * cols + c0 + ch * 16u);
  }
  mxrt_sync();
  const u32 warp = tid / 32u, lane = tid % 32u, p = lane & 1u;
  const u32 j = (warp & 1u) * 64u + (lane / 2u) * 4u, i0 = (warp / 2u) * 32u + p * 16u;
  if (c0 + j >= cols || r0 + i0 >= rows) return;
  // word i of the gather: source row i0 + i, bytes j .. j + 3, at chunk (j / 16) ^ 4p of its shared row
  const u32* row = (const u32*)(t + i0 * TT + (((j / 16u) ^ (p * 4u)) * 16u) + (j % 16u));
  u32 o[4][4];  // o[k][g]: destination row j + k, source rows i0 + 4g .. + 3
#pragma unroll
  for (u32 g = 0; g < 4u; ++g) {
    const u32 a = row[(4u * g + 0u) * (TT / 4u)], bb = row[(4u * g + 1u) * (TT / 4u)];
    const u32 c = row[(4u * g + 2u) * (TT / 4u)], d = row[(4u * g + 3u) * (TT / 4u)];
    const u32 ab01 = mxrt_prmt(a, bb, 0x5140u), ab23 = mxrt_prmt(a, bb, 0x7362u);  // a0 b0 a1 b1 | a2 b2 a3 b3
    const u32 cd01 = mxrt_prmt(c, d, 0x5140u), cd23 = mxrt_prmt(c, d, 0x7362u);
    o[0][g] = mxrt_prmt(ab01, cd01, 0x5410u);  // a0 b0 c0 d0
    o[1][g] = mxrt_prmt(ab01, cd01, 0x7632u);
    o[2][g] = mxrt_prmt(ab23, cd23, 0x5410u);
    o[3][g] = mxrt_prmt(ab23, cd23, 0x7632u);
  }
  const u32 n = rows - r0 - i0 < 16u ? rows - r0 - i0 : 16u;
#pragma unroll
  for (u32 k = 0; k < 4u; ++k) {
    u8* d = dst + (u64)(c0 + j + k) * rows + r0 + i0;
    if (n == 16u) {
      tr_store16(d, o[k]);
    } else {
      for (u32 i = 0; i < n; ++i) d[i] = (u8)(o[k][i / 4u] >> (8u * (i % 4u)));
    }
  }
}
