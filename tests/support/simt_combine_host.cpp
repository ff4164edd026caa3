// kernels_src/moe/moe_combine.hip on the host SIMT emulator (simt_core.h; tests/test_moe_combine.py).
// Build: g++ -std=c++17 -O1 -shared -fPIC -DTHREADS=.. -DVEC=0|1 -DIDX_BYTES=4|8 [-DMXRT_HOST_FTZ]
#include "simt_core.h"

#include "../../kernels_src/moe/moe_combine.hip"

namespace simt {
static const u16* a_y;
static const void* a_src;
static const float* a_w;
static u16* a_out;
static i64 a_r, a_t, a_n, a_ldy;
static i32 a_k;
static void run_kernel() { moe_combine(a_y, a_src, a_w, a_out, a_r, a_t, a_k, a_n, a_ldy); }
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }

extern "C" int simt_run(const u16* y, const void* src, const float* w, u16* out, long long r, long long t, int k,
                        long long n, long long ldy, int gx, int order) {
  simt::a_y = y;
  simt::a_src = src;
  simt::a_w = w;
  simt::a_out = out;
  simt::a_r = r;
  simt::a_t = t;
  simt::a_k = k;
  simt::a_n = n;
  simt::a_ldy = ldy;
  simt::failed = false;
  simt::error[0] = 0;
  simt::body = simt::run_kernel;
  simt::nbid_x = (u32)gx;
  simt::nbid_y = 1;
  for (u32 bx = 0; bx < (u32)gx; ++bx) {
    simt::bid_x = bx;
    simt::bid_y = 0;
    if (!simt::run_block(THREADS, order, bx * 7u)) return 1;
  }
  return 0;
}
