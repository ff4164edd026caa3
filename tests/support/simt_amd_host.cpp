// A wave64 SIMT emulator that runs the AMD MFMA GEMM kernels (kernels_src/gemm/gemm_mx_gfx950.hip,
// gemm_mx_gfx942.hip) on the host for tests/test_gemm_amd_host.py.
//
// Like tests/support/simt_host.cpp: every GPU thread of a block is a fiber (ucontext) on one OS thread; blocks run
// one after another; mxrt_sync() parks a fiber until the whole block arrives; fibers run forward, backward or
// in a scrambled order between synchronisation points. Here a wave is 64 lanes, and the wave-wide operations
// are collectives: every lane posts its operands, parks until all 64 lanes of its wave have posted (a wave
// operation that not all lanes reach is reported as an error: the hardware needs EXEC all ones), computes its
// own result from everyone's operands, and parks again until all have read.
//
// The matrix instructions are emulated from their documented operand maps only, never from the kernels' index
// math (tests/test_gemm_amd_host.py also checks these emulations against mxrt.reference.emulate and ml_dtypes):
//
// gfx950 v_mfma_scale_f32_16x16x128_f8f6f4 (MX_REFERENCE.md 6.1; Triton mfmaDotToLinearLayout, Primus-Turbo,
// LLVM llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.ll):
//   FP8/BF8 (cbsz/blgp 0/1): A[i][k] -> lane i + 16*((k%64)/16), byte 16*(k/64) + k%16 (byte b: VGPR b/4, bits 8*(b%4))
//   FP4 (cbsz/blgp 4):       A[i][k] -> lane i + 16*(k/32), byte (k%32)/2, low nibble = even k
//   B[k][j]: the same maps with i -> j
//   scale of (row i, block kb) = byte opsel of the scale VGPR of lane i + 16*kb, value 2^(byte-127), 0xFF NaN
//   D = C + sum_kb 2^(sA-127) 2^(sB-127) sum_{k in kb} A[i][k] B[j][k]; C/D reg r of lane l = D[4*(l/16)+r][l%16]
//
// gfx942 v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (composable_kernel include/ck_tile/ops/gemm/warp/
// warp_gemm_attribute_mfma_impl.hpp, WarpGemmAttributeMfmaImpl_f32_16x16x32_f8_base: kAMLane = kBNLane = 16,
// kABKLane = 4, kABKPerLane = 8 -> A[i][k] in lane i + 16*(k/8), byte k%8 of the 64-bit operand; kCMLane = 4,
// kCNLane = 16, kCM1PerLane = 4 -> reg r of lane l = D[4*(l/16)+r][l%16]); operands are FNUZ fp8 (e4m3fnuz
// bias 8, e5m2fnuz bias 16, 0x80 = NaN, no Inf, no -0).
//
// The instructions accumulate in float64 and round once to fp32 (the hardware's internal order and precision
// are UNVERIFIED: the tests compare GEMM results with a tolerance). Build: g++ -std=c++17 -O1 -shared -fPIC
// -DSIMT_KERNEL=950|942 (the dense kernel's 14 builds), or with -DSIMT_GROUPED=1 -DA_FMT=.. -DB_FMT=.. -DMODE=..
// -DOUT_DTYPE=.. -DACCUM=.. the one build of gemm_mx_grouped_gfx950|942.hip (tests/test_grouped_gemm_amd_host.py),
// or with -DSIMT_DECODE=1 -DA_FMT=.. -DB_FMT=.. -DMT=.. the one build of gemm_mx_decode_gfx950|942.hip
// (tests/test_gemm_decode_amd_host.py), with -DSIMT_MOE=1 added of gemm_mx_decode_gfx950|942_moe.hip
// (tests/test_moe_gemm_amd_host.py).
#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define MXRT_HOST_TEST 1
#define MXRT_HOST_SIMT 1
#include "../../kernels_src/common/prelude.h"
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace simt {
enum State { RUN, WAIT_WAVE, WAIT_CTA, DONE };
struct Fiber {
  ucontext_t ctx;
  State state;
};
static std::vector<Fiber> fibers;
static std::vector<std::vector<char>> stacks;
static ucontext_t sched_ctx;
static u32 cur = 0, nthreads = 0;
static u32 bid_x = 0, bid_y = 0, bid_z = 0;
static void (*body)() = nullptr;
static char error[512] = "";
static bool failed = false;
static unsigned long long collectives = 0;

static void park(State s) {
  fibers[cur].state = s;
  swapcontext(&fibers[cur].ctx, &sched_ctx);
}
static void entry() {
  body();
  fibers[cur].state = DONE;
}
static void fail(const char* msg) {
  if (!failed) std::snprintf(error, sizeof error, "block (%u, %u, %u): %s", bid_x, bid_y, bid_z, msg);
  failed = true;
}

static bool run_block(u32 threads, int order, u32 seed) {
  nthreads = threads;
  fibers.assign(threads, Fiber{});
  if (stacks.size() < threads) stacks.resize(threads, std::vector<char>(1 << 17));
  for (u32 t = 0; t < threads; ++t) {
    getcontext(&fibers[t].ctx);
    fibers[t].ctx.uc_stack.ss_sp = stacks[t].data();
    fibers[t].ctx.uc_stack.ss_size = stacks[t].size();
    fibers[t].ctx.uc_link = &sched_ctx;
    makecontext(&fibers[t].ctx, entry, 0);
    fibers[t].state = RUN;
  }
  std::vector<u32> perm(threads);
  for (u32 round = 0;; ++round) {
    for (u32 i = 0; i < threads; ++i)
      perm[i] = order == 0 ? i : (order == 1 ? threads - 1 - i : (i * 97u + seed + round * 31u) % threads);
    for (u32 i = 0; i < threads; ++i) {
      const u32 t = perm[i];
      if (fibers[t].state != RUN) continue;
      cur = t;
      swapcontext(&sched_ctx, &fibers[t].ctx);
      if (failed) return false;
    }
    bool released = false;
    for (u32 w = 0; w * 64 < threads; ++w) {
      u32 waiting = 0, lanes = 0;
      for (u32 t = w * 64; t < threads && t < w * 64 + 64; ++t, ++lanes) waiting += fibers[t].state == WAIT_WAVE;
      if (waiting == lanes) {
        for (u32 t = w * 64; t < w * 64 + lanes; ++t) fibers[t].state = RUN;
        released = true;
      } else if (waiting) {
        fail("a wave operation (MFMA / permute) that not all 64 lanes of the wave reach");
        return false;
      }
    }
    if (released) continue;
    u32 at_barrier = 0, done = 0;
    for (u32 t = 0; t < threads; ++t) {
      at_barrier += fibers[t].state == WAIT_CTA;
      done += fibers[t].state == DONE;
    }
    if (done == threads) return true;
    if (at_barrier == threads) {
      for (u32 t = 0; t < threads; ++t) fibers[t].state = RUN;
      continue;
    }
    fail("a block barrier that some threads never reach (or reach after others exited)");
    return false;
  }
}
}  // namespace simt

#define MXRT_TID_X (simt::cur)
#define MXRT_BID_X (simt::bid_x)
#define MXRT_BID_Y (simt::bid_y)
inline void mxrt_sync() { simt::park(simt::WAIT_CTA); }

#include "../../kernels_src/gemm/amd_gemm.h"

// ---- element decoders, from the format definitions (MX_REFERENCE.md 1.1), independent of the device codecs ----
namespace emu {
// (E, M, bias) decode; `fnuz`: 0x80 is NaN and the all-ones exponent is an ordinary binade.
static double decode(u32 c, int ebits, int mbits, int bias, bool fnuz, bool has_inf) {
  const u32 sbit = 1u << (ebits + mbits), emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
  const u32 e = (c >> mbits) & emask, m = c & mmask;
  const double sign = (c & sbit) ? -1.0 : 1.0;
  if (fnuz && c == sbit) return NAN;
  if (!fnuz) {
    if (has_inf && e == emask) return m ? NAN : sign * INFINITY;  // e5m2
    if (!has_inf && ebits == 4 && e == emask && m == mmask) return NAN;  // e4m3 S.1111.111
  }
  if (e == 0) return sign * std::ldexp((double)m, 1 - bias - mbits);
  return sign * std::ldexp((double)((1u << mbits) | m), (int)e - bias - mbits);
}
// gfx950 cbsz/blgp codes: 0 e4m3, 1 e5m2, 4 e2m1 (OCP)
static double ocp(u32 c, int code) {
  if (code == 0) return decode(c, 4, 3, 7, false, false);
  if (code == 1) return decode(c, 5, 2, 15, false, true);
  return decode(c & 15u, 2, 1, 1, false, false);
}
// gfx942: 0 e4m3fnuz ("fp8"), 1 e5m2fnuz ("bf8")
static double fnuz(u32 c, int bf8) { return bf8 ? decode(c, 5, 2, 16, true, false) : decode(c, 4, 3, 8, true, false); }
static double e8m0(u32 b) { return b == 0xFFu ? NAN : std::ldexp(1.0, (int)b - 127); }

// 16x16x128 operand element (i, k) from the 64 lanes' 32 bytes each
static u32 elem950(const u8 (*reg)[32], int code, u32 i, u32 k) {
  if (code == 4) {
    const u8 b = reg[i + 16u * (k / 32u)][(k % 32u) / 2u];
    return (k % 2u) ? (b >> 4) : (b & 15u);
  }
  return reg[i + 16u * ((k % 64u) / 16u)][16u * (k / 64u) + k % 16u];
}
}  // namespace emu

namespace simt {
struct Post {
  u8 a[32], b[32];
  float c[4];
  u32 sa, sb;
  int kind, cbsz, blgp, opa, opb;
  u32 v;
};
static Post posts[1024];
}  // namespace simt

static void wave_check(int kind) {
  const u32 base = simt::cur & ~63u;
  const simt::Post& p0 = simt::posts[base];
  for (u32 l = 0; l < 64; ++l) {
    const simt::Post& p = simt::posts[base + l];
    if (p.kind != kind || p.cbsz != p0.cbsz || p.blgp != p0.blgp || p.opa != p0.opa || p.opb != p0.opb)
      simt::fail("lanes of one wave issued different wave operations / immediates");
  }
}

mxrt_v4f mxrt_host_mfma_scale(mxrt_v8i a, mxrt_v8i b, mxrt_v4f c, int cbsz, int blgp, int opsel_a, u32 scale_a,
                              int opsel_b, u32 scale_b) {
  using namespace simt;
  const u32 me = cur, lane = me & 63u, base = me & ~63u;
  Post& p = posts[me];
  for (int q = 0; q < 8; ++q) {
    std::memcpy(p.a + 4 * q, &a[q], 4);
    std::memcpy(p.b + 4 * q, &b[q], 4);
  }
  for (int r = 0; r < 4; ++r) p.c[r] = c[r];
  p.sa = scale_a;
  p.sb = scale_b;
  p.kind = 950;
  p.cbsz = cbsz;
  p.blgp = blgp;
  p.opa = opsel_a;
  p.opb = opsel_b;
  park(WAIT_WAVE);
  wave_check(950);
  u8 ra[64][32], rb[64][32];
  u32 sa[64], sb[64];
  for (u32 l = 0; l < 64; ++l) {
    std::memcpy(ra[l], posts[base + l].a, 32);
    std::memcpy(rb[l], posts[base + l].b, 32);
    sa[l] = posts[base + l].sa;
    sb[l] = posts[base + l].sb;
  }
  mxrt_v4f d;
  for (u32 r = 0; r < 4; ++r) {
    const u32 i = 4u * (lane / 16u) + r, j = lane % 16u;
    double sum = 0.0;
    for (u32 kb = 0; kb < 4; ++kb) {
      double blk = 0.0;
      for (u32 k = 32u * kb; k < 32u * kb + 32u; ++k)
        blk += emu::ocp(emu::elem950(ra, cbsz, i, k), cbsz) * emu::ocp(emu::elem950(rb, blgp, j, k), blgp);
      const double s = emu::e8m0((sa[i + 16u * kb] >> (8 * opsel_a)) & 0xFFu) *
                       emu::e8m0((sb[j + 16u * kb] >> (8 * opsel_b)) & 0xFFu);
      sum += s * blk;
    }
    d[r] = (float)((double)c[r] + sum);
  }
  ++collectives;
  park(WAIT_WAVE);
  return d;
}

mxrt_v4f mxrt_host_mfma_fp8(u64 a, u64 b, mxrt_v4f c, int a_bf8, int b_bf8) {
  using namespace simt;
  const u32 me = cur, lane = me & 63u, base = me & ~63u;
  Post& p = posts[me];
  std::memcpy(p.a, &a, 8);
  std::memcpy(p.b, &b, 8);
  for (int r = 0; r < 4; ++r) p.c[r] = c[r];
  p.kind = 942;
  p.cbsz = a_bf8;
  p.blgp = b_bf8;
  p.opa = p.opb = 0;
  park(WAIT_WAVE);
  wave_check(942);
  mxrt_v4f d;
  for (u32 r = 0; r < 4; ++r) {
    const u32 i = 4u * (lane / 16u) + r, j = lane % 16u;
    double sum = 0.0;
    for (u32 k = 0; k < 32u; ++k)
      sum += emu::fnuz(posts[base + i + 16u * (k / 8u)].a[k % 8u], a_bf8) *
             emu::fnuz(posts[base + j + 16u * (k / 8u)].b[k % 8u], b_bf8);
    d[r] = (float)((double)c[r] + sum);
  }
  ++collectives;
  park(WAIT_WAVE);
  return d;
}

u32 mxrt_host_bpermute(u32 src_lane, u32 v) {
  using namespace simt;
  const u32 me = cur, base = me & ~63u;
  posts[me].v = v;
  posts[me].kind = 1;
  posts[me].cbsz = posts[me].blgp = posts[me].opa = posts[me].opb = 0;
  park(WAIT_WAVE);
  wave_check(1);
  const u32 r = posts[base + (src_lane & 63u)].v;
  park(WAIT_WAVE);
  return r;
}

// Blocks run one after another and fibers switch only at synchronisation points, so plain read-modify-writes
// are atomic here.
void mxrt_host_atomic_add_f32(float* p, float v) { *p += v; }
u32 mxrt_host_atomic_inc(u32* p) { return (*p)++; }
static float h16_to_f32(u32 h, int out_dtype) {
  if (out_dtype == MXRT_OUT_BF16) return mxrt_f32_from_bits(h << 16);
  const u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  if (e == 31u) return mxrt_f32_from_bits(s | 0x7F800000u | (m << 13));
  if (e == 0u) return (s ? -1.0f : 1.0f) * std::ldexp((float)m, -24);
  return mxrt_f32_from_bits(s | ((e + 112u) << 23) | (m << 13));
}
// global_atomic_pk_add_bf16 / _f16 model: each half = round(old + new) in the 16-bit format (RNE)
void mxrt_host_atomic_pk_add_16(u32* p, u32 packed, int out_dtype) {
  const u32 old = *p;
  const float lo = h16_to_f32(old & 0xFFFFu, out_dtype) + h16_to_f32(packed & 0xFFFFu, out_dtype);
  const float hi = h16_to_f32(old >> 16, out_dtype) + h16_to_f32(packed >> 16, out_dtype);
  *p = mxrt_gemm_16(lo, out_dtype) | (mxrt_gemm_16(hi, out_dtype) << 16);
}

#if defined(SIMT_GROUPED)
// ---- the grouped kernel: one build per library (its defines from the command line) ---------------------------
#define THREADS 256
#if SIMT_KERNEL == 950
#include "../../kernels_src/gemm/gemm_mx_grouped_gfx950.hip"
#define SIMT_GROUPED_FN gemm_mx_grouped_gfx950
#else
#include "../../kernels_src/gemm/gemm_mx_grouped_gfx942.hip"
#define SIMT_GROUPED_FN gemm_mx_grouped_gfx942
#endif

namespace simt {
static const u8 *g_a, *g_sa, *g_b, *g_sb;
static void* g_out;
static const void* g_groups;
static u32 g_u[8];
static void run_grouped() {
  SIMT_GROUPED_FN(g_a, g_sa, g_b, g_sb, g_out, g_groups, g_u[0], g_u[1], g_u[2], g_u[3], g_u[4], g_u[5], g_u[6],
                  g_u[7]);
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }
extern "C" unsigned long long simt_collectives() { return simt::collectives; }

// u = {m, n, k, kb, num_groups, extra, flags, lens_i64} (the kernel's scalars); blocks in a scrambled order
// (order 2) or in launch order, every block's fibers in `order`.
extern "C" int simt_grouped(const u8* a, const u8* sa, const u8* b, const u8* sb, void* out, const void* groups,
                            const u32* u, int gx, int gy, int gz, int order) {
  simt::failed = false;
  simt::error[0] = 0;
  simt::g_a = a;
  simt::g_sa = sa;
  simt::g_b = b;
  simt::g_sb = sb;
  simt::g_out = out;
  simt::g_groups = groups;
  for (int i = 0; i < 8; ++i) simt::g_u[i] = u[i];
  simt::body = simt::run_grouped;
  const u64 total = (u64)gx * gy * gz;
  for (u64 i = 0; i < total; ++i) {
    const u64 b = order == 2 && total % 7919u != 0 ? (i * 7919u + 13u) % total : i;  // 7919 prime: a permutation
    simt::bid_x = (u32)(b % (u32)gx);
    simt::bid_y = (u32)((b / (u32)gx) % (u32)gy);
    simt::bid_z = (u32)(b / ((u64)gx * (u32)gy));
    if (!simt::run_block(THREADS, order, simt::bid_x * 7u + simt::bid_y * 13u + simt::bid_z * 5u)) return 1;
  }
  return 0;
}
#elif defined(SIMT_DECODE)
// ---- the decode kernel: one build per library (A_FMT, B_FMT, MT from the command line); with -DSIMT_MOE=1 its
// MoE twin gemm_mx_decode_gfx950|942_moe.hip instead (tests/test_moe_gemm_amd_host.py) ----------------------------
#define THREADS 256
#if defined(SIMT_MOE) && SIMT_KERNEL == 950
#include "../../kernels_src/gemm/gemm_mx_decode_gfx950_moe.hip"
#define SIMT_DECODE_FN gemm_mx_decode_gfx950_moe
#elif defined(SIMT_MOE)
#include "../../kernels_src/gemm/gemm_mx_decode_gfx942_moe.hip"
#define SIMT_DECODE_FN gemm_mx_decode_gfx942_moe
#elif SIMT_KERNEL == 950
#include "../../kernels_src/gemm/gemm_mx_decode_gfx950.hip"
#define SIMT_DECODE_FN gemm_mx_decode_gfx950
#else
#include "../../kernels_src/gemm/gemm_mx_decode_gfx942.hip"
#define SIMT_DECODE_FN gemm_mx_decode_gfx942
#endif

namespace simt {
static const u8 *d_a, *d_b, *d_sa, *d_sb;
static void* d_out;
static const i32 *d_ids, *d_eids, *d_ntpp;
static const float* d_tw;
static i32 d_u[9];
static void run_decode() {
#if defined(SIMT_MOE)
  SIMT_DECODE_FN(d_a, d_b, d_sa, d_sb, d_out, d_ids, d_eids, d_ntpp, d_tw, d_u[0], d_u[1], d_u[2], d_u[3], d_u[4],
                 d_u[5], d_u[6], d_u[7], d_u[8]);
#else
  SIMT_DECODE_FN(d_a, d_b, d_sa, d_sb, d_out, d_u[0], d_u[1], d_u[2], d_u[3], d_u[4], d_u[5], d_u[6], d_u[7]);
#endif
}

// Every block of the grid, in a scrambled order (order 2) or in launch order, every block's fibers in `order`.
static int run_grid(int gx, int gy, int gz, int order) {
  body = run_decode;
  const u64 total = (u64)gx * gy * gz;
  for (u64 i = 0; i < total; ++i) {
    const u64 b = order == 2 && total % 7919u != 0 ? (i * 7919u + 13u) % total : i;  // 7919 prime: a permutation
    bid_x = (u32)(b % (u32)gx);
    bid_y = (u32)((b / (u32)gx) % (u32)gy);
    bid_z = (u32)(b / ((u64)gx * (u32)gy));
    if (!run_block(THREADS, order, bid_x * 7u + bid_y * 13u + bid_z * 5u)) return 1;
  }
  return 0;
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }
extern "C" unsigned long long simt_collectives() { return simt::collectives; }

#if defined(SIMT_MOE)
// u = {m_act, n, k, e_num, numel, a_div, block_size, cap, out_dtype} (the kernel's scalars); tw may be null.
extern "C" int simt_moe(const u8* x, const u8* w, const u8* sx, const u8* sw, void* out, const i32* ids,
                        const i32* eids, const i32* ntpp, const float* tw, const i32* u, int gx, int gy, int gz,
                        int order) {
  simt::failed = false;
  simt::error[0] = 0;
  simt::d_a = x;
  simt::d_b = w;
  simt::d_sa = sx;
  simt::d_sb = sw;
  simt::d_out = out;
  simt::d_ids = ids;
  simt::d_eids = eids;
  simt::d_ntpp = ntpp;
  simt::d_tw = tw;
  for (int i = 0; i < 9; ++i) simt::d_u[i] = u[i];
  return simt::run_grid(gx, gy, gz, order);
}
#else
// u = {m, n, k, split_k, a_layout, b_layout, out_dtype, mode} (the kernel's scalars).
extern "C" int simt_decode(const u8* a, const u8* b, const u8* sa, const u8* sb, void* out, const i32* u, int gx,
                           int gy, int gz, int order) {
  simt::failed = false;
  simt::error[0] = 0;
  simt::d_a = a;
  simt::d_b = b;
  simt::d_sa = sa;
  simt::d_sb = sb;
  simt::d_out = out;
  for (int i = 0; i < 8; ++i) simt::d_u[i] = u[i];
  return simt::run_grid(gx, gy, gz, order);
}
#endif
#else
// ---- the kernels, once per format pair (namespaces keep the seven builds apart) ---------------------------------
#define THREADS 256
#if SIMT_KERNEL == 950
#define MXRT_KFILE "../../kernels_src/gemm/gemm_mx_gfx950.hip"
#else
#define MXRT_KFILE "../../kernels_src/gemm/gemm_mx_gfx942.hip"
#endif

typedef void (*KernelFn)(const u8*, const u8*, const u8*, const u8*, void*, float*, u32*, i32, i32, i32, i32, i32,
                         i32, i32, i32, i32);

// The extern "C" symbol is renamed per build (pair, EDGE) so the fourteen builds can live in one library.
#define A_FMT 0
#define B_FMT 0
#define EDGE 0
#define gemm_mx_gfx950 k950_p00e0
#define gemm_mx_gfx942 k942_p00e0
namespace p00e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 0
#define B_FMT 1
#define EDGE 0
#define gemm_mx_gfx950 k950_p01e0
#define gemm_mx_gfx942 k942_p01e0
namespace p01e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 1
#define B_FMT 0
#define EDGE 0
#define gemm_mx_gfx950 k950_p10e0
#define gemm_mx_gfx942 k942_p10e0
namespace p10e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 1
#define B_FMT 1
#define EDGE 0
#define gemm_mx_gfx950 k950_p11e0
#define gemm_mx_gfx942 k942_p11e0
namespace p11e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 4
#define B_FMT 4
#define EDGE 0
#define gemm_mx_gfx950 k950_p44e0
#define gemm_mx_gfx942 k942_p44e0
namespace p44e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 0
#define B_FMT 4
#define EDGE 0
#define gemm_mx_gfx950 k950_p04e0
#define gemm_mx_gfx942 k942_p04e0
namespace p04e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 4
#define B_FMT 0
#define EDGE 0
#define gemm_mx_gfx950 k950_p40e0
#define gemm_mx_gfx942 k942_p40e0
namespace p40e0 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 0
#define B_FMT 0
#define EDGE 1
#define gemm_mx_gfx950 k950_p00e1
#define gemm_mx_gfx942 k942_p00e1
namespace p00e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 0
#define B_FMT 1
#define EDGE 1
#define gemm_mx_gfx950 k950_p01e1
#define gemm_mx_gfx942 k942_p01e1
namespace p01e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 1
#define B_FMT 0
#define EDGE 1
#define gemm_mx_gfx950 k950_p10e1
#define gemm_mx_gfx942 k942_p10e1
namespace p10e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 1
#define B_FMT 1
#define EDGE 1
#define gemm_mx_gfx950 k950_p11e1
#define gemm_mx_gfx942 k942_p11e1
namespace p11e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 4
#define B_FMT 4
#define EDGE 1
#define gemm_mx_gfx950 k950_p44e1
#define gemm_mx_gfx942 k942_p44e1
namespace p44e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 0
#define B_FMT 4
#define EDGE 1
#define gemm_mx_gfx950 k950_p04e1
#define gemm_mx_gfx942 k942_p04e1
namespace p04e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE
#define A_FMT 4
#define B_FMT 0
#define EDGE 1
#define gemm_mx_gfx950 k950_p40e1
#define gemm_mx_gfx942 k942_p40e1
namespace p40e1 {
#include MXRT_KFILE
}
#undef gemm_mx_gfx950
#undef gemm_mx_gfx942
#undef A_FMT
#undef B_FMT
#undef EDGE

static KernelFn kernel_for(int af, int bf, int edge) {
  switch (edge * 100 + af * 10 + bf) {
#if SIMT_KERNEL == 950
    case 0: return p00e0::k950_p00e0;
#else
    case 0: return p00e0::k942_p00e0;
#endif
#if SIMT_KERNEL == 950
    case 1: return p01e0::k950_p01e0;
#else
    case 1: return p01e0::k942_p01e0;
#endif
#if SIMT_KERNEL == 950
    case 10: return p10e0::k950_p10e0;
#else
    case 10: return p10e0::k942_p10e0;
#endif
#if SIMT_KERNEL == 950
    case 11: return p11e0::k950_p11e0;
#else
    case 11: return p11e0::k942_p11e0;
#endif
#if SIMT_KERNEL == 950
    case 44: return p44e0::k950_p44e0;
#else
    case 44: return p44e0::k942_p44e0;
#endif
#if SIMT_KERNEL == 950
    case 4: return p04e0::k950_p04e0;
#else
    case 4: return p04e0::k942_p04e0;
#endif
#if SIMT_KERNEL == 950
    case 40: return p40e0::k950_p40e0;
#else
    case 40: return p40e0::k942_p40e0;
#endif
#if SIMT_KERNEL == 950
    case 100: return p00e1::k950_p00e1;
#else
    case 100: return p00e1::k942_p00e1;
#endif
#if SIMT_KERNEL == 950
    case 101: return p01e1::k950_p01e1;
#else
    case 101: return p01e1::k942_p01e1;
#endif
#if SIMT_KERNEL == 950
    case 110: return p10e1::k950_p10e1;
#else
    case 110: return p10e1::k942_p10e1;
#endif
#if SIMT_KERNEL == 950
    case 111: return p11e1::k950_p11e1;
#else
    case 111: return p11e1::k942_p11e1;
#endif
#if SIMT_KERNEL == 950
    case 144: return p44e1::k950_p44e1;
#else
    case 144: return p44e1::k942_p44e1;
#endif
#if SIMT_KERNEL == 950
    case 104: return p04e1::k950_p04e1;
#else
    case 104: return p04e1::k942_p04e1;
#endif
#if SIMT_KERNEL == 950
    case 140: return p40e1::k950_p40e1;
#else
    case 140: return p40e1::k942_p40e1;
#endif
    default: return nullptr;
  }
}

namespace simt {
static KernelFn kfn;
static const u8 *ka, *kb, *ksa, *ksb;
static void* kout;
static float* kws;
static u32* kcnt;
static i32 kargs[9];
static void run_kernel() {
  kfn(ka, kb, ksa, ksb, kout, kws, kcnt, kargs[0], kargs[1], kargs[2], kargs[3], kargs[4], kargs[5], kargs[6],
      kargs[7], kargs[8]);
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }
extern "C" unsigned long long simt_collectives() { return simt::collectives; }

// Launch the build (a_fmt, b_fmt, EDGE) on grid (gx, gy, gz); args as in the kernel header.
extern "C" int simt_gemm(int a_fmt, int b_fmt, int edge, const u8* a, const u8* b, const u8* sa, const u8* sb, void* out,
                         float* ws, u32* counters, int m, int n, int k, int split_k, int a_layout, int b_layout,
                         int out_dtype, int mode, int flags, int gx, int gy, int gz, int order) {
  simt::failed = false;
  simt::error[0] = 0;
  simt::kfn = kernel_for(a_fmt, b_fmt, edge);
  if (!simt::kfn) {
    std::snprintf(simt::error, sizeof simt::error, "no kernel for (%d, %d, EDGE=%d)", a_fmt, b_fmt, edge);
    return 1;
  }
  simt::ka = a;
  simt::kb = b;
  simt::ksa = sa;
  simt::ksb = sb;
  simt::kout = out;
  simt::kws = ws;
  simt::kcnt = counters;
  const i32 args[9] = {m, n, k, split_k, a_layout, b_layout, out_dtype, mode, flags};
  std::memcpy(simt::kargs, args, sizeof args);
  simt::body = simt::run_kernel;
  for (u32 z = 0; z < (u32)gz; ++z)
    for (u32 y = 0; y < (u32)gy; ++y)
      for (u32 x = 0; x < (u32)gx; ++x) {
        simt::bid_x = x;
        simt::bid_y = y;
        simt::bid_z = z;
        if (!simt::run_block(THREADS, order, x * 7u + y * 13u + z * 5u)) return 1;
      }
  return 0;
}

#endif  // SIMT_GROUPED / SIMT_DECODE

// One instruction on given registers, for the emulator's own tests: a, b [64][32] bytes, c [64][4], sa, sb [64]
// (gfx950) or a, b [64][8] (gfx942); d [64][4]. Runs one wave of fibers around the collective.
namespace simt {
static const u8 *ta, *tb;
static const float* tc;
static const u32 *tsa, *tsb;
static float* td;
static int tkind, tcb, tbl, toa, tob;
static void run_instr() {
  const u32 l = cur;
  mxrt_v4f c = {tc[4 * l], tc[4 * l + 1], tc[4 * l + 2], tc[4 * l + 3]}, d;
  if (tkind == 950) {
    mxrt_v8i a, b;
    for (int q = 0; q < 8; ++q) {
      std::memcpy(&a[q], ta + 32 * l + 4 * q, 4);
      std::memcpy(&b[q], tb + 32 * l + 4 * q, 4);
    }
    d = mxrt_host_mfma_scale(a, b, c, tcb, tbl, toa, tsa[l], tob, tsb[l]);
  } else {
    u64 a, b;
    std::memcpy(&a, ta + 8 * l, 8);
    std::memcpy(&b, tb + 8 * l, 8);
    d = mxrt_host_mfma_fp8(a, b, c, tcb, tbl);
  }
  for (int r = 0; r < 4; ++r) td[4 * l + r] = d[r];
}
}  // namespace simt

extern "C" int simt_instr(int kind, const u8* a, const u8* b, const float* c, const u32* sa, const u32* sb, int cbsz,
                          int blgp, int opsel_a, int opsel_b, float* d) {
  simt::failed = false;
  simt::error[0] = 0;
  simt::ta = a;
  simt::tb = b;
  simt::tc = c;
  simt::tsa = sa;
  simt::tsb = sb;
  simt::td = d;
  simt::tkind = kind;
  simt::tcb = cbsz;
  simt::tbl = blgp;
  simt::toa = opsel_a;
  simt::tob = opsel_b;
  simt::body = simt::run_instr;
  return simt::run_block(64, 0, 0) ? 0 : 1;
}
