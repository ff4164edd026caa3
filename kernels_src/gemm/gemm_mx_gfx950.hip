// kernel   gemm_mx_gfx950                                                     (extern "C")
// computes out[i,j] = sum_k dequant(a)[i,k] * dequant(b)[j,k] (NT MX GEMM, one E8M0 scale per 32 along K) with
//          v_mfma_scale_f32_16x16x128_f8f6f4: the instruction applies both per-32 scales itself
// args     const u8* a [m,k|ceil(k/2)] | const u8* b [n,k|ceil(k/2)] | const u8* sa | const u8* sb (scale layouts:
//          a_layout / b_layout, mx_codes.h MXRT_SCALE_LAYOUT_*) | void* out [m,n] out_dtype | float* ws [split_k,m,n] |
//          u32* counters [tiles] | int m, n, k, split_k, a_layout, b_layout, out_dtype (MXRT_OUT_*), mode
//          (MXRT_GEMM_MODE_*), flags (MXRT_GEMM_FLAG_VEC_A / _VEC_B); every code from mx_codes.h
// grid     (ceil(n/128), ceil(m/128), split_k)   block (256,1,1)   smem 0 (static LDS: 73,732 B; 40,964 for e2m1 x e2m1)
// defines  A_FMT, B_FMT (MXRT_FMT_*), EDGE (0: interior-only shapes), THREADS = 256   set by mxrt/ops/gemm_amd.py
//          (variants: mxrt/ops/gemm_amd_kernels.py)
// requires gfx950; m, n, k >= 1; split_k <= ceil(k/32); flags VEC_* only for 16-byte aligned code rows;
//          MODE_ATOMIC on 16-bit outputs: n even, out 4-byte aligned (checked by the Python side)
//
// Operand registers follow MX_REFERENCE.md 6.1 (16x16x128): an 8-bit lane (row i = l%16, group g = l/16) holds K
// [16g, 16g+16) in v[0:3] and [64+16g, 64+16g+16) in v[4:7]; an e2m1 lane holds the 32 consecutive K [32g, 32g+32)
// in v[0:3]. The scale of row i and K block kb is byte `opsel` of the scale VGPR of lane i + 16*kb.
// Mixed e4m3 x e2m1: the hardware's K pairing of an fp8 operand with an fp4 one is UNVERIFIED (MX_REFERENCE.md
// 6.1), so the e2m1 operand is converted to e4m3 on its way to LDS (exact: every e2m1 value is an e4m3 value)
// and the instruction runs fp8 x fp8. e2m1 x e2m1 runs natively (cbsz = blgp = 4).
#include "amd_gemm.h"

#ifndef A_FMT
#error "A_FMT must be defined by the launcher"
#endif
#ifndef B_FMT
#error "B_FMT must be defined by the launcher"
#endif
#ifndef THREADS
#error "THREADS must be defined by the launcher"
#endif
#ifndef EDGE
#error "EDGE must be defined by the launcher"
#endif
// EDGE=0: the launcher guarantees m, n multiples of 128, every split's K range a multiple of the stage and 16-byte
// aligned code rows, so the loads carry no masking code; EDGE=1 handles every shape.
#define GFX950_LOAD (EDGE ? MXRT_LOAD_MASKED : MXRT_LOAD_INTERIOR)
#if THREADS != 256
#error "gemm_mx_gfx950: THREADS must be 256 (4 waves of 64)"
#endif
#if !defined(MXRT_HOST_SIMT) && !defined(__gfx950__)
#error "gemm_mx_gfx950 builds for gfx950 only (v_mfma_scale_f32_16x16x128_f8f6f4)"
#endif
#if !((A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2 || A_FMT == MXRT_FMT_E2M1) && \
      (B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1))
#error "gemm_mx_gfx950: A_FMT / B_FMT must be e4m3 (0), e5m2 (1) or e2m1 (4)"
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
  // per lane covers tiles 2*band, 2*band+1 and two K steps (byte 2*i4 + i1, MX_REFERENCE.md 3b); it is shifted
  // so that this step's parity i4 lands in bytes 0, 1. Otherwise one byte load per tile.
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

MXRT_GEMM_OCCUPANCY_BEGIN
extern "C" __global__ void __launch_bounds__(THREADS) gemm_mx_gfx950(const u8* a, const u8* b, const u8* sa,
                                                                     const u8* sb, void* out, float* ws, u32* counters,
                                                                     i32 m, i32 n, i32 k, i32 split_k, i32 a_layout,
                                                                     i32 b_layout, i32 out_dtype, i32 mode,
                                                                     i32 flags) {
  __shared__ mxrt_u32x4 lds_words[2 * G950_STAGE / 16];
  __shared__ u32 last_flag;
  u8* lds = (u8*)lds_words;
  const MxrtGemmArgs g = {a, b, sa, sb, out, ws, counters, (u32)m, (u32)n, (u32)k, (u32)split_k,
                          a_layout, b_layout, out_dtype, mode, flags};
  const MxrtGemmTile t = mxrt_gemm_tile(g);
  const u32 kb_total = (g.k + 31u) / 32u;
  constexpr bool A4 = A_FMT == MXRT_FMT_E2M1, B4 = B_FMT == MXRT_FMT_E2M1;
  const MxrtOperand oa = {a, sa, g.m, A4 ? (g.k + 1u) / 2u : g.k, kb_total, t.m0,
                          (flags & MXRT_GEMM_FLAG_VEC_A) != 0, A4, mxrt_gemm_scale_addr(a_layout, kb_total)};
  const MxrtOperand ob = {b, sb, g.n, B4 ? (g.k + 1u) / 2u : g.k, kb_total, t.n0,
                          (flags & MXRT_GEMM_FLAG_VEC_B) != 0, B4, mxrt_gemm_scale_addr(b_layout, kb_total)};
  const u32 tid = MXRT_TID_X, wave = tid / 64u, lane = mxrt_lane();
  const u32 wm = wave / 2u, wn = wave % 2u;  // wave tile rows [64 wm, +64) of A, [64 wn, +64) of B
  const bool fast_a = a_layout == MXRT_SCALE_LAYOUT_AITER32X8 && t.kb0 % 4u == 0u;
  const bool fast_b = b_layout == MXRT_SCALE_LAYOUT_AITER32X8 && t.kb0 % 4u == 0u;
  const u32 steps = (t.k1 - t.k0 + MXRT_GEMM_KSTEP - 1u) / MXRT_GEMM_KSTEP;

  mxrt_v4f acc[4][4];
#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j) acc[i][j] = mxrt_v4f{0.0f, 0.0f, 0.0f, 0.0f};

  MxrtStage<A4, G950_ROW> ra;
  MxrtStage<B4, G950_ROW> rb;
  G950Scales qa, qb;
  qa.init(oa, t.m0 + 64u * wm);
  qb.init(ob, t.n0 + 64u * wn);
  u32 sa_cur[4], sb_cur[4], sa_next[4] = {127u, 127u, 127u, 127u}, sb_next[4] = {127u, 127u, 127u, 127u};
  const mxrt_rsrc rsa = mxrt_make_rsrc(a, oa.rows * oa.row_bytes), rsb = mxrt_make_rsrc(b, ob.rows * ob.row_bytes);
  ra.template load<GFX950_LOAD>(oa, rsa, t.k0, t.k1, tid);
  rb.template load<GFX950_LOAD>(ob, rsb, t.k0, t.k1, tid);
  qa.template load<EDGE == 0>(oa, t.kb0, t.kb1, fast_a, sa_cur);
  qb.template load<EDGE == 0>(ob, t.kb0, t.kb1, fast_b, sb_cur);
  ra.template store<A4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(lds, tid);
  rb.template store<B4 && !G950_NATIVE_FP4 ? MXRT_CONV_WIDEN : MXRT_CONV_NONE>(lds + MXRT_GEMM_BM * G950_ROW, tid);
  mxrt_sync();

  for (u32 step = 0; step < steps; ++step) {
    const bool more = step + 1u < steps;
    qa.template finish<EDGE == 0>(sa_cur);
    qb.template finish<EDGE == 0>(sb_cur);
    const u8* cur = lds + (step % 2u) * G950_STAGE;
    if (more) {  // next stage's global loads in flight during this stage's MFMAs
      const u32 kn = t.k0 + (step + 1u) * MXRT_GEMM_KSTEP;
      ra.template load<GFX950_LOAD>(oa, rsa, kn, t.k1, tid);
      rb.template load<GFX950_LOAD>(ob, rsb, kn, t.k1, tid);
      qa.template load<EDGE == 0>(oa, t.kb0 + 4u * (step + 1u), t.kb1, fast_a, sa_next);
      qb.template load<EDGE == 0>(ob, t.kb0 + 4u * (step + 1u), t.kb1, fast_b, sb_next);
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
  mxrt_gemm_epilogue(g, t, acc, t.m0 + 64u * wm, t.n0 + 64u * wn, &last_flag);
}
MXRT_GEMM_OCCUPANCY_END
