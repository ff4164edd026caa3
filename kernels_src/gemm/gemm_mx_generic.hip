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
//          2 for uint32 turbo16x4) | u32 flags (MXRT_GEMM_FLAG_VEC_A / _VEC_B: a / b rows 16-byte aligned)
// grid     (ceil(n/64), ceil(m/128), split_k)   block (THREADS,1,1)   smem 24.8 KB static
// defines  THREADS, FMT_A, FMT_B (MXRT_FMT_*), OUT_DTYPE (MXRT_OUT_*), ATOMIC       set by mxrt/ops/gemm_generic.py
//          (variants: mxrt/ops/gemm_kernels.py; every code from mx_codes.h)
// requires THREADS == 256; ceil(m/128), split_k <= 65535; scale storage offsets < 2^32; ATOMIC with a 16-bit
//          OUT_DTYPE: out 4-byte aligned and m*n even (every packed word inside out)  checked by gemm_generic.py
#include "../common/mx_gemm.h"
#include "../common/scale_layouts.h"

#if !defined(THREADS) || !defined(FMT_A) || !defined(FMT_B) || !defined(OUT_DTYPE) || !defined(ATOMIC)
#error "THREADS, FMT_A, FMT_B, OUT_DTYPE and ATOMIC must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "THREADS: the tile mapping below is written for 256 threads");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");

#define BM 128  // rows of A per tile: thread (ty, tx) owns rows 8*ty + i, i < 8
#define BN 64   // rows of B (columns of out) per tile: columns 2*tx + (j & 1) + 32*(j >> 1), j < 4
#define BK 32   // one E8M0 scale block per K step

struct __attribute__((aligned(16))) gemm_f4 { float x, y, z, w; };
struct __attribute__((aligned(8))) gemm_f2 { float x, y; };

// E element codes of one row, starting at element k0 (a multiple of E), packed little-endian into words
// (8 bits per fp8 code, 4 per e2m1 code); elements at or past k read as code 0 (+0), a null row as all zero.
template <int FMT, int E>
struct GemmChunk {
  static constexpr int BITS = FMT == MXRT_FMT_E2M1 ? 4 : 8;
  static constexpr int BYTES = E * BITS / 8;
  static constexpr int WORDS = (BYTES + 3) / 4;
  u32 w[WORDS];

  MXRT_DEVICE void load(const u8* __restrict__ row, u32 k0, u32 k, bool vec) {
    #pragma unroll
    for (int i = 0; i < WORDS; ++i) w[i] = 0;
    if (row == nullptr) return;
    const u8* p = row + (BITS == 4 ? k0 / 2 : k0);
    if (vec && k0 + E <= k) {  // whole chunk inside the row, row 16-byte aligned: one vector load
      if (BYTES == 16) {
        const mxrt_u32x4 v = *(const mxrt_u32x4*)p;
        w[0] = v.x, w[1] = v.y, w[2 % WORDS] = v.z, w[3 % WORDS] = v.w;
      } else if (BYTES == 8) {
        const u64 v = *(const u64*)p;
        w[0] = (u32)v, w[1 % WORDS] = (u32)(v >> 32);
      } else {
        w[0] = *(const u32*)p;
      }
      return;
    }
    #pragma unroll
    for (int e = 0; e < E; ++e) {
      if (k0 + (u32)e < k) {
        const u32 c = BITS == 4 ? (p[e / 2] >> ((e & 1) * 4)) & 15u : p[e];
        w[(e * BITS) / 32] |= c << ((e * BITS) % 32);
      }
    }
  }

  MXRT_DEVICE u32 code(int e) const { return (w[(e * BITS) / 32] >> ((e * BITS) % 32)) & ((1u << BITS) - 1u); }
};

// Byte offset of scale S[r, c] of a [rows, cols] scale matrix in layout `code` (run-time: the offset is computed
// once per row per K step, so a switch costs nothing measurable and saves 25x the kernel builds).
MXRT_DEVICE u32 gemm_scale_offset(u32 code, u32 r, u32 c, u32 rows, u32 cols) {
  switch (code) {
    case MXRT_SCALE_LAYOUT_AITER32X8:
      return MxrtScaleLayout<MXRT_SCALE_LAYOUT_AITER32X8>(rows, cols).offset(r, c);
    case MXRT_SCALE_LAYOUT_TURBO16X4:
      return MxrtScaleLayout<MXRT_SCALE_LAYOUT_TURBO16X4>(rows, cols).offset(r, c);
    case MXRT_SCALE_LAYOUT_CUBLAS128X4:
      return MxrtScaleLayout<MXRT_SCALE_LAYOUT_CUBLAS128X4>(rows, cols).offset(r, c);
    case MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0:
      return MxrtScaleLayout<MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0>(rows, cols).offset(r, c);
    default:
      return r * cols + c;
  }
}

MXRT_DEVICE u32 gemm_scale(const u8* __restrict__ s, u32 code, u32 shift, u32 r, u32 c, u32 rows, u32 cols) {
  return s[(u64)gemm_scale_offset(code, r, c, rows, cols) << shift];
}

// What one thread loads per K step: its A and B code chunks and (threads 0..BM+BN-1) one scale byte. Loader
// roles: A row tid % 128, elements [16 * (tid / 128), +16) of the step; B row tid % 64, elements [8 * (tid / 64),
// +8); scales: threads 0..127 the A rows, 128..191 the B rows (rows past m / n read 127, never used).
struct GemmLoader {
  GemmChunk<FMT_A, 16> ca;
  GemmChunk<FMT_B, 8> cb;
  u32 s_reg;
  const u8* a_row;
  const u8* b_row;
  const u8* s_ptr;
  u32 a_k, b_k, s_code, s_shift, s_row, s_rows, kbt, k;
  bool vec_a, vec_b, has_scale;

  MXRT_DEVICE void load(u32 kb) {
    ca.load(a_row, kb * BK + a_k, k, vec_a);
    cb.load(b_row, kb * BK + b_k, k, vec_b);
    s_reg = has_scale ? gemm_scale(s_ptr, s_code, s_shift, s_row, kb, s_rows, kbt) : 127u;
  }
};

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
                    u32 lb, u32 sa_shift, u32 sb_shift, u32 flags) {
  __shared__ __attribute__((aligned(16))) float As[BK][BM];  // decoded A, K-major: As[kk][row]
  __shared__ __attribute__((aligned(16))) float Bs[BK][BN];
  __shared__ u32 Sa[BM], Sb[BN];  // the tile's scale bytes of this K step

  const u32 tid = MXRT_TID_X, tx = tid % 16u, ty = tid / 16u;
  const u32 n0 = MXRT_BID_X * BN, m0 = MXRT_BID_Y * BM;
#if defined(MXRT_CUDA)
  const u32 z = (u32)blockIdx.z;
#else
  const u32 z = (u32)__builtin_amdgcn_workgroup_id_z();
#endif
  const u32 kbt = (k + BK - 1) / BK;
  const u32 kb0 = (u32)((u64)z * kbt / split_k), kb1 = (u32)((u64)(z + 1u) * kbt / split_k);

  constexpr u32 A_ROW_BITS = FMT_A == MXRT_FMT_E2M1 ? 4 : 8, B_ROW_BITS = FMT_B == MXRT_FMT_E2M1 ? 4 : 8;
  const u64 a_row_bytes = A_ROW_BITS == 4 ? (k + 1u) / 2u : k, b_row_bytes = B_ROW_BITS == 4 ? (k + 1u) / 2u : k;

  const u32 ar = tid % BM, ah = tid / BM, br = tid % BN, bq = tid / BN;
  GemmLoader ld;
  ld.a_row = m0 + ar < m ? a + (u64)(m0 + ar) * a_row_bytes : nullptr;
  ld.b_row = n0 + br < n ? b + (u64)(n0 + br) * b_row_bytes : nullptr;
  ld.a_k = 16u * ah, ld.b_k = 8u * bq, ld.kbt = kbt, ld.k = k;
  ld.vec_a = (flags & MXRT_GEMM_FLAG_VEC_A) != 0, ld.vec_b = (flags & MXRT_GEMM_FLAG_VEC_B) != 0;
  const bool a_scaler = tid < BM;
  ld.s_ptr = a_scaler ? sa : sb, ld.s_code = a_scaler ? la : lb, ld.s_shift = a_scaler ? sa_shift : sb_shift;
  ld.s_row = a_scaler ? m0 + tid : n0 + tid - BM, ld.s_rows = a_scaler ? m : n;
  ld.has_scale = tid < BM + BN && ld.s_row < ld.s_rows;
  ld.s_reg = 127u;

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  if (kb0 < kb1) ld.load(kb0);
  for (u32 kb = kb0; kb < kb1; ++kb) {
    mxrt_sync();  // the previous step's readers are done with As/Bs/Sa/Sb
    #pragma unroll
    for (int e = 0; e < 16; ++e) As[16u * ah + e][ar] = mxrt_decode<FMT_A>(ld.ca.code(e));
    #pragma unroll
    for (int e = 0; e < 8; ++e) Bs[8u * bq + e][br] = mxrt_decode<FMT_B>(ld.cb.code(e));
    if (tid < BM)
      Sa[tid] = ld.s_reg;
    else if (tid < BM + BN)
      Sb[tid - BM] = ld.s_reg;
    mxrt_sync();
    if (kb + 1u < kb1) ld.load(kb + 1u);  // next step's loads in flight during this step's FMAs

    float part[8][4];
    #pragma unroll
    for (int i = 0; i < 8; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j) part[i][j] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      const gemm_f4 a0 = *(const gemm_f4*)&As[kk][8u * ty], a1 = *(const gemm_f4*)&As[kk][8u * ty + 4u];
      const gemm_f2 b0 = *(const gemm_f2*)&Bs[kk][2u * tx], b1 = *(const gemm_f2*)&Bs[kk][32u + 2u * tx];
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[4] = {b0.x, b0.y, b1.x, b1.y};
      #pragma unroll
      for (int i = 0; i < 8; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) part[i][j] = mxrt_fma(av[i], bv[j], part[i][j]);
    }

    u32 sai[8], sbj[4];
    bool fast = true;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
      sai[i] = Sa[8u * ty + i];
      fast = fast && sai[i] - 64u <= 126u;
    }
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      sbj[j] = Sb[2u * tx + (j & 1) + 32u * (j >> 1)];
      fast = fast && sbj[j] - 64u <= 126u;
    }
    if (fast) {  // every scale in 2^[-63, 63]: part * fa is exact and normal, one rounding in the fma
      float fb[4];
      #pragma unroll
      for (int j = 0; j < 4; ++j) fb[j] = mxrt_pow2((i32)sbj[j] - 127);
      #pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float fa = mxrt_pow2((i32)sai[i] - 127);
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = mxrt_fma(part[i][j] * fa, fb[j], acc[i][j]);
      }
    } else {  // extreme or NaN scales (mx_gemm.h: mxrt_scale_steps)
      #pragma unroll
      for (int i = 0; i < 8; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (sai[i] == MXRT_E8M0_NAN || sbj[j] == MXRT_E8M0_NAN) {
            acc[i][j] = mxrt_f32_from_bits(0x7FC00000u);
          } else {
            float f1, f2;
            mxrt_scale_steps(sai[i], sbj[j], f1, f2);
            acc[i][j] = mxrt_fma(part[i][j] * f1, f2, acc[i][j]);
          }
        }
    }
  }

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
