// kernel   preshuffle_scales                                                                  (extern "C")
// computes out[o] = S[r(o), c(o)] for every offset o of the layout's storage, where (r, c) is the inverse index
//          map of common/scale_layouts.h, S the padded matrix: S[r, c] = s[r, c] for r < rows and c < cols, else pad
//          (mxrt.layouts.preshuffle_scales); each thread writes 4 consecutive storage elements
// args     const u8* s (S[r,c] at s + r*s_row + c*s_col, strides in bytes, may be negative) |
//          void* out (u8 [sm*sn]; WIDE: u32 [sm*sn], zero-extended) | int rows, int cols, int sm, int sn |
//          long long s_row, long long s_col | int pad
// grid     (ceil(sm*sn/4 / THREADS),1,1)   block (THREADS,1,1)   smem 0
// defines  LAYOUT (MXRT_SCALE_LAYOUT_*, 1..4), WIDE (0 or 1, turbo16x4 only), THREADS
//                                                 set by mxrt/ops/layouts.py from mxrt/ops/layout_kernels.py
// requires sm*sn < 2^31; sm, sn multiples of the layout's tile (so sm*sn % 4 == 0); out 16-byte aligned (a fresh
//          CuPy allocation)                                                            checked by mxrt/ops/layouts.py
#include "../common/scale_layouts.h"

#if !defined(LAYOUT) || !defined(WIDE) || !defined(THREADS)
#error "LAYOUT, WIDE and THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(LAYOUT >= MXRT_SCALE_LAYOUT_AITER32X8 && LAYOUT <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0,
                   "LAYOUT: a preshuffled MXRT_SCALE_LAYOUT_* (1..4)");
MXRT_STATIC_ASSERT(WIDE == 0 || LAYOUT == MXRT_SCALE_LAYOUT_TURBO16X4,
                   "WIDE: the uint32 form exists for turbo16x4 only");
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");

MXRT_DEVICE u32 mxrt_padded_scale(const u8* s, u32 r, u32 c, u32 rows, u32 cols, i64 s_row, i64 s_col, u32 pad) {
  return (r < rows && c < cols) ? (u32)s[(i64)r * s_row + (i64)c * s_col] : pad;
}

// Output-stationary gather: every storage element (padding included) is written exactly once.
extern "C" __global__ void __launch_bounds__(THREADS)
    preshuffle_scales(const u8* __restrict__ s, void* __restrict__ out, i32 rows, i32 cols, i32 sm, i32 sn,
                      i64 s_row, i64 s_col, i32 pad) {
  const u32 g = MXRT_BID_X * THREADS + MXRT_TID_X;
  if (g >= (u32)sm * (u32)sn / 4) return;
  u32 v[4];
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    u32 r, c;
    mxrt_scale_coords<LAYOUT>(4 * g + j, (u32)sm, (u32)sn, &r, &c);
    v[j] = mxrt_padded_scale(s, r, c, (u32)rows, (u32)cols, s_row, s_col, (u32)pad);
  }
  if (WIDE) {
    mxrt_u32x4 w;
    w.x = v[0];
    w.y = v[1];
    w.z = v[2];
    w.w = v[3];
    ((mxrt_u32x4*)out)[g] = w;
  } else {
    ((u32*)out)[g] = v[0] | (v[1] << 8) | (v[2] << 16) | (v[3] << 24);  // little-endian bytes 4g .. 4g+3
  }
}
