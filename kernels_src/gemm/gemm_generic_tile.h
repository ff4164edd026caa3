// gemm_generic_tile.h: the main loop of the portable MX GEMM (one 128 x 64 output tile of fp32 FMAs on exactly
// decoded codes, one scale application per 32-block), shared by the dense kernel (gemm_mx_generic.hip) and the
// grouped ones (gemm_mx_grouped_generic.hip). The including file defines THREADS (256), FMT_A and FMT_B.
//
// gemm_generic_mainloop(t, acc) adds to acc[8][4] the tile (t.m0, t.n0) of sum_kb 2^(sa-127) 2^(sb-127) sum_{k in
// block kb} A[i,k] B[j,k] over the scale blocks [t.kb0, t.kb1). Thread (ty, tx) = (tid / 16, tid % 16) owns rows
// m0 + 8*ty + i (i < 8) and columns n0 + 2*tx + (j & 1) + 32*(j >> 1) (j < 4). Every thread of the block must call
// it (it holds barriers); rows >= t.m / t.n read zero codes, elements >= t.k read zero. The scale matrices are
// [rows, a_kbt] / [rows, b_kbt] (E8M0 bytes per 32, or with SCALE_F32 float32 per 128 and B rows / SF_GMN_B).
#pragma once
#include "../common/mx_gemm.h"
#include "../common/scale_layouts.h"

#if !defined(THREADS) || !defined(FMT_A) || !defined(FMT_B)
#error "gemm_generic_tile.h: THREADS, FMT_A and FMT_B must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "THREADS: the tile mapping of gemm_generic_tile.h is written for 256 threads");

// SCALE_F32 = 1 (grouped DeepGEMM builds only; the dense kernel leaves it 0): the scales are float32 values, one
// per 128 elements of K (DeepGEMM's Hopper recipe), B's per SF_GMN_B rows (1, or 128 for 128x128 blocks); each
// 32-element step reads the scale of its 128-block and applies acc += (part * sa) * sb in fp32.
#ifndef SCALE_F32
#define SCALE_F32 0
#endif
#ifndef SF_GMN_B
#define SF_GMN_B 1
#endif
MXRT_STATIC_ASSERT(SCALE_F32 == 0 || SCALE_F32 == 1, "SCALE_F32: 0 (E8M0 per 32) or 1 (float32 per 128)");
MXRT_STATIC_ASSERT(SF_GMN_B == 1 || (SCALE_F32 && SF_GMN_B == 128), "SF_GMN_B: 1, or 128 with SCALE_F32");

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
  u32 a_k, b_k, s_code, s_shift, s_row, s_rows, kbt, k;  // kbt: scale columns of the thread's matrix
  bool vec_a, vec_b, has_scale;

#if SCALE_F32
  u32 s_row_sf;  // the thread's scale row: s_row, or s_row / SF_GMN_B for B
#endif

  MXRT_DEVICE void load(u32 kb) {
    ca.load(a_row, kb * BK + a_k, k, vec_a);
    cb.load(b_row, kb * BK + b_k, k, vec_b);
#if SCALE_F32
    s_reg = has_scale ? *(const u32*)(s_ptr + 4ull * ((u64)s_row_sf * kbt + (kb >> 2))) : 0x3F800000u;
#else
    s_reg = has_scale ? gemm_scale(s_ptr, s_code, s_shift, s_row, kb, s_rows, kbt) : 127u;
#endif
  }
};

// One tile's operands: a [m rows of a_row_bytes] and b [n rows of b_row_bytes] (both K-major; the reduction reads
// elements < k), their scale storage (layout codes la / lb of [rows, a_kbt] / [rows, b_kbt]), and the tile.
struct GemmTile {
  const u8* a;
  const u8* sa;
  const u8* b;
  const u8* sb;
  u32 m, n, k, a_kbt, b_kbt;
  u64 a_row_bytes, b_row_bytes;
  u32 la, lb, sa_shift, sb_shift, flags;
  u32 m0, n0, kb0, kb1;
};

MXRT_DEVICE void gemm_generic_mainloop(const GemmTile& t, float (&acc)[8][4]) {
  __shared__ __attribute__((aligned(16))) float As[BK][BM];  // decoded A, K-major: As[kk][row]
  __shared__ __attribute__((aligned(16))) float Bs[BK][BN];
  __shared__ u32 Sa[BM], Sb[BN];  // the tile's scale bytes of this K step

  const u32 tid = MXRT_TID_X, tx = tid % 16u, ty = tid / 16u;
  const u32 m = t.m, n = t.n, m0 = t.m0, n0 = t.n0, kb0 = t.kb0, kb1 = t.kb1;
  const u32 ar = tid % BM, ah = tid / BM, br = tid % BN, bq = tid / BN;
  GemmLoader ld;
  ld.a_row = m0 + ar < m ? t.a + (u64)(m0 + ar) * t.a_row_bytes : nullptr;
  ld.b_row = n0 + br < n ? t.b + (u64)(n0 + br) * t.b_row_bytes : nullptr;
  ld.a_k = 16u * ah, ld.b_k = 8u * bq, ld.k = t.k;
  ld.vec_a = (t.flags & MXRT_GEMM_FLAG_VEC_A) != 0, ld.vec_b = (t.flags & MXRT_GEMM_FLAG_VEC_B) != 0;
  const bool a_scaler = tid < BM;
  ld.s_ptr = a_scaler ? t.sa : t.sb, ld.s_code = a_scaler ? t.la : t.lb, ld.s_shift = a_scaler ? t.sa_shift : t.sb_shift;
  ld.s_row = a_scaler ? m0 + tid : n0 + tid - BM, ld.s_rows = a_scaler ? m : n, ld.kbt = a_scaler ? t.a_kbt : t.b_kbt;
  ld.has_scale = tid < BM + BN && ld.s_row < ld.s_rows;
  ld.s_reg = 127u;
#if SCALE_F32
  ld.s_row_sf = a_scaler ? ld.s_row : ld.s_row / SF_GMN_B;
#endif

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

#if SCALE_F32
    {
      float fb[4];
      #pragma unroll
      for (int j = 0; j < 4; ++j) fb[j] = mxrt_f32_from_bits(Sb[2u * tx + (j & 1) + 32u * (j >> 1)]);
      #pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float fa = mxrt_f32_from_bits(Sa[8u * ty + i]);
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = mxrt_fma(part[i][j] * fa, fb[j], acc[i][j]);
      }
    }
#else
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
#endif
  }

}
