// kernel   moe_combine                                                                         (extern "C")
// computes out[t, c] = bf16( sum_{j<k} w[t*k + j] * float(y[src[t*k + j], c]) ): every product rounded to fp32,
//          summed in fp32 in slot order (acc = p_0, then acc = acc + p_j for j = 1..k-1; never an fma), rounded
//          once to bf16 (RNE; a NaN sum is written as 0x7FC0). The MoE combine of mxrt.ep (mxrt.moe_combine; numpy
//          twin mxrt.layouts.ep.moe_combine). Items (t, c-vector) grid-stride; a pair whose src lies outside [0, R)
//          is never read: it contributes a NaN row, so the token's row comes out NaN (no fault, no host check)
// args     const u16* y (bf16 bits, row r at y + r*ldy) | const void* src [T*k] (IDX_BYTES each, signed) |
//          const float* w [T*k] | u16* out [T, n] (bf16 bits, contiguous) | i64 R, i64 T, i32 k, i64 n, i64 ldy
// grid     (min(ceil(T * n / VW / THREADS), MAX_CTAS),1,1)   block (THREADS,1,1)   smem 0      (VW = VEC ? 8 : 1)
// defines  THREADS, VEC (1: 8 bf16 per 16-byte access; 0: one bf16 per access), IDX_BYTES (4 or 8)
//                                                 set by mxrt/ops/moe_combine.py from mxrt/ops/moe_kernels.py
// requires k >= 1, T >= 1, n >= 1; VEC 1: n % 8 == 0, ldy % 8 == 0, y and out 16-byte aligned; 64-bit offsets
//          throughout (R*ldy and T*n may pass 2^31)                                 checked by mxrt/ops/moe_combine.py
#include "../common/mx_warp.h"

#if !defined(THREADS) || !defined(VEC) || !defined(IDX_BYTES)
#error "THREADS, VEC and IDX_BYTES must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");
MXRT_STATIC_ASSERT(VEC == 0 || VEC == 1, "VEC: 0 (scalar) or 1 (16-byte vectors)");
MXRT_STATIC_ASSERT(IDX_BYTES == 4 || IDX_BYTES == 8, "IDX_BYTES: int32 or int64 src");

#define MOE_COMBINE_VW (VEC ? 8 : 1)  // bf16 values per access
#define MOE_COMBINE_JB 8              // slots whose rows are loaded before any is summed (loads in flight)
#define MOE_COMBINE_NAN_BITS 0x7FC07FC0u

// fp32 -> bf16 bits, round to nearest even; any NaN -> 0x7FC0 (one bit pattern on every target: the GPU's own
// NaN payloads differ from the host's), overflow -> +-Inf.
MXRT_DEVICE u32 moe_combine_bf16(float f) {
  const u32 x = mxrt_as_u32(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}

MXRT_DEVICE u64 moe_combine_src(const void* src, u64 i) {
#if IDX_BYTES == 8
  return (u64)((const i64*)src)[i];  // negative ids wrap to >= 2^63: out of range
#else
  return (u64)(i64)((const i32*)src)[i];
#endif
}

#if VEC
typedef mxrt_u32x4 MoeVec;
MXRT_DEVICE u32 moe_half(const MoeVec& v, u32 e) {
  const u32 w = e < 4 ? (e < 2 ? v.x : v.y) : (e < 6 ? v.z : v.w);
  return (e & 1u) ? (w >> 16) : (w & 0xFFFFu);
}
MXRT_DEVICE MoeVec moe_load(const u16* p) { return *(const MoeVec*)p; }
MXRT_DEVICE MoeVec moe_nan_row() {
  MoeVec v;
  v.x = v.y = v.z = v.w = MOE_COMBINE_NAN_BITS;
  return v;
}
#else
typedef u32 MoeVec;
MXRT_DEVICE u32 moe_half(const MoeVec& v, u32) { return v; }
MXRT_DEVICE MoeVec moe_load(const u16* p) { return (u32)*p; }
MXRT_DEVICE MoeVec moe_nan_row() { return 0x7FC0u; }
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
    moe_combine(const u16* __restrict__ y, const void* __restrict__ src, const float* __restrict__ w,
                u16* __restrict__ out, i64 R, i64 T, i32 k, i64 n, i64 ldy) {
  const u64 nv = (u64)n / MOE_COMBINE_VW;  // accesses per row
  const u64 items = (u64)T * nv;
  const u64 stride = (u64)MXRT_NBID_X * THREADS;
  const u32 kk = (u32)k;
  for (u64 it = (u64)MXRT_BID_X * THREADS + MXRT_TID_X; it < items; it += stride) {
    const u64 t = it / nv;
    const u64 col = (it - t * nv) * MOE_COMBINE_VW;
    const u64 pair0 = t * kk;
    float acc[MOE_COMBINE_VW] = {};  // slot 0 overwrites it (acc = p_0: a -0 product stays -0)
    for (u32 j0 = 0; j0 < kk; j0 += MOE_COMBINE_JB) {
      MoeVec v[MOE_COMBINE_JB];
      float wj[MOE_COMBINE_JB];
#pragma unroll
      for (u32 u = 0; u < MOE_COMBINE_JB; ++u) {
        if (j0 + u < kk) {
          const u64 s = moe_combine_src(src, pair0 + j0 + u);
          wj[u] = w[pair0 + j0 + u];
          v[u] = s < (u64)R ? moe_load(y + s * (u64)ldy + col) : moe_nan_row();
        }
      }
#pragma unroll
      for (u32 u = 0; u < MOE_COMBINE_JB; ++u) {
        if (j0 + u < kk) {
#pragma unroll
          for (u32 e = 0; e < MOE_COMBINE_VW; ++e) {
            const float p = mxrt_fmul(wj[u], mxrt_as_f32(moe_half(v[u], e) << 16));
            acc[e] = (j0 + u == 0) ? p : mxrt_fadd(acc[e], p);
          }
        }
      }
    }
    u16* o = out + t * (u64)n + col;
#if VEC
    MoeVec r;
    r.x = moe_combine_bf16(acc[0]) | (moe_combine_bf16(acc[1]) << 16);
    r.y = moe_combine_bf16(acc[2]) | (moe_combine_bf16(acc[3]) << 16);
    r.z = moe_combine_bf16(acc[4]) | (moe_combine_bf16(acc[5]) << 16);
    r.w = moe_combine_bf16(acc[6]) | (moe_combine_bf16(acc[7]) << 16);
    *(MoeVec*)o = r;
#else
    *o = (u16)moe_combine_bf16(acc[0]);
#endif
  }
}
