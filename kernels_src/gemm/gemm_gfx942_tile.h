// gemm_gfx942_tile.h: the main loop of the gfx942 MX GEMM kernels (dense gemm_mx_gfx942.hip, grouped
// gemm_mx_grouped_gfx942.hip): one CTA's 128 x 128 tile over a K range with v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8},
// one MFMA per 32-wide scale block, its partial promoted as acc += partial * 2^(sa-127) * 2^(sb-127); two
// register-staged LDS stages of 64 K. The kernels own the tile geometry and the epilogue; both get bit-identical
// arithmetic from here.
//
//
// gfx942 fp8 is FNUZ (e4m3fnuz bias 8, e5m2fnuz bias 16, 0x80 NaN, no -0, no Inf): OCP codes are converted on
// their way to LDS by keeping the bits (the value halves) with -0 -> 0 and NaN/Inf -> 0x80 (amd_gemm.h
// mxrt_fnuz_from_ocp); e2m1 is widened exactly to the e4m3 byte of the same value, read as e4m3fnuz = half too.
// Every product is then a quarter of the true one: the x4 is applied once to the fp32 accumulator at the end.
// e5m2 operands use the bf8 variants (fp8_bf8, bf8_fp8, bf8_bf8).
//
// Operand registers (composable_kernel ck_tile WarpGemmAttributeMfmaImpl_f32_16x16x32_f8_base: kAMLane 16,
// kABKLane 4, kABKPerLane 8): lane l holds row l%16, K [8*(l/16), +8) of the block, one byte per K, in a 64-bit
// register; C/D reg r of lane l is D[4*(l/16)+r][l%16].
//
// defines  A_FMT, B_FMT (MXRT_FMT_*: e4m3, e5m2, e2m1), set by the including kernel's launcher
// No #pragma once: the body depends on the A_FMT / B_FMT of the build, and tests/support/simt_amd_host.cpp
// includes it once per format pair (each in its own namespace).
#include "amd_gemm.h"

#ifndef A_FMT
#error "A_FMT must be defined by the launcher"
#endif
#ifndef B_FMT
#error "B_FMT must be defined by the launcher"
#endif
#if !defined(MXRT_HOST_SIMT) && !defined(__gfx942__)
#error "the gfx942 GEMM kernels build for gfx942 only (v_mfma_f32_16x16x32_fp8_fp8)"
#endif
#if !((A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2 || A_FMT == MXRT_FMT_E2M1) && \
      (B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1))
#error "the gfx942 GEMM kernels: A_FMT / B_FMT must be e4m3 (0), e5m2 (1) or e2m1 (4)"
#endif

// A stage is 64 K (2 scale blocks): two stages of 128-wide rows would not fit gfx942's 64 KB of LDS.
#define G942_KS 64u
#define G942_KB 2u                          // scale blocks per stage
#define G942_ROW (64 + MXRT_GEMM_LDS_PAD)   // every operand is 8-bit in LDS
#define G942_CODES (2 * MXRT_GEMM_BM * G942_ROW)
// + the scale factors 2^(s-127) as fp32 [128 rows][2 blocks] of A, then of B (converted once, at the LDS store)
#define G942_SCALES (MXRT_GEMM_BM * G942_KB * 4)
#define G942_STAGE (G942_CODES + 2 * G942_SCALES)
#define G942_CONV(F) \
  ((F) == MXRT_FMT_E2M1 ? MXRT_CONV_WIDEN : ((F) == MXRT_FMT_E5M2 ? MXRT_CONV_FNUZ_E5M2 : MXRT_CONV_FNUZ_E4M3))

MXRT_DEVICE mxrt_v4f g942_mfma(u64 a, u64 b) {
  const mxrt_v4f zero = {0.0f, 0.0f, 0.0f, 0.0f};
#if defined(MXRT_HOST_SIMT)
  return mxrt_host_mfma_fp8(a, b, zero, A_FMT == MXRT_FMT_E5M2, B_FMT == MXRT_FMT_E5M2);
#elif A_FMT == MXRT_FMT_E5M2 && B_FMT == MXRT_FMT_E5M2
  return __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8((long)a, (long)b, zero, 0, 0, 0);
#elif A_FMT == MXRT_FMT_E5M2
  return __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8((long)a, (long)b, zero, 0, 0, 0);
#elif B_FMT == MXRT_FMT_E5M2
  return __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8((long)a, (long)b, zero, 0, 0, 0);
#else
  return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8((long)a, (long)b, zero, 0, 0, 0);
#endif
}

// Scale bytes of a stage: sc[row][kb] for the 128 rows of the operand and its 2 K blocks (127 past the rows or
// the split's blocks). Thread tid loads byte tid of the 256.
struct G942ScaleStage {
  u32 v;

  MXRT_DEVICE void load(const MxrtOperand& op, u32 kb, u32 kb_end, u32 tid) {
    const u32 r = op.row0 + tid / G942_KB, c = kb + tid % G942_KB;
    v = r < op.rows && c < kb_end ? (u32)op.scales[mxrt_gemm_rowpart(op.sa, r) + mxrt_gemm_colpart(op.sa, c)] : 127u;
  }
  MXRT_DEVICE void store(u8* sc, u32 tid) const { ((float*)sc)[tid] = mxrt_e8m0_f32(v); }
};

// The 8 bytes of block kb for the lane's row `row` (lane group g = l/16 takes K [8g, 8g+8) of the block).
MXRT_DEVICE u64 g942_fragment(const u8* lds, u32 row, u32 kb) {
  return *(const u64*)(lds + row * G942_ROW + 32u * kb + 8u * (mxrt_lane() / 16u));
}

// The CTA's tile: acc[i][j] = the wave's 16 x 16 tiles of A rows [oa.row0 + 64 wm, +64) times B rows
// [ob.row0 + 64 wn, +64) over K [t.k0, t.k1) (scale blocks [t.kb0, t.kb1)), in true (OCP) units: the FNUZ x4 is
// applied before returning. LOAD: MXRT_LOAD_* of the code loads. `lds` holds 2 * G942_STAGE bytes. Every thread
// of the CTA calls this (barriers inside); the LDS is free again when it returns.
template <int LOAD>
MXRT_DEVICE void g942_mainloop(const MxrtOperand& oa, const MxrtOperand& ob, const MxrtGemmTile& t, u8* lds,
                               mxrt_v4f (&acc)[4][4]) {
  constexpr bool A4 = A_FMT == MXRT_FMT_E2M1, B4 = B_FMT == MXRT_FMT_E2M1;
  const u32 tid = MXRT_TID_X, wave = tid / 64u, lane = mxrt_lane();
  const u32 wm = wave / 2u, wn = wave % 2u;
  const u32 steps = (t.k1 - t.k0 + G942_KS - 1u) / G942_KS;

#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j) acc[i][j] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};

  const mxrt_rsrc rsa = mxrt_make_rsrc(oa.codes, oa.rows * oa.row_bytes);
  const mxrt_rsrc rsb = mxrt_make_rsrc(ob.codes, ob.rows * ob.row_bytes);
  MxrtStage<A4, G942_ROW, G942_KS> ra;
  MxrtStage<B4, G942_ROW, G942_KS> rb;
  G942ScaleStage qa, qb;
  ra.template load<LOAD>(oa, rsa, t.k0, t.k1, tid);
  rb.template load<LOAD>(ob, rsb, t.k0, t.k1, tid);
  qa.load(oa, t.kb0, t.kb1, tid);
  qb.load(ob, t.kb0, t.kb1, tid);
  ra.template store<G942_CONV(A_FMT)>(lds, tid);
  rb.template store<G942_CONV(B_FMT)>(lds + MXRT_GEMM_BM * G942_ROW, tid);
  qa.store(lds + G942_CODES, tid);
  qb.store(lds + G942_CODES + G942_SCALES, tid);
  mxrt_sync();

  for (u32 step = 0; step < steps; ++step) {
    const bool more = step + 1u < steps;
    const u8* cur = lds + (step % 2u) * G942_STAGE;
    if (more) {
      const u32 kn = t.k0 + (step + 1u) * G942_KS;
      ra.template load<LOAD>(oa, rsa, kn, t.k1, tid);
      rb.template load<LOAD>(ob, rsb, kn, t.k1, tid);
      qa.load(oa, t.kb0 + G942_KB * (step + 1u), t.kb1, tid);
      qb.load(ob, t.kb0 + G942_KB * (step + 1u), t.kb1, tid);
    }
    mxrt_sched_fence();
    // this lane's scale factors: A rows 4*(l/16) + r of tile i (4 rows x 2 blocks = 8 floats), B column l%16 of
    // tile j (2 floats)
    float fa_rows[4][8], fb_col[4][2];
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
      const float* p = (const float*)(cur + G942_CODES) + G942_KB * (64u * wm + 16u * i + 4u * (lane / 16u));
#pragma unroll
      for (u32 q = 0; q < 8u; ++q) fa_rows[i][q] = p[q];
    }
#pragma unroll
    for (u32 j = 0; j < 4u; ++j) {
      const float* p = (const float*)(cur + G942_CODES + G942_SCALES) + G942_KB * (64u * wn + 16u * j + lane % 16u);
      fb_col[j][0] = p[0];
      fb_col[j][1] = p[1];
    }
#pragma unroll
    for (u32 kb = 0; kb < G942_KB; ++kb) {
      u64 fb[4];
#pragma unroll
      for (u32 j = 0; j < 4u; ++j) fb[j] = g942_fragment(cur + MXRT_GEMM_BM * G942_ROW, 64u * wn + 16u * j + lane % 16u, kb);
#pragma unroll
      for (u32 i = 0; i < 4u; ++i) {
        const u64 fa = g942_fragment(cur, 64u * wm + 16u * i + lane % 16u, kb);
#pragma unroll
        for (u32 j = 0; j < 4u; ++j) {
          const mxrt_v4f p = g942_mfma(fa, fb[j]);
#pragma unroll
          for (u32 r = 0; r < 4u; ++r)
            acc[i][j][r] = __builtin_fmaf(p[r] * fa_rows[i][G942_KB * r + kb], fb_col[j][kb], acc[i][j][r]);
        }
      }
    }
    mxrt_sched_fence();  // this stage's MFMAs before the LDS stores that wait for the next stage's loads
    {  // unconditional: see gemm_mx_gfx950.hip (an `if` here let the MFMAs sink below the stores)
      u8* nxt = lds + ((step + 1u) % 2u) * G942_STAGE;
      ra.template store<G942_CONV(A_FMT)>(nxt, tid);
      rb.template store<G942_CONV(B_FMT)>(nxt + MXRT_GEMM_BM * G942_ROW, tid);
      qa.store(nxt + G942_CODES, tid);
      qb.store(nxt + G942_CODES + G942_SCALES, tid);
    }
    mxrt_sync();
  }
  // FNUZ codes hold half the OCP value: every product is a quarter of the true one
#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) acc[i][j][r] *= 4.0f;
}
