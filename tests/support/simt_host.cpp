// The quant kernels of kernels_src/quant on the host SIMT emulator (simt_core.h; tests/test_kernels_host.py).
// Build: g++ -std=c++17 -O1 -shared -fPIC -DSIMT_KERNEL=0|1|2 -DFMT=.. -DIN_DTYPE=.. ... (2: transpose_u8, entry
// simt_transpose)
#include "simt_core.h"

#if SIMT_KERNEL == 0
#include "../../kernels_src/quant/quantize_mx_rowwise.hip"
#elif SIMT_KERNEL == 1
#include "../../kernels_src/quant/quantize_mx_dual.hip"
#else
#include "../../kernels_src/quant/transpose_u8.hip"
#endif

namespace simt {
static const void* a_x;
static u8 *a_q, *a_s, *a_q2, *a_s2;
static i32 a_m, a_k, a_mode, a_flags;
static i32 a_tiles;
static void run_kernel() {
#if SIMT_KERNEL == 0
  quantize_mx_rowwise(a_x, a_q, a_s, a_m, a_k, a_mode, a_flags);
#elif SIMT_KERNEL == 1
  quantize_mx_dual(a_x, a_q, a_s, a_q2, a_s2, a_m, a_k, a_mode, a_flags);
#else  // transpose_u8: (src0, dst0, rows0, cols0, src1, dst1, rows1, cols1, tiles0) in the same slots
  transpose_u8((const u8*)a_x, a_q, a_m, a_k, a_s, a_q2, a_mode, a_flags, a_tiles);
#endif
}
static int run_grid(u32 gx, u32 gy, int order) {
  failed = false;
  error[0] = 0;
  body = run_kernel;
  nbid_x = gx;
  nbid_y = gy;
  for (u32 by = 0; by < gy; ++by)
    for (u32 bx = 0; bx < gx; ++bx) {
      bid_x = bx;
      bid_y = by;
      if (!run_block(THREADS, order, bx * 7u + by * 13u)) return 1;
    }
  return 0;
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }

extern "C" int simt_run(const void* x, u8* q, u8* s, u8* q2, u8* s2, int m, int k, int mode, int flags, int gx,
                        int gy, int order) {
  simt::a_x = x;
  simt::a_q = q;
  simt::a_s = s;
  simt::a_q2 = q2;
  simt::a_s2 = s2;
  simt::a_m = m;
  simt::a_k = k;
  simt::a_mode = mode;
  simt::a_flags = flags;
  return simt::run_grid((u32)gx, (u32)gy, order);
}

extern "C" int simt_transpose(const u8* src0, u8* dst0, int rows0, int cols0, const u8* src1, u8* dst1, int rows1,
                              int cols1, int tiles0, int gx, int order) {
  simt::a_tiles = tiles0;
  return simt_run(src0, dst0, (u8*)src1, dst1, nullptr, rows0, cols0, rows1, cols1, gx, 1, order);
}
