// kernel   unshuffle_scales                                                                   (extern "C")
// computes s[r, c] = byte at offset mxrt_scale_offset(r, c) of the layout's storage p, for r < rows, c < cols
//          (mxrt.layouts.unshuffle_scales; padding dropped); one thread per output byte
// args     const u8* p (storage bytes; WIDE: u32 elements, low byte read; deepgemm_ue8m0: the int32 view
//          [rows, sn/4], element (r, t) at p + r*p_row + t*p_col bytes) | u8* s [rows, cols] |
//          int rows, int cols, int sm, int sn | long long p_row, long long p_col (deepgemm_ue8m0 only)
// grid     (ceil(rows*cols / THREADS),1,1)   block (THREADS,1,1)   smem 0
// defines  LAYOUT (MXRT_SCALE_LAYOUT_*, 1..4), WIDE (0 or 1, turbo16x4 only), THREADS
//                                                 set by mxrt/ops/layouts.py from mxrt/ops/layout_kernels.py
// requires sm*sn < 2^31; p C-contiguous except for deepgemm_ue8m0 (any strides)      checked by mxrt/ops/layouts.py
#include "../common/scale_layouts.h"

#if !defined(LAYOUT) || !defined(WIDE) || !defined(THREADS)
#error "LAYOUT, WIDE and THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(LAYOUT >= MXRT_SCALE_LAYOUT_AITER32X8 && LAYOUT <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0,
                   "LAYOUT: a preshuffled MXRT_SCALE_LAYOUT_* (1..4)");
MXRT_STATIC_ASSERT(WIDE == 0 || LAYOUT == MXRT_SCALE_LAYOUT_TURBO16X4,
                   "WIDE: the uint32 form exists for turbo16x4 only");
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");

extern "C" __global__ void __launch_bounds__(THREADS)
    unshuffle_scales(const u8* __restrict__ p, u8* __restrict__ s, i32 rows, i32 cols, i32 sm, i32 sn, i64 p_row,
                     i64 p_col) {
  const u32 g = MXRT_BID_X * THREADS + MXRT_TID_X;
  if (g >= (u32)rows * (u32)cols) return;
  const u32 r = g / (u32)cols, c = g % (u32)cols;
  u8 v;
  if (LAYOUT == MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0) {
    v = p[(i64)r * p_row + (i64)(c / 4) * p_col + c % 4];  // little-endian: byte j of P[r, t] is S[r, 4t + j]
  } else if (WIDE) {
    v = (u8)((const u32*)p)[mxrt_scale_offset<LAYOUT>(r, c, (u32)sm, (u32)sn)];
  } else {
    v = p[mxrt_scale_offset<LAYOUT>(r, c, (u32)sm, (u32)sn)];
  }
  s[g] = v;
}
