// kernel   gemm_mx_decode_sm90                                                        (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k], m <= 8*MT tokens
//          (decode). Swap-AB: 16 weight rows (B) x 8 tokens (A) per mma.sync m16n8k32 per MX block, from zero,
//          promoted as acc = fma(P * 2^(sb-127), 2^(sa-127), acc) when its scales lie in [64, 190], else by the
//          exact two-step factors (mxrt_scale_steps; NaN for 0xFF). Lane q of a quad holds bytes [8q, 8q+8) of a
//          block as mma K columns {4q..4q+3, 16+4q..16+4q+3} on both operands (a block's sum is order-free); e2m1
//          is widened to e4m3 in registers. KW warps split a CTA's blocks, summed in shared memory in warp order;
//          split z covers blocks [z*KB/split_k, (z+1)*KB/split_k), KB = k/32. ATOMIC=0 stores slice z of out
//          (fp32 [split_k,m,n] when split_k > 1, else [m,n] OUT_DTYPE); ATOMIC=1 adds (fp32 / bf16x2 / f16x2)
// args     const u8* a [m,row bytes] (tokens) | const u8* sa [m,k/32] | const u8* b [n,row bytes] (weights) |
//          const u8* sb [n,k/32] (E8M0, row-major) | void* out | u32 m, u32 n, u32 k, u32 split_k
// grid     (ceil(n/(16*RW)),1,split_k)   block (32*RW*KW,1,1)   smem KW*16*RW*8*MT*4 bytes static
// defines  A_FMT, B_FMT (MXRT_FMT_E4M3/_E5M2/_E2M1), OUT_DTYPE (MXRT_OUT_*), ATOMIC, MT (1/2/4/8), RW, KW, U (blocks
//          per batch of loads)   set by mxrt/ops/gemm_decode.py (variants: mxrt/ops/gemm_decode_kernels.py)
// requires sm_89+; k % 32 == 0; a, b 16-byte aligned; m <= 8*MT; m, n, k/32*max(m,n) < 2^31; split_k <= 65535;
//          ATOMIC with 16-bit out: out 4-byte aligned, m*n even           checked by mxrt/ops/gemm_decode.py
#include "../common/mx_gemm.h"

#if !defined(A_FMT) || !defined(B_FMT) || !defined(OUT_DTYPE) || !defined(ATOMIC) || !defined(MT) || \
    !defined(RW) || !defined(KW) || !defined(U)
#error "A_FMT, B_FMT, OUT_DTYPE, ATOMIC, MT, RW, KW and U must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(MT == 1 || MT == 2 || MT == 4 || MT == 8, "MT: 1, 2, 4 or 8 token tiles of 8");
MXRT_STATIC_ASSERT(RW >= 1 && KW >= 1 && RW * KW <= 16, "RW x KW warps: at most 16");
MXRT_STATIC_ASSERT(U >= 1 && U <= 16, "U: 1..16 blocks per batch");
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_F32 || OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16,
                   "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2 || A_FMT == MXRT_FMT_E2M1,
                   "A_FMT: e4m3, e5m2 or e2m1");
MXRT_STATIC_ASSERT(B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1,
                   "B_FMT: e4m3, e5m2 or e2m1");

#define DEC_THREADS (32 * RW * KW)

// 8 e2m1 codes (nibbles, element 0 in bits 0..3) -> 8 e4m3 bytes: lo word elements 0..3, hi word 4..7.
// Magnitudes through a byte permute of the table {0, 0.5, 1, 1.5, 2, 3, 4, 6}, signs moved from bit 3 to bit 7.
MXRT_DEVICE void dec_e2m1x8_to_e4m3(u32 w, u32& lo, u32& hi) {
  const u32 t0 = 0x3C383000u, t1 = 0x4C484440u;
  const u32 mlo = w & 0x7777u, mhi = (w >> 16) & 0x7777u;
  const u32 s = w & 0x88888888u;
  const u32 slo = ((s & 0x8u) << 4) | ((s & 0x80u) << 8) | ((s & 0x800u) << 12) | ((s & 0x8000u) << 16);
  const u32 sh = s >> 16;
  const u32 shi = ((sh & 0x8u) << 4) | ((sh & 0x80u) << 8) | ((sh & 0x800u) << 12) | ((sh & 0x8000u) << 16);
  lo = __byte_perm(t0, t1, mlo) | slo;
  hi = __byte_perm(t0, t1, mhi) | shi;
}

// The 8 codes of lane quad position q in one block of a row, as two e4m3/e5m2 words (lo = mma K columns 4q..4q+3,
// hi = 16+4q..16+4q+3). fp8: bytes [8q, 8q+8) of the block; e2m1: nibbles [8q, 8q+8) = bytes [4q, 4q+4).
template <int FMT>
MXRT_DEVICE void dec_load(const u8* row, u32 kb, u32 q, bool valid, u32& lo, u32& hi) {
  if constexpr (FMT == MXRT_FMT_E2M1) {
    const u32 w = valid ? __ldg((const u32*)(row + (u64)kb * 16u + 4u * q)) : 0u;
    dec_e2m1x8_to_e4m3(w, lo, hi);
  } else {
    uint2 v = make_uint2(0u, 0u);
    if (valid) v = __ldg((const uint2*)(row + (u64)kb * 32u + 8u * q));
    lo = v.x;
    hi = v.y;
  }
}

#define DEC_MMA_TYPE(F) (F == MXRT_FMT_E5M2 ? 1 : 0)

// D = A (16x32, weights) x B (32x8, tokens), fp32, from zero.
template <int WT, int XT>
MXRT_DEVICE void dec_mma(const u32 (&w)[4], u32 x0, u32 x1, float (&d)[4]) {
#define DEC_MMA(TA, TB)                                                                                         \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
               "{%10,%10,%10,%10};"                                                                             \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                 \
               : "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]), "r"(x0), "r"(x1), "f"(0.0f))
  if constexpr (WT == 0 && XT == 0)
    DEC_MMA("e4m3", "e4m3");
  else if constexpr (WT == 0 && XT == 1)
    DEC_MMA("e4m3", "e5m2");
  else if constexpr (WT == 1 && XT == 0)
    DEC_MMA("e5m2", "e4m3");
  else
    DEC_MMA("e5m2", "e5m2");
#undef DEC_MMA
}

MXRT_DEVICE bool dec_fast(u32 s) { return s - 64u <= 126u; }

extern "C" __global__ void __launch_bounds__(DEC_THREADS)
    gemm_mx_decode_sm90(const u8* __restrict__ a, const u8* __restrict__ sa, const u8* __restrict__ b,
                        const u8* __restrict__ sb, void* __restrict__ out, u32 m, u32 n, u32 k, u32 split_k) {
  constexpr int WFMT = B_FMT == MXRT_FMT_E2M1 ? MXRT_FMT_E4M3 : B_FMT;  // what the tensor cores see
  constexpr int XFMT = A_FMT == MXRT_FMT_E2M1 ? MXRT_FMT_E4M3 : A_FMT;
  constexpr u32 A_BLOCK_BYTES = A_FMT == MXRT_FMT_E2M1 ? 16u : 32u, B_BLOCK_BYTES = B_FMT == MXRT_FMT_E2M1 ? 16u : 32u;
  __shared__ float red[KW][16 * RW][8 * MT];

  const u32 tid = MXRT_TID_X, lane = tid % 32u, warp = tid / 32u;
  const u32 rw = warp % RW, kw = warp / RW;
  const u32 g = lane / 4u, q = lane % 4u;
  const u32 kbt = k / 32u;
  const u32 z = MXRT_BID_Z;
  const u32 cb0 = (u32)((u64)z * kbt / split_k), cb1 = (u32)((u64)(z + 1u) * kbt / split_k);
  const u32 kb0 = cb0 + (u32)((u64)kw * (cb1 - cb0) / KW), kb1 = cb0 + (u32)((u64)(kw + 1u) * (cb1 - cb0) / KW);

  // this lane's two weight rows (g, g + 8 of the warp's 16) and 2 * MT tokens (2q, 2q + 1 of each tile of 8)
  const u32 r0 = MXRT_BID_X * 16u * RW + 16u * rw + g, r1 = r0 + 8u;
  const bool v0 = r0 < n, v1 = r1 < n;
  const u8* w0 = b + (u64)(v0 ? r0 : 0u) * (kbt * B_BLOCK_BYTES);
  const u8* w1 = b + (u64)(v1 ? r1 : 0u) * (kbt * B_BLOCK_BYTES);
  const u8* s0 = sb + (u64)(v0 ? r0 : 0u) * kbt;
  const u8* s1 = sb + (u64)(v1 ? r1 : 0u) * kbt;

  float acc[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;

  // One batch of U blocks in registers: the weight fragments (4 words per block: rows g and g+8, K columns
  // {4q..} and {16+4q..}), the token fragments of every tile, and the scale bytes. The loop issues the loads of
  // batch i+1 before the mma and promotion of batch i, so 2U blocks per warp are in flight at the peak.
  struct Batch {
    u32 wf[U][4], xf[U][MT][2], ws[U][2], xs[U][MT][2];
  };
  auto load = [&](Batch& bt, u32 kb) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const u32 kbu = kb + u;
      const bool in = kbu < kb1;
      dec_load<B_FMT>(w0, kbu, q, in && v0, bt.wf[u][0], bt.wf[u][2]);
      dec_load<B_FMT>(w1, kbu, q, in && v1, bt.wf[u][1], bt.wf[u][3]);
      bt.ws[u][0] = in && v0 ? __ldg(s0 + kbu) : 127u;
      bt.ws[u][1] = in && v1 ? __ldg(s1 + kbu) : 127u;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        // token 8t + g is this lane's mma B column; tokens 8t + 2q, 8t + 2q + 1 its accumulator columns
        const u32 j = 8u * t + g;
        const bool vj = in && j < m;
        dec_load<A_FMT>(a + (u64)(vj ? j : 0u) * (kbt * A_BLOCK_BYTES), kbu, q, vj, bt.xf[u][t][0], bt.xf[u][t][1]);
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const u32 jc = 8u * t + 2u * q + c;
          bt.xs[u][t][c] = in && jc < m ? __ldg(sa + (u64)jc * kbt + kbu) : 127u;
        }
      }
    }
  };
  auto compute = [&](const Batch& bt, u32 kb) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kb + u >= kb1) break;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        float d[4];
        dec_mma<DEC_MMA_TYPE(WFMT), DEC_MMA_TYPE(XFMT)>(bt.wf[u], bt.xf[u][t][0], bt.xf[u][t][1], d);
        // d[0]: (row g, token 2q), d[1]: (g, 2q+1), d[2]: (g+8, 2q), d[3]: (g+8, 2q+1)
        const u32 sw[4] = {bt.ws[u][0], bt.ws[u][0], bt.ws[u][1], bt.ws[u][1]};
        const u32 sx[4] = {bt.xs[u][t][0], bt.xs[u][t][1], bt.xs[u][t][0], bt.xs[u][t][1]};
        if (dec_fast(sw[0]) && dec_fast(sw[2]) && dec_fast(sx[0]) && dec_fast(sx[1])) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[t][i] = mxrt_fma(d[i] * mxrt_pow2((i32)sw[i] - 127), mxrt_pow2((i32)sx[i] - 127), acc[t][i]);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (sw[i] == MXRT_E8M0_NAN || sx[i] == MXRT_E8M0_NAN) {
              acc[t][i] = mxrt_f32_from_bits(0x7FC00000u);
            } else {
              float f1, f2;
              mxrt_scale_steps(sw[i], sx[i], f1, f2);
              acc[t][i] = mxrt_fma(d[i] * f1, f2, acc[t][i]);
            }
          }
        }
      }
    }
  };
  if (kb0 < kb1) {
    Batch cur;
    load(cur, kb0);
    for (u32 kb = kb0; kb < kb1; kb += U) {
      Batch nxt;
      if (kb + U < kb1) load(nxt, kb + U);
      compute(cur, kb);
      cur = nxt;
    }
  }

  // K warps -> shared memory -> summed in warp order
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    red[kw][16u * rw + g][8u * t + 2u * q] = acc[t][0];
    red[kw][16u * rw + g][8u * t + 2u * q + 1u] = acc[t][1];
    red[kw][16u * rw + g + 8u][8u * t + 2u * q] = acc[t][2];
    red[kw][16u * rw + g + 8u][8u * t + 2u * q + 1u] = acc[t][3];
  }
  __syncthreads();
  const u32 tokens = m < 8u * MT ? m : 8u * MT;
  const u64 mn = (u64)m * n;
  for (u32 e = tid; e < 16u * RW * tokens; e += DEC_THREADS) {
    const u32 i = e % (16u * RW), j = e / (16u * RW);  // consecutive threads: consecutive n (coalesced)
    const u32 c = MXRT_BID_X * 16u * RW + i;
    if (c >= n) continue;
    float v = red[0][i][j];
#pragma unroll
    for (int w = 1; w < KW; ++w) v += red[w][i][j];
    const u64 idx = (u64)j * n + c;
#if ATOMIC
#if OUT_DTYPE == MXRT_OUT_F32
    mxrt_atomic_add_f32((float*)out + idx, v);
#else
    mxrt_atomic_add_16<OUT_DTYPE>((u16*)out + idx, v);
#endif
#else
#if OUT_DTYPE == MXRT_OUT_F32
    ((float*)out)[(u64)z * mn + idx] = v;
#else
    ((u16*)out)[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v);
#endif
#endif
  }
  (void)mn;
}
