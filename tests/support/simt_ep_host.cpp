// kernels_src/moe/ep_*.hip (mxrt.ep.dispatch's device layout) on the host SIMT emulator (simt_core.h;
// tests/test_ep_kernels.py). Build: g++ -std=c++17 -O1 -shared -fPIC -DTHREADS=.. -DID_BYTES=4|8 -DUNIT=1|2|4|8|16
#include "simt_core.h"

#include "../../kernels_src/moe/ep_gather_rows.hip"
#include "../../kernels_src/moe/ep_recv_map.hip"
#include "../../kernels_src/moe/ep_route_count.hip"
#include "../../kernels_src/moe/ep_route_scatter.hip"

namespace simt {
static const void* a_ids;
static i32* a_hist;
static i64 *a_order, *a_pos, *a_counts, *a_g2r, *a_perm, *a_lens;
static const i64* a_rcounts;
static i32 a_numel, a_e, a_w, a_chunk, a_nctas, a_el, a_ldc;
static u8 *a_d0, *a_d1;
static const u8 *a_s0, *a_s1;
static const i64* a_idx;
static i64 a_n, a_div, a_w0, a_w1, a_ldd0, a_ldd1, a_lds0, a_lds1, a_r;
static void run_count() { ep_route_count(a_ids, a_hist, a_numel, a_e, a_chunk); }
static void run_scatter() {
  ep_route_scatter(a_ids, a_hist, a_order, a_pos, a_counts, a_numel, a_e, a_w, a_chunk, a_nctas);
}
static void run_gather() {
  ep_gather_rows(a_d0, a_d1, a_s0, a_s1, a_idx, a_n, a_div, a_w0, a_w1, a_ldd0, a_ldd1, a_lds0, a_lds1);
}
static void run_map() { ep_recv_map(a_rcounts, a_g2r, a_perm, a_lens, a_r, a_w, a_el, a_ldc); }

static int run_grid(void (*kernel)(), u32 gx, int order) {
  failed = false;
  error[0] = 0;
  body = kernel;
  nbid_x = gx;
  nbid_y = 1;
  for (u32 bx = 0; bx < gx; ++bx) {
    bid_x = bx;
    bid_y = 0;
    if (!run_block(THREADS, order, bx * 7u)) return 1;
  }
  return 0;
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }

// ep_route_count then ep_route_scatter over num_ctas CTAs each.
extern "C" int simt_route(const void* ids, i32* hist, i64* order, i64* pos, i64* counts, int numel, int e, int w,
                          int chunk, int num_ctas, int order_mode) {
  simt::a_ids = ids;
  simt::a_hist = hist;
  simt::a_order = order;
  simt::a_pos = pos;
  simt::a_counts = counts;
  simt::a_numel = numel;
  simt::a_e = e;
  simt::a_w = w;
  simt::a_chunk = chunk;
  simt::a_nctas = num_ctas;
  if (simt::run_grid(simt::run_count, (u32)num_ctas, order_mode)) return 1;
  return simt::run_grid(simt::run_scatter, (u32)num_ctas, order_mode);
}

// One launch of either route kernel, with the kernel's own arguments (a recorded launch replayed).
extern "C" int simt_route_count(const void* ids, i32* hist, int numel, int e, int chunk, int gx, int order_mode) {
  simt::a_ids = ids;
  simt::a_hist = hist;
  simt::a_numel = numel;
  simt::a_e = e;
  simt::a_chunk = chunk;
  return simt::run_grid(simt::run_count, (u32)gx, order_mode);
}

extern "C" int simt_route_scatter(const void* ids, i32* hist, i64* order, i64* pos, i64* counts, int numel, int e,
                                  int w, int chunk, int num_ctas, int gx, int order_mode) {
  simt::a_ids = ids;
  simt::a_hist = hist;
  simt::a_order = order;
  simt::a_pos = pos;
  simt::a_counts = counts;
  simt::a_numel = numel;
  simt::a_e = e;
  simt::a_w = w;
  simt::a_chunk = chunk;
  simt::a_nctas = num_ctas;
  return simt::run_grid(simt::run_scatter, (u32)gx, order_mode);
}

extern "C" int simt_gather(u8* d0, u8* d1, const u8* s0, const u8* s1, const i64* idx, long long n, long long div,
                           long long w0, long long w1, long long ldd0, long long ldd1, long long lds0, long long lds1,
                           int gx, int order_mode) {
  simt::a_d0 = d0;
  simt::a_d1 = d1;
  simt::a_s0 = s0;
  simt::a_s1 = s1;
  simt::a_idx = idx;
  simt::a_n = n;
  simt::a_div = div;
  simt::a_w0 = w0;
  simt::a_w1 = w1;
  simt::a_ldd0 = ldd0;
  simt::a_ldd1 = ldd1;
  simt::a_lds0 = lds0;
  simt::a_lds1 = lds1;
  return simt::run_grid(simt::run_gather, (u32)gx, order_mode);
}

extern "C" int simt_recv_map(const i64* counts, i64* g2r, i64* perm, i64* lens, long long r, int w, int el, int ldc,
                             int gx, int order_mode) {
  simt::a_rcounts = counts;
  simt::a_g2r = g2r;
  simt::a_perm = perm;
  simt::a_lens = lens;
  simt::a_r = r;
  simt::a_w = w;
  simt::a_el = el;
  simt::a_ldc = ldc;
  return simt::run_grid(simt::run_map, (u32)gx, order_mode);
}
