// kernel   gemm_mx_decode_sm90                                                        (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k], m <= 8*MT tokens
//          (decode). Swap-AB: 16 weight rows (B) x 8 tokens (A) per mma.sync m16n8k32 per MX block, from zero,
//          promoted as acc = fma(P * 2^(sb-127), 2^(sa-127), acc) when its scales lie in [64, 190], else by the
//          exact two-step factors (mxrt_scale_steps; NaN for 0xFF). Each warp streams its 16 rows x its K range
//          through a private ring of STAGES shared-memory stages of 4 blocks (cp.async, codes and scales, zero
//          fill past m / n); e2m1 is widened to e4m3 at the fragment read. KW warps split a CTA's 4-block groups,
//          summed in shared memory in warp order; split z covers groups [z*G/split_k, (z+1)*G/split_k), G = k/128.
//          ATOMIC=0 stores slice z of out (fp32 [split_k,m,n] when split_k > 1, else [m,n] OUT_DTYPE); ATOMIC=1
//          adds (fp32 / bf16x2 / f16x2)
// args     const u8* a [m,row bytes] (tokens) | const u8* sa [m,k/32] | const u8* b [n,row bytes] (weights) |
//          const u8* sb [n,k/32] (E8M0, row-major) | void* out | u32 m, u32 n, u32 k, u32 split_k
// grid     (ceil(n/16),1,split_k)   block (32*KW,1,1)   smem max(KW*STAGES*stage bytes, KW*16*8*MT*4) dynamic
// defines  A_FMT, B_FMT (MXRT_FMT_E4M3/_E5M2/_E2M1), OUT_DTYPE (MXRT_OUT_*), ATOMIC, MT (1/2/4/8), KW (warps),
//          STAGES (ring depth)   set by mxrt/ops/gemm_decode.py (variants, smem: mxrt/ops/gemm_decode_kernels.py)
// requires sm_89+; k % 128 == 0; a, b 16-byte aligned; m <= 8*MT; m, n, k/32*max(m,n) < 2^31; split_k <= 65535;
//          ATOMIC with 16-bit out: out 4-byte aligned, m*n even           checked by mxrt/ops/gemm_decode.py
#include "../common/mx_gemm.h"

#if !defined(A_FMT) || !defined(B_FMT) || !defined(OUT_DTYPE) || !defined(ATOMIC) || !defined(MT) || \
    !defined(KW) || !defined(STAGES)
#error "A_FMT, B_FMT, OUT_DTYPE, ATOMIC, MT, KW and STAGES must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(MT == 1 || MT == 2 || MT == 4 || MT == 8, "MT: 1, 2, 4 or 8 token tiles of 8");
MXRT_STATIC_ASSERT(KW >= 1 && KW <= 16, "KW: 1..16 warps");
MXRT_STATIC_ASSERT(STAGES >= 2 && STAGES <= 8, "STAGES: 2..8");
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_F32 || OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16,
                   "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2 || A_FMT == MXRT_FMT_E2M1,
                   "A_FMT: e4m3, e5m2 or e2m1");
MXRT_STATIC_ASSERT(B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1,
                   "B_FMT: e4m3, e5m2 or e2m1");

#define DEC_THREADS (32 * KW)
// bytes of one row's 4 blocks: 128 (fp8) or 64 (e2m1); a stage = 16 weight rows + 8*MT token rows + their scales
#define DEC_WROW (B_FMT == MXRT_FMT_E2M1 ? 64 : 128)
#define DEC_XROW (A_FMT == MXRT_FMT_E2M1 ? 64 : 128)
#define DEC_STAGE_BYTES (16 * DEC_WROW + 8 * MT * DEC_XROW + 16 * 4 + 8 * MT * 4)

// 8 e2m1 codes (nibbles, element 0 in bits 0..3) -> 8 e4m3 bytes: lo word elements 0..3, hi word 4..7.
// Magnitudes through a byte permute of the table {0, 0.5, 1, 1.5, 2, 3, 4, 6}, signs moved from bit 3 to bit 7.
MXRT_DEVICE void dec_e2m1x8_to_e4m3(u32 w, u32& lo, u32& hi) {
  const u32 t0 = 0x3C383000u, t1 = 0x4C484440u;
  const u32 s = w & 0x88888888u, sh = s >> 16;
  const u32 slo = ((s & 0x8u) << 4) | ((s & 0x80u) << 8) | ((s & 0x800u) << 12) | ((s & 0x8000u) << 16);
  const u32 shi = ((sh & 0x8u) << 4) | ((sh & 0x80u) << 8) | ((sh & 0x800u) << 12) | ((sh & 0x8000u) << 16);
  lo = __byte_perm(t0, t1, w & 0x7777u) | slo;
  hi = __byte_perm(t0, t1, (w >> 16) & 0x7777u) | shi;
}

// Byte offset of (row r, 16-byte chunk c) in a stage tile of ROW-byte rows: chunks XOR-swizzled by row so that the
// fragment reads of 8 rows fall in distinct banks (fp8: c ^ (r & 7); e2m1: c ^ ((r >> 1) & 3)).
template <int ROW>
MXRT_DEVICE u32 dec_swz(u32 r, u32 c) {
  return ROW == 128 ? r * 128u + ((c ^ (r & 7u)) << 4) : r * 64u + ((c ^ ((r >> 1) & 3u)) << 4);
}

MXRT_DEVICE u32 dec_smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// cp.async of 16 (or 4) bytes; src_bytes 0 fills zeros and reads nothing.
MXRT_DEVICE void dec_cp16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
MXRT_DEVICE void dec_cp4(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
MXRT_DEVICE void dec_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
MXRT_DEVICE void dec_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The 8 codes of quad position q in block u of row r of a stage tile, as two e4m3/e5m2 words (lo = mma K columns
// 4q..4q+3, hi = 16+4q..16+4q+3): fp8 bytes [8q, 8q+8) of the block; e2m1 nibbles [8q, 8q+8) widened.
template <int FMT>
MXRT_DEVICE void dec_frag(const u8* tile, u32 r, u32 u, u32 q, u32& lo, u32& hi) {
  if constexpr (FMT == MXRT_FMT_E2M1) {
    const u32 w = *(const u32*)(tile + dec_swz<64>(r, u) + 4u * q);
    dec_e2m1x8_to_e4m3(w, lo, hi);
  } else {
    const uint2 v = *(const uint2*)(tile + dec_swz<128>(r, 2u * u + (q >> 1)) + 8u * (q & 1u));
    lo = v.x;
    hi = v.y;
  }
}

#define DEC_MMA_TYPE(F) (F == MXRT_FMT_E5M2 ? 1 : 0)

// D = A (16x32, weights) x B (32x8, tokens), fp32, from zero.
template <int WT, int XT>
MXRT_DEVICE void dec_mma(u32 w0, u32 w1, u32 w2, u32 w3, u32 x0, u32 x1, float (&d)[4]) {
#define DEC_MMA(TA, TB)                                                                                         \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
               "{%10,%10,%10,%10};"                                                                             \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                 \
               : "r"(w0), "r"(w1), "r"(w2), "r"(w3), "r"(x0), "r"(x1), "f"(0.0f))
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

extern "C" __global__ void __launch_bounds__(DEC_THREADS, 1)
    gemm_mx_decode_sm90(const u8* __restrict__ a, const u8* __restrict__ sa, const u8* __restrict__ b,
                        const u8* __restrict__ sb, void* __restrict__ out, u32 m, u32 n, u32 k, u32 split_k) {
  constexpr int WFMT = B_FMT == MXRT_FMT_E2M1 ? MXRT_FMT_E4M3 : B_FMT;  // what the tensor cores see
  constexpr int XFMT = A_FMT == MXRT_FMT_E2M1 ? MXRT_FMT_E4M3 : A_FMT;
  constexpr u32 WROW = DEC_WROW, XROW = DEC_XROW, STAGE = DEC_STAGE_BYTES;
  constexpr u32 X_OFF = 16u * WROW, WS_OFF = X_OFF + 8u * MT * XROW, XS_OFF = WS_OFF + 64u;
  extern __shared__ __align__(16) u8 dsm[];

  const u32 tid = MXRT_TID_X, lane = tid % 32u, warp = tid / 32u;
  const u32 g = lane / 4u, q = lane % 4u;
  const u32 kbt = k / 32u, groups = k / 128u;
  const u32 z = MXRT_BID_Z;
  const u32 cg0 = (u32)((u64)z * groups / split_k), cg1 = (u32)((u64)(z + 1u) * groups / split_k);
  const u32 g0 = cg0 + (u32)((u64)warp * (cg1 - cg0) / KW), g1 = cg0 + (u32)((u64)(warp + 1u) * (cg1 - cg0) / KW);
  const u32 ngr = g1 - g0;
  const u32 row0 = MXRT_BID_X * 16u;
  u8* ring = dsm + warp * (STAGES * STAGE);
  const u32 ring_s = dec_smem_addr(ring);
  const u64 wrow_bytes = (u64)kbt * (WROW / 4u), xrow_bytes = (u64)kbt * (XROW / 4u);

  // Issue the copies of group gi into ring slot `slot`: weight rows, token rows (zero past n / m), 4 scale bytes
  // per row (the scale row's 4 blocks of the group; 4-byte aligned as k % 128 == 0).
  auto issue = [&](u32 gi, u32 slot) {
    const u32 base = ring_s + slot * STAGE;
    constexpr u32 WCH = WROW / 16u, XCH = XROW / 16u;
#pragma unroll
    for (u32 i = 0; i < 16u * WCH / 32u; ++i) {
      const u32 id = i * 32u + lane, r = id / WCH, c = id % WCH;
      const bool ok = row0 + r < n;
      const u8* src = b + (ok ? (u64)(row0 + r) * wrow_bytes + (u64)gi * WROW + 16u * c : 0u);
      dec_cp16(base + dec_swz<WROW>(r, c), src, ok ? 16u : 0u);
    }
#pragma unroll
    for (u32 i = 0; i < (8u * MT * XCH + 31u) / 32u; ++i) {
      const u32 id = i * 32u + lane, r = id / XCH, c = id % XCH;
      if (id < 8u * MT * XCH) {
        const bool ok = r < m;
        const u8* src = a + (ok ? (u64)r * xrow_bytes + (u64)gi * XROW + 16u * c : 0u);
        dec_cp16(base + X_OFF + dec_swz<XROW>(r, c), src, ok ? 16u : 0u);
      }
    }
    if (lane < 16u) {
      const bool ok = row0 + lane < n;
      dec_cp4(base + WS_OFF + 4u * lane, sb + (ok ? (u64)(row0 + lane) * kbt + 4u * gi : 0u), ok ? 4u : 0u);
    }
#pragma unroll
    for (u32 i = 0; i < (8u * MT + 31u) / 32u; ++i) {
      const u32 r = i * 32u + lane;
      if (r < 8u * MT) {
        const bool ok = r < m;
        dec_cp4(base + XS_OFF + 4u * r, sa + (ok ? (u64)r * kbt + 4u * gi : 0u), ok ? 4u : 0u);
      }
    }
  };

  float acc[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;

  // scale bytes of rows / tokens past n / m read as 127 (factor 1), so padding never takes the wide path
  const bool vw0 = row0 + g < n, vw1 = row0 + g + 8u < n;

#pragma unroll
  for (u32 s = 0; s + 1u < STAGES; ++s) {
    if (s < ngr) issue(g0 + s, s);
    dec_commit();
  }
  for (u32 i = 0; i < ngr; ++i) {
    if (i + STAGES - 1u < ngr) issue(g0 + i + STAGES - 1u, (i + STAGES - 1u) % STAGES);
    dec_commit();
    dec_wait<STAGES - 1>();
    __syncwarp();
    const u8* st = ring + (i % STAGES) * STAGE;
    const u32 sw0 = vw0 ? *(const u32*)(st + WS_OFF + 4u * g) : 0x7F7F7F7Fu;
    const u32 sw1 = vw1 ? *(const u32*)(st + WS_OFF + 4u * (g + 8u)) : 0x7F7F7F7Fu;
    u32 sx0[MT], sx1[MT];
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const u32 j = 8u * t + 2u * q;
      sx0[t] = j < m ? *(const u32*)(st + XS_OFF + 4u * j) : 0x7F7F7F7Fu;
      sx1[t] = j + 1u < m ? *(const u32*)(st + XS_OFF + 4u * (j + 1u)) : 0x7F7F7F7Fu;
    }
#pragma unroll
    for (u32 u = 0; u < 4u; ++u) {
      u32 w0, w1, w2, w3;
      dec_frag<B_FMT>(st, g, u, q, w0, w2);
      dec_frag<B_FMT>(st, g + 8u, u, q, w1, w3);
      const u32 s_w0 = (sw0 >> (8u * u)) & 0xFFu, s_w1 = (sw1 >> (8u * u)) & 0xFFu;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        u32 x0, x1;
        dec_frag<A_FMT>(st + X_OFF, 8u * t + g, u, q, x0, x1);
        float d[4];
        dec_mma<DEC_MMA_TYPE(WFMT), DEC_MMA_TYPE(XFMT)>(w0, w1, w2, w3, x0, x1, d);
        // d[0]: (row g, token 2q), d[1]: (g, 2q+1), d[2]: (g+8, 2q), d[3]: (g+8, 2q+1)
        const u32 s_x0 = (sx0[t] >> (8u * u)) & 0xFFu, s_x1 = (sx1[t] >> (8u * u)) & 0xFFu;
        const u32 sw[4] = {s_w0, s_w0, s_w1, s_w1};
        const u32 sx[4] = {s_x0, s_x1, s_x0, s_x1};
        if (dec_fast(s_w0) && dec_fast(s_w1) && dec_fast(s_x0) && dec_fast(s_x1)) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[t][e] = mxrt_fma(d[e] * mxrt_pow2((i32)sw[e] - 127), mxrt_pow2((i32)sx[e] - 127), acc[t][e]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (sw[e] == MXRT_E8M0_NAN || sx[e] == MXRT_E8M0_NAN) {
              acc[t][e] = mxrt_f32_from_bits(0x7FC00000u);
            } else {
              float f1, f2;
              mxrt_scale_steps(sw[e], sx[e], f1, f2);
              acc[t][e] = mxrt_fma(d[e] * f1, f2, acc[t][e]);
            }
          }
        }
      }
    }
    __syncwarp();  // every lane has read slot i % STAGES before iteration i + 1 refills it
  }
  dec_wait<0>();

  // K warps -> shared memory (the ring, now idle) -> summed in warp order
  __syncthreads();
  float* red = (float*)dsm;  // [KW][16][8 * MT]
  constexpr u32 RS = 8u * MT;
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    float* rr = red + (u64)warp * 16u * RS;
    rr[g * RS + 8u * t + 2u * q] = acc[t][0];
    rr[g * RS + 8u * t + 2u * q + 1u] = acc[t][1];
    rr[(g + 8u) * RS + 8u * t + 2u * q] = acc[t][2];
    rr[(g + 8u) * RS + 8u * t + 2u * q + 1u] = acc[t][3];
  }
  __syncthreads();
  const u32 tokens = m < RS ? m : RS;
  const u64 mn = (u64)m * n;
  for (u32 e = tid; e < 16u * tokens; e += DEC_THREADS) {
    const u32 i = e % 16u, j = e / 16u;  // consecutive threads: consecutive n (coalesced)
    const u32 c = row0 + i;
    if (c >= n) continue;
    float v = red[i * RS + j];
#pragma unroll
    for (int w = 1; w < KW; ++w) v += red[(u64)w * 16u * RS + i * RS + j];
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
