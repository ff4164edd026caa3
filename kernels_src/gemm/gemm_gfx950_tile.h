// gemm_gfx950_tile.h: the main loop of the gfx950 MX GEMM kernels (dense gemm_mx_gfx950.hip, grouped
// gemm_mx_grouped_gfx950.hip): one CTA's 128 x 128 tile over a K range with v_mfma_scale_f32_16x16x128_f8f6f4,
// two register-staged LDS stages of 128 K, the per-32 scales applied by the instruction. The kernels own the
// tile geometry (which rows, which K range) and the epilogue; both get bit-identical arithmetic from here.
//
// Operand registers follow MX_REFERENCE.md 6.1 (16x16x128): an 8-bit lane (row i = l%16, group g = l/16) holds K
// [16g, 16g+16) in v[0:3] and [64+16g, 64+16g+16) in v[4:7]; an e2m1 lane holds the 32 consecutive K [32g, 32g+32)
// in v[0:3]. The scale of row i and K block kb is byte `opsel` of the scale VGPR of lane i + 16*kb.
// Mixed e4m3 x e2m1: the hardware's K pairing of an fp8 operand with an fp4 one is UNVERIFIED (MX_REFERENCE.md
// 6.1), so the e2m1 operand is converted to e4m3 on its way to LDS (exact: every e2m1 value is an e4m3 value)
// and the instruction runs fp8 x fp8. e2m1 x e2m1 runs natively (cbsz = blgp = 4).
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
#if !defined(MXRT_HOST_SIMT) && !defined(__gfx950__)
#error "the gfx950 GEMM kernels build for gfx950 only (v_mfma_scale_f32_16x16x128_f8f6f4)"
#endif
#if !((A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2 || A_FMT == MXRT_FMT_E2M1) && \
      (B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1))
#error "the gfx950 GEMM kernels: A_FMT / B_FMT must be e4m3 (0), e5m2 (1) or e2m1 (4)"
#endif

// Native fp4 only when both are fp4; otherwise an e2m1 operand is widened to e4m3 in LDS.
#define G950_NATIVE_FP4 (A_FMT == MXRT_FMT_E2M1 && B_FMT == MXRT_FMT_E2M1)
#define G950_A_CODE (G950_NATIVE_FP4 ? 4 : (A_FMT == MXRT_FMT_E5M2 ? 1 : 0))
#define G950_B_CODE (G950_NATIVE_FP4 ? 4 : (B_FMT == MXRT_FMT_E5M2 ? 1 : 0))
// LDS row pitch of one stage (bytes): 128 codes (or 64 packed e2m1) + 16 padding.
#define G950_ROW (G950_NATIVE_FP4 ? 64 + MXRT_GEMM_LDS_PAD : 128 + MXRT_GEMM_LDS_PAD)
#define G950_STAGE (2 * MXRT_GEMM_BM * G950_ROW)  // A rows then B rows

template <int OPA, int OPB>
MXRT_DEVICE mxrt_v4f g950_mfma(mxrt_v8i a, mxrt_v8i b, mxrt_v4f c, u32 sa, u32 sb) {
#if defined(MXRT_HOST_SIMT)
  return mxrt_host_mfma_scale(a, b, c, G950_A_CODE, G950_B_CODE, OPA, sa, OPB, sb);
#else
  return __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, c, G950_A_CODE, G950_B_CODE, OPA, (int)sa, OPB,
                                                          (int)sb);
#endif
}

// Per-lane scale state of one operand: the row part of the scale offset of the lane's row in each of the wave's
// four 16-row tiles (0xFFFFFFFF: row past the end, scale 127).
struct G950Scales {
  u32 rowpart[4];

  MXRT_DEVICE void init(const MxrtOperand& op, u32 wrow0) {
    const u32 li = mxrt_lane() % 16u;
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
      const u32 r = wrow0 + 16u * i + li;
      rowpart[i] = r < op.rows ? mxrt_gemm_rowpart(op.sa, r) : 0xFFFFFFFFu;
    }
  }

  // Scale VGPRs of the four tiles for the K step whose first block is kb: tile i's scale sits in byte (i & 1),
  // the opsel its MFMA uses. `aiter_fast` (aiter32x8 with the split starting on a 4-block boundary): one dword
  // per lane covers tiles 2*band, 2*band+1 and two K steps (byte 2*i4 + i1, MX_REFERENCE.md 3b), shifted so
  // that this step's parity i4 lands in bytes 0, 1. Otherwise one byte load per tile.
  //
  // RAW (EDGE=0 builds, where every row and block of every stage is in range): one plain byte load per tile
  // for every layout (the byte formula covers aiter32x8 too: its rows r and r+16 are bytes 0 and 1 of one
  // dword), no branch, and the shifts wait for `finish` at the top of the next step. Consuming a load where it
  // is issued, or merging the aiter and byte paths after a branch, made the compiler wait (s_waitcnt vmcnt) for
  // it -- and, vmcnt being in order, for the next stage's tile loads issued before it -- ahead of this step's
  // MFMAs. EDGE=1 builds mask out-of-range rows/blocks to 127 at the load and read aiter32x8 as one dword per
  // band (branches: branch-free selects spilled their SGPR file with lane masks).
  template <bool RAW>
  MXRT_DEVICE void load(const MxrtOperand& op, u32 kb, u32 kb_end, bool aiter_fast, u32 (&s)[4]) const {
    const u32 c = kb + mxrt_lane() / 16u;
    const bool col_ok = c < kb_end;
    const u32 colpart = mxrt_gemm_colpart(op.sa, c);
    if (aiter_fast && !RAW) {
      const u32 i4 = (c / 4u) % 2u;
#pragma unroll
      for (u32 band = 0; band < 2u; ++band) {
        u32 d = 0x7F7Fu;
        if (col_ok && rowpart[2u * band] != 0xFFFFFFFFu) {
          d = (*(const u32*)(op.scales + rowpart[2u * band] + colpart - 2u * i4) >> (16u * i4)) & 0xFFFFu;
          if (rowpart[2u * band + 1u] == 0xFFFFFFFFu) d = (d & 0xFFu) | 0x7F00u;
        }
        s[2u * band] = d;
        s[2u * band + 1u] = d;
      }
      return;
    }
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
      if (RAW) {
        s[i] = op.scales[rowpart[i] + colpart];
        continue;
      }
      const u32 byte = col_ok && rowpart[i] != 0xFFFFFFFFu ? (u32)op.scales[rowpart[i] + colpart] : 127u;
      s[i] = byte << (8u * (i & 1u));
    }
  }

  // RAW loads -> the scale VGPRs of `load`.
  template <bool RAW>
  MXRT_DEVICE void finish(u32 (&s)[4]) const {
#pragma unroll
    for (u32 i = 1; i < 4u; i += 2u) s[i] <<= RAW ? 8u : 0u;
  }
};

// One 16-row operand tile of a stage from LDS: 8-bit lanes read row li at bytes 16g and 64 + 16g; e2m1 lanes
// read 16 bytes at 16g (v[4:7] unused by the instruction, left zero).
MXRT_DEVICE mxrt_v8i g950_fragment(const u8* lds, u32 row) {
  const u32 g = mxrt_lane() / 16u;
  const mxrt_u32x4 lo = *(const mxrt_u32x4*)(lds + row * G950_ROW + 16u * g);
  mxrt_u32x4 hi = {0u, 0u, 0u, 0u};
  if (!G950_NATIVE_FP4) hi = *(const mxrt_u32x4*)(lds + row * G950_ROW + 64u + 16u * g);
  mxrt_v8i v;
  v[0] = (int)lo.x;
  v[1] = (int)lo.y;
  v[2] = (int)lo.z;
  v[3] = (int)lo.w;
  v[4] = (int)hi.x;
  v[5] = (int)hi.y;
  v[6] = (int)hi.z;
  v[7] = (int)hi.w;
  return v;
}

// The CTA's tile: acc[i][j] (zeroed here) = the wave's 16 x 16 tiles of A rows [oa.row0 + 64 wm, +64) times B rows
// [ob.row0 + 64 wn, +64) over K [t.k0, t.k1) (scale blocks [t.kb0, t.kb1)). LOAD: MXRT_LOAD_* of the code loads;
// RAW: plain scale byte loads (every row and block of every stage in range: the EDGE=0 builds); a_layout /
// b_layout: the scale layouts (MXRT_SCALE_LAYOUT_*; aiter32x8 with the range starting on a 4-block boundary reads
// one dword per band, see G950Scales::load). `lds` holds 2 * G950_STAGE bytes. Every thread of the CTA calls this
// (barriers inside); the LDS is free again when it returns. (The statement order is the dense kernel's before
// the split: the factored kernel builds to the same ISA.)
template <int LOAD, bool RAW>
MXRT_DEVICE void g950_mainloop(const MxrtOperand& oa, const MxrtOperand& ob, const MxrtGemmTile& t, i32 a_layout,
                               i32 b_layout, u8* lds, mxrt_v4f (&acc)[4][4]) {
  constexpr bool A4 = A_FMT == MXRT_FMT_E2M1, B4 = B_FMT == MXRT_FMT_E2M1;
  const u32 tid = MXRT_TID_X, wave = tid / 64u, lane = mxrt_lane();
  const u32 wm = wave / 2u, wn = wave % 2u;  // wave tile rows [64 wm, +64) of A, [64 wn, +64) of B
  const bool fast_a = a_layout == MXRT_SCALE_LAYOUT_AITER32X8 && t.kb0 % 4u == 0u;
  const bool fast_b = b_layout == MXRT_SCALE_LAYOUT_AITER32X8 && t.kb0 % 4u == 0u;
  const u32 steps = (t.k1 - t.k0 + MXRT_GEMM_KSTEP - 1u) / MXRT_GEMM_KSTEP;

#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j) acc[i][j] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};

  MxrtStage<A4, G950_ROW> ra;
  MxrtStage<B4, G950_ROW> rb;
  G950Scales qa, qb;
  qa.init(oa, oa.row0 + 64u * wm);
  qb.init(ob, ob.row0 + 64u * wn);
  u32 sa_cur[4], sb_cur[4], sa_next[4] = {127u, 127u, 127u, 127u}, sb_next[4] = {127u, 127u, 127u, 127u};
  const mxrt_rsrc rsa = mxrt_make_rsrc(oa.codes, oa.rows * oa.row_bytes);
  const mxrt_rsrc rsb = mxrt_make_rsrc(ob.codes, ob.rows * ob.row_bytes);
  ra.template load<LOAD>(oa, rsa, t.k0, t.k1, tid);
  rb.template load<LOAD>(ob, rsb, t.k0, t.k1, tid);
  qa.template load<RAW>(oa, t.kb0, t.kb1, fast_a, sa_cur);
  qb.template load<RAW>(ob, t.kb0, t.kb1, fast_b, sb_cur);
  ra.template store<A4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(lds, tid);
  rb.template store<B4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(lds + MXRT_GEMM_BM * G950_ROW, tid);
  mxrt_sync();

  for (u32 step = 0; step < steps; ++step) {
    const bool more = step + 1u < steps;
    qa.template finish<RAW>(sa_cur);
    qb.template finish<RAW>(sb_cur);
    const u8* cur = lds + (step % 2u) * G950_STAGE;
    if (more) {  // next stage's global loads in flight during this stage's MFMAs
      const u32 kn = t.k0 + (step + 1u) * MXRT_GEMM_KSTEP;
      ra.template load<LOAD>(oa, rsa, kn, t.k1, tid);
      rb.template load<LOAD>(ob, rsb, kn, t.k1, tid);
      qa.template load<RAW>(oa, t.kb0 + 4u * (step + 1u), t.kb1, fast_a, sa_next);
      qb.template load<RAW>(ob, t.kb0 + 4u * (step + 1u), t.kb1, fast_b, sb_next);
    }
    mxrt_sched_fence();
    mxrt_v8i fb[4];
#pragma unroll
    for (u32 j = 0; j < 4u; ++j) fb[j] = g950_fragment(cur + MXRT_GEMM_BM * G950_ROW, 64u * wn + 16u * j + lane % 16u);
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
      const mxrt_v8i fa = g950_fragment(cur, 64u * wm + 16u * i + lane % 16u);
#pragma unroll
      for (u32 j = 0; j < 4u; ++j) {
        if (i % 2u == 0u && j % 2u == 0u) acc[i][j] = g950_mfma<0, 0>(fa, fb[j], acc[i][j], sa_cur[i], sb_cur[j]);
        if (i % 2u == 0u && j % 2u == 1u) acc[i][j] = g950_mfma<0, 1>(fa, fb[j], acc[i][j], sa_cur[i], sb_cur[j]);
        if (i % 2u == 1u && j % 2u == 0u) acc[i][j] = g950_mfma<1, 0>(fa, fb[j], acc[i][j], sa_cur[i], sb_cur[j]);
        if (i % 2u == 1u && j % 2u == 1u) acc[i][j] = g950_mfma<1, 1>(fa, fb[j], acc[i][j], sa_cur[i], sb_cur[j]);
      }
    }
    mxrt_sched_fence();  // this stage's MFMAs before the LDS stores that wait for the next stage's loads
    {  // unconditional (after the last step it rewrites the idle buffer): behind an `if (more)` the MFMAs were
       // sunk below the stores, which wait for the next stage's loads, and the load latency was exposed
      u8* nxt = lds + ((step + 1u) % 2u) * G950_STAGE;
      ra.template store<A4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(nxt, tid);
      rb.template store<B4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(nxt + MXRT_GEMM_BM * G950_ROW, tid);
#pragma unroll
      for (u32 i = 0; i < 4u; ++i) {
        sa_cur[i] = sa_next[i];
        sb_cur[i] = sb_next[i];
      }
    }
    mxrt_sync();
  }
}
