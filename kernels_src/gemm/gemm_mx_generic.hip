// kernel   gemm_mx_generic                                                            (extern "C")
// computes out[i,j] (+)= sum_kb 2^(sa[i,kb]-127) * 2^(sb[j,kb]-127) * sum_{k in block kb} A[i,k] * B[j,k] over the
//          scale blocks kb in [z*KB/split_k, (z+1)*KB/split_k) of split z = blockIdx.z (KB = ceil(k/32)); fp32 FMA
//          on exactly decoded codes, one scale application per 32-block; loads past k read zero (no K epilogue),
//          rows/cols past m/n are masked on store. ATOMIC=0: plain stores, fp32 slice z of out [split_k,m,n] or
//          (split_k == 1) out [m,n] of OUT_DTYPE. ATOMIC=1: atomic adds into out [m,n] (fp32 atomicAdd, packed
//          bf16x2 / f16x2 atomics), which the op zeroes first.
// args     const u8* a [m, row bytes] | const u8* sa (scale storage of layout la) | const u8* b [n, row bytes] |
//          const u8* sb (layout lb) | void* out | u32 m, u32 n, u32 k, u32 split_k | u32 la, u32 lb (layout codes
//          MXRT_SCALE_LAYOUT_NONE .. _DEEPGEMM_UE8M0) | u32 sa_shift, u32 sb_shift (log2 bytes per stored scale: 0, or
//          2 for uint32 turbo16x4) | u32 flags (MXRT_GEMM_FLAG_VEC_A / _VEC_B: a / b rows 16-byte aligned) |
//          const u32* gate (null, or a word: the grid returns at once while it is 0; sm90_cublas's fallback)
// grid     (ceil(n/64), ceil(m/128), split_k)   block (THREADS,1,1)   smem 24.8 KB static
// defines  THREADS, FMT_A, FMT_B (MXRT_FMT_*), OUT_DTYPE (MXRT_OUT_*), ATOMIC       set by mxrt/ops/gemm_generic.py
//          (variants: mxrt/ops/gemm_kernels.py; every code from mx_codes.h)
// requires THREADS == 256; ceil(m/128), split_k <= 65535; scale storage offsets < 2^32; ATOMIC with a 16-bit
//          OUT_DTYPE: out 4-byte aligned and m*n even (every packed word inside out)  checked by gemm_generic.py
#include "gemm_generic_tile.h"

#if !defined(THREADS) || !defined(FMT_A) || !defined(FMT_B) || !defined(OUT_DTYPE) || !defined(ATOMIC)
#error "THREADS, FMT_A, FMT_B, OUT_DTYPE and ATOMIC must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");

// AMD: 8x4 fp32 accumulators + 8x4 partial sums + prefetched codes need ~130-170 VGPRs; the default budget for
// a 256-thread block (128) spilled the 16-bit output builds. Exactly THREADS threads, one wave per SIMD minimum.
// (A pragma, so the kernel's declaration keeps the form the symbol scan of mxrt/runtime/source.py reads.)
#if defined(MXRT_HIP)
#pragma clang attribute push(__attribute__((amdgpu_flat_work_group_size(THREADS, THREADS), amdgpu_waves_per_eu(1, 1))), \
                             apply_to = function)
#endif
extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mx_generic(const u8* __restrict__ a, const u8* __restrict__ sa, const u8* __restrict__ b,
                    const u8* __restrict__ sb, void* __restrict__ out, u32 m, u32 n, u32 k, u32 split_k, u32 la,
                    u32 lb, u32 sa_shift, u32 sb_shift, u32 flags, const u32* __restrict__ gate) {
  if (gate != nullptr && *gate == 0u) return;  // the whole grid, before any barrier
  const u32 tid = MXRT_TID_X, tx = tid % 16u, ty = tid / 16u;
  const u32 n0 = MXRT_BID_X * BN, m0 = MXRT_BID_Y * BM;
  const u32 z = MXRT_BID_Z;
  const u32 kbt = (k + BK - 1) / BK;
  const u32 kb0 = (u32)((u64)z * kbt / split_k), kb1 = (u32)((u64)(z + 1u) * kbt / split_k);

  constexpr u32 A_ROW_BITS = FMT_A == MXRT_FMT_E2M1 ? 4 : 8, B_ROW_BITS = FMT_B == MXRT_FMT_E2M1 ? 4 : 8;
  const u64 a_row_bytes = A_ROW_BITS == 4 ? (k + 1u) / 2u : k, b_row_bytes = B_ROW_BITS == 4 ? (k + 1u) / 2u : k;
  const GemmTile t{a, sa, b, sb, m, n, k, kbt, kbt, a_row_bytes, b_row_bytes, la, lb, sa_shift, sb_shift, flags,
                   m0, n0, kb0, kb1};

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  gemm_generic_mainloop(t, acc);

  // Epilogue: masked stores (or atomics) of the 8 x 4 micro-tile.
  const u64 mn = (u64)m * n;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const u32 r = m0 + 8u * ty + i;
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const u32 c = n0 + 2u * tx + 32u * jj;
      if (r >= m || c >= n) continue;
      const bool pair = c + 1u < n;
      const u64 idx = (u64)r * n + c;
      const float v0 = acc[i][2 * jj], v1 = acc[i][2 * jj + 1];
#if ATOMIC
#if OUT_DTYPE == MXRT_OUT_F32
      mxrt_atomic_add_f32((float*)out + idx, v0);
      if (pair) mxrt_atomic_add_f32((float*)out + idx + 1u, v1);
#else
      u16* o = (u16*)out;
      if (pair && (idx & 1u) == 0) {
        mxrt_atomic_add_pk16<OUT_DTYPE>((u32*)(o + idx), v0, v1);
      } else {
        mxrt_atomic_add_16<OUT_DTYPE>(o + idx, v0);
        if (pair) mxrt_atomic_add_16<OUT_DTYPE>(o + idx + 1u, v1);
      }
#endif
#else
#if OUT_DTYPE == MXRT_OUT_F32
      float* o = (float*)out + (u64)z * mn;
      o[idx] = v0;
      if (pair) o[idx + 1u] = v1;
#else
      u16* o = (u16*)out;
      o[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v0);
      if (pair) o[idx + 1u] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v1);
#endif
#endif
    }
  }
  (void)mn;
}
#if defined(MXRT_HIP)
#pragma clang attribute pop
#endif
