// The generic MX GEMM kernels on the host SIMT emulator (simt_core.h; tests/test_grouped_gemm_host.py):
// SIMT_KERNEL 10 = gemm_mx_generic.hip (dense, ATOMIC=0 only: the host build has no atomics), 11 =
// gemm_mx_grouped_generic.hip (every MODE). Build: g++ -std=c++17 -O1 -shared -fPIC -DSIMT_KERNEL=10|11
// -DFMT_A=.. -DFMT_B=.. -DOUT_DTYPE=.. -DTHREADS=256 (-DATOMIC=0 | -DMODE=.. -DACCUM=..).
#include "simt_core.h"

#if SIMT_KERNEL == 10
#include "../../kernels_src/gemm/gemm_mx_generic.hip"
#else
#include "../../kernels_src/gemm/gemm_mx_grouped_generic.hip"
#endif

namespace simt {
static const u8 *g_a, *g_sa, *g_b, *g_sb;
static void* g_out;
static const void* g_groups;
static u32 g_u[10];
static void run_kernel() {
#if SIMT_KERNEL == 10
  gemm_mx_generic(g_a, g_sa, g_b, g_sb, g_out, g_u[0], g_u[1], g_u[2], g_u[3], 0u, 0u, 0u, 0u, g_u[4], nullptr);
#else
  gemm_mx_grouped_generic(g_a, g_sa, g_b, g_sb, g_out, g_groups, g_u[0], g_u[1], g_u[2], g_u[3], g_u[4], g_u[5],
                          g_u[6], g_u[7], nullptr);
#endif
}
// Blocks in a scrambled order (order 2) or in launch order; every block's fibers in `order`.
static int run_grid3(u32 gx, u32 gy, u32 gz, int order) {
  failed = false;
  error[0] = 0;
  body = run_kernel;
  nbid_x = gx;
  nbid_y = gy;
  const u64 total = (u64)gx * gy * gz;
  for (u64 i = 0; i < total; ++i) {
    const u64 j = order == 2 ? (i * 7919u + 13u) % total : i;  // 7919 is prime: a permutation unless it divides
    const u64 b = (order == 2 && total % 7919u == 0) ? i : j;
    bid_x = (u32)(b % gx);
    bid_y = (u32)((b / gx) % gy);
    bid_z = (u32)(b / ((u64)gx * gy));
    if (!run_block(THREADS, order, bid_x * 7u + bid_y * 13u + bid_z * 5u)) return 1;
  }
  return 0;
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }

// dense: u = {m, n, k, split_k, flags}; grouped: u = {m, n, k, kb, num_groups, extra, flags, lens_i64}
extern "C" int simt_gemm(const u8* a, const u8* sa, const u8* b, const u8* sb, void* out, const void* groups,
                         const u32* u, int nu, int gx, int gy, int gz, int order) {
  simt::g_a = a;
  simt::g_sa = sa;
  simt::g_b = b;
  simt::g_sb = sb;
  simt::g_out = out;
  simt::g_groups = groups;
  for (int i = 0; i < nu && i < 10; ++i) simt::g_u[i] = u[i];
  return simt::run_grid3((u32)gx, (u32)gy, (u32)gz, order);
}
