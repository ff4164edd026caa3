// kernel   kgrouped_to_bf16                                                           (extern "C")
// computes out[r, P[g] + j] = bf16(code(q[P[g] rows + r (P[g+1] - P[g]) + j]) * f), j < P[g+1] - P[g]: DeepGEMM's
//          k-grouped operand (group g a K-major [rows, K_g] block at P[g] rows) as one [rows, total] matrix, exactly;
//          f = 2^(s[r, (P[g] + j) / 32] - 127) with SCALED 1 (E8M0 per 32 columns), 1 with SCALED 0 (codes only);
//          gate[0] |= 1 where a block leaves the bf16 GEMM window (s outside e4m3 [10, 134] / e5m2 [17, 142], 255
//          included) or holds a NaN / Inf code, |= 4 where an end is not a multiple of align (32 or 128) or past total
// args     const u8* q | const u8* s [rows, total / 32] (SCALED 1; else null) | u16* out [rows, total] bf16 | const
//          i32* ends [G] (P[g + 1]) | u32* gate | u32 rows, total, G, align (MODE 2 GEMMs need 128, chunks 32)
// grid     (min(ceil(rows * total / 16 / THREADS), 2^20),1,1)   block (THREADS,1,1)   smem static (MXRT_MAX_GROUPS) x 4
// defines  THREADS (256), EFMT (MXRT_FMT_E4M3 / _E5M2), SCALED (0 / 1)   set by mxrt/ops/grouped_wgrad_bf16.py
// requires sm_90a; q, out 16-byte aligned; total % 32 == 0, align % 32 == 0; rows total < 2^40; G <= MXRT_MAX_GROUPS
//                                                                     checked by mxrt/ops/grouped_wgrad_bf16.py
//
// A grid-stride loop over 16-code chunks (16 bytes in, 32 out): a chunk never straddles a group (ends % 32 == 0, else
// the gate), its group found by a binary search of the ends in shared memory. Where the gate is raised the output is
// unspecified: the caller's gated generic kernel recomputes every result.
#include "../common/mx_dequant.h"

#if !defined(THREADS) || !defined(EFMT) || !defined(SCALED)
#error "THREADS, EFMT and SCALED must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(EFMT == MXRT_FMT_E4M3 || EFMT == MXRT_FMT_E5M2, "EFMT: e4m3 or e5m2 codes");
MXRT_STATIC_ASSERT(SCALED == 0 || SCALED == 1, "SCALED: 0 (codes) or 1 (E8M0 per 32 folded in)");

#if defined(MXRT_CUDA)
#define KG_SH (EFMT == MXRT_FMT_E4M3 ? 4 : 3)          // mxrt_fp8x4_to_bf16's shift
#define KG_BIAS (EFMT == MXRT_FMT_E4M3 ? 120u : 112u)  // ... its codes read as value x 2^-bias

extern "C" __global__ void __launch_bounds__(THREADS)
    kgrouped_to_bf16(const u8* __restrict__ q, const u8* __restrict__ s, u16* __restrict__ out,
                     const i32* __restrict__ ends, u32* __restrict__ gate, u32 rows, u32 total, u32 G, u32 align) {
  __shared__ i32 e_s[MXRT_MAX_GROUPS];
  u32 odd = 0u;  // an end this layout cannot take (every CTA checks all: chunks must not straddle groups)
  for (u32 i = MXRT_TID_X; i < G; i += THREADS) {
    const i32 e = ends[i];
    e_s[i] = e;
    odd |= (e < 0 || (u32)e % align != 0u || (u32)e > total) ? 1u : 0u;
  }
  if (__syncthreads_or(odd)) {
    if (MXRT_BID_X == 0u && MXRT_TID_X == 0u) atomicOr(gate, 4u);
    return;  // uniform: the whole CTA
  }
  using Fmt = DqFmt<EFMT>;
  u32 bad = 0u;
  const u32 cpr = total / 16u;
  const u64 chunks = (u64)rows * cpr, step = (u64)THREADS * gridDim.x;
  for (u64 c = (u64)MXRT_BID_X * THREADS + MXRT_TID_X; c < chunks; c += step) {
    const u32 r = (u32)(c / cpr), j0 = (u32)(c % cpr) * 16u;
    // group g: the first end past j0 (columns at or past the last end belong to no group: zeros)
    u32 lo = 0u, hi = G;
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2u;
      if ((u32)e_s[mid] > j0) hi = mid; else lo = mid + 1u;
    }
    uint4 o0 = {0u, 0u, 0u, 0u}, o1 = {0u, 0u, 0u, 0u};
    if (lo < G) {
      const u32 p0 = lo == 0u ? 0u : (u32)e_s[lo - 1u], kg = (u32)e_s[lo] - p0;
      const uint4 w = *reinterpret_cast<const uint4*>(q + (u64)p0 * rows + (u64)r * kg + (j0 - p0));
      const u32 sp = mxrt_fp8_special4<EFMT>(w.x) | mxrt_fp8_special4<EFMT>(w.y) | mxrt_fp8_special4<EFMT>(w.z) |
                     mxrt_fp8_special4<EFMT>(w.w);
      u32 sc = 127u;
#if SCALED
      sc = s[(u64)r * (total / 32u) + j0 / 32u];
#endif
      bad |= (sp != 0u || sc < Fmt::WIN_LO || sc > Fmt::WIN_HI) ? 1u : 0u;
      const u32 f = (sc + KG_BIAS) << 7, f2 = f | (f << 16);  // bf16 2^(s - 127 + bias), twice (finite in the window)
      mxrt_fp8x4_to_bf16<KG_SH>(w.x, f2, o0.x, o0.y);
      mxrt_fp8x4_to_bf16<KG_SH>(w.y, f2, o0.z, o0.w);
      mxrt_fp8x4_to_bf16<KG_SH>(w.z, f2, o1.x, o1.y);
      mxrt_fp8x4_to_bf16<KG_SH>(w.w, f2, o1.z, o1.w);
    }
    uint4* dst = reinterpret_cast<uint4*>(out + (u64)r * total + j0);
    dst[0] = o0;
    dst[1] = o1;
  }
  if (bad) atomicOr(gate, bad);
}
#endif  // MXRT_CUDA
