// kernel   transpose_u8                                                               (extern "C")
// computes dst[c, r] = src[r, c] for two byte matrices in one launch: quantize_mx_dual's scale sets stored
//          transposed (flag SCALES_T) put into [m, ceil(k/32)] and [k, ceil(m/32)] (mxrt/ops/quant.py); the
//          row+col grouped quantizer's s_col (one matrix; mxrt/ops/grouped.py)
// args     const u8* src0 [rows0, cols0] | u8* dst0 [cols0, rows0] | int rows0, int cols0 | const u8* src1 |
//          u8* dst1 | int rows1, int cols1 | int tiles0 (matrix 0's 64 x 64 tiles)
// grid     (tiles0 + tiles1, 1, 1): 64 x 64-byte source tiles, matrix 0's first, each matrix row-major over its tiles
//          block (256,1,1)   smem 64 * 80 bytes (static)
// defines  THREADS (= 256)                                     set by mxrt/ops/quant.py (spec: ops/quant_kernels.py)
// requires cols % 16 == 0 and src 16-byte aligned (16-byte loads), rows * cols < 2^31     checked by mxrt/ops/quant.py
//          launched early after the quantizer that wrote src (quantize_mx_dual, quantize_mx_grouped_rowcol:
//          programmatic dependent launch): waits for it first (prelude.h)
#include "../common/prelude.h"

#if !defined(THREADS)
#error "THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "transpose_u8: THREADS must be 256 (64 rows x 4 chunks of a tile)");

#define TT 64u
#define TP 80u  // tile pitch: 16-byte aligned rows

extern "C" __global__ void __launch_bounds__(THREADS)
    transpose_u8(const u8* __restrict__ src0, u8* __restrict__ dst0, i32 rows0, i32 cols0, const u8* __restrict__ src1,
                 u8* __restrict__ dst1, i32 rows1, i32 cols1, i32 tiles0) {
  __shared__ __attribute__((aligned(16))) u8 t[TT * TP];
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
  // load: thread -> source row tid / 4, 16-byte chunk tid % 4 (cols % 16 == 0: a chunk is all in or all out)
  {
    const u32 lr = tid / 4u, lc = (tid % 4u) * 16u;
    if (r0 + lr < rows && c0 + lc < cols)
      *(mxrt_u32x4*)(t + lr * TP + lc) = *(const mxrt_u32x4*)(src + (u64)(r0 + lr) * cols + c0 + lc);
  }
  mxrt_sync();
  // store: thread -> destination row c0 + tid / 4, its 16 bytes from source rows r0 + (tid % 4) * 16 ..
  const u32 j = tid / 4u, i0 = (tid % 4u) * 16u;
  if (c0 + j >= cols || r0 + i0 >= rows) return;
  const u32 n = rows - r0 - i0 < 16u ? rows - r0 - i0 : 16u;
  u8* d = dst + (u64)(c0 + j) * rows + r0 + i0;
  u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (u32 i = 0; i < 16u; ++i) w[i / 4u] |= (u32)t[(i0 + i) * TP + j] << (8u * (i % 4u));
  if (n == 16u && ((u64)d & 15u) == 0u) {
    mxrt_u32x4 o;
    o.x = w[0];
    o.y = w[1];
    o.z = w[2];
    o.w = w[3];
    *(mxrt_u32x4*)d = o;
  } else {
    for (u32 i = 0; i < n; ++i) d[i] = (u8)(w[i / 4u] >> (8u * (i % 4u)));
  }
}
