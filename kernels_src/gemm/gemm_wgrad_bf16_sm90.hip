// kernel   gemm_wgrad_bf16_sm90                                                        (extern "C")
// computes on exact bf16 operands (the grouped GEMMs' dequantised workspaces), fp32 accumulation in the tensor cores:
//          MODE 0 the variable-K wgrad out[g] (+)= A[:, P[g]:P[g+1]] @ B[:, P[g]:P[g+1]].T; MODE 1 the forward / dgrad
//          out[rows P[g]..P[g+1]] = A[those rows] @ B[g n .. g n + n].T over all k (rows past P[G] stored as zeros);
//          MODE 2 as MODE 0 with float32 factors per 128 columns: sum over blocks c of fa[c, i] fb[c, j] (A_c B_c^T)
// args     const __grid_constant__ mxrt_tmap tma, tmb (bf16 A [m, kp], B [n or G n, kp] as uint8 [rows, 2 kp]: boxes
//          128 B x 128 / BN rows, SWIZZLE_128B, zero fill) | void* out ([G, m, n] / [m, n]) | const i32* ends [G]
//          (P[g + 1], P[0] = 0) | const u32* gate (null, or a word: the grid returns at once unless it is 0) | u32 m,
//          n, G, k (MODE 1) | const float* fa [kp/128, m], fb [kp/128, n] (MODE 2; else null)
// grid     MODE 0 / 2 (ceil(m/128) ceil(n/BN), 1, G); MODE 1 ((ceil(m/128) + G + 1) ceil(n/BN), 1, 1), GROUP_M 8 raster
//          block (384,1,1): thread 0 issues the TMA loads, warpgroups 1, 2 multiply 64 of a tile's 128 rows each
// defines  OUT_DTYPE, ACCUM (MODE 0 / 2: out + the sum, rounded once), STAGES (3..6), BN (128 / 256), MODE (0..2)
// smem     ops/grouped_wgrad_bf16.py smem_bytes (STAGES x (16 + BN / 8) KB + barriers + 1 KB alignment)
// requires sm_90a; ends non-decreasing; MODE 0: ends % 16 == 0, MODE 2 % 128, <= kp; MODE 1: k % 16; m, n < 2^31
//                                                                     checked and set by mxrt/ops/grouped_wgrad_bf16.py
//
// The K range comes in tiles of 64 columns; in a last tile of 16-48 columns each consumer warpgroup zeroes its A
// columns past the range (the next group's, or zero padding) before the tile's four k16 wgmmas.
#include "../common/mx_gemm.h"

#if !defined(OUT_DTYPE) || !defined(ACCUM) || !defined(STAGES) || !defined(BN)
#error "OUT_DTYPE, ACCUM, STAGES and BN must be defined by the launcher"
#endif
#ifndef MODE
#define MODE 0
#endif
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_F32 || OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16,
                   "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(ACCUM == 0 || ACCUM == 1, "ACCUM: 0 or 1");
MXRT_STATIC_ASSERT(STAGES >= 3 && STAGES <= 6, "STAGES: 3..6 stages");
MXRT_STATIC_ASSERT(BN == 128 || BN == 256, "BN: 128 or 256 output columns a tile");
MXRT_STATIC_ASSERT(STAGES * (16 + BN / 8) <= 220, "STAGES x (16 + BN / 8) KB of shared memory");
MXRT_STATIC_ASSERT(MODE == 0 || (MODE == 1 && ACCUM == 0) || (MODE == 2 && BN == 128 && OUT_DTYPE == MXRT_OUT_F32),
                   "MODE: 0 the wgrad, 1 the lens forward / dgrad, 2 float32 factors per 128 columns (BN 128, f32 out)");
#define BM 128
#define GROUP_M 8
#include "gemm_tile_raster.h"

#if defined(MXRT_CUDA)
#include "sm90_async.h"

#define WG_ATILE 16384u      // A's stage: 128 rows x 64 bf16 (128 bytes, swizzled)
#define WG_BTILE (BN * 128u)  // B's stage: BN rows x 64 bf16
#define WG_STAGE (WG_ATILE + WG_BTILE)
#define WG_REGS (BN / 2)      // accumulators per consumer thread (m64nBN)

// d += A(64x16) * B(16xBN)^T, bf16 from shared memory (K-major, 128-byte swizzle), fp32 accumulate
#define WG_R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_R64(i) WG_R8(i), WG_R8(i + 8), WG_R8(i + 16), WG_R8(i + 24), WG_R8(i + 32), WG_R8(i + 40), WG_R8(i + 48), \
                  WG_R8(i + 56)
#define WG_S16(a) "%" #a "0, %" #a "1, %" #a "2, %" #a "3, %" #a "4, %" #a "5, %" #a "6, %" #a "7, %" #a "8, %" #a "9, "
MXRT_DEVICE void wg_mma_bf16(float (&d)[WG_REGS], u64 da, u64 db) {
#if BN == 128
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
      WG_S16(1) WG_S16(2) WG_S16(3) WG_S16(4) WG_S16(5) "%60, %61, %62, %63}, %64, %65, 1, 1, 1, 0, 0;\n}\n"
      : WG_R64(0)
      : "l"(da), "l"(db)
      : "memory");
#else
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
      WG_S16(1) WG_S16(2) WG_S16(3) WG_S16(4) WG_S16(5) WG_S16(6) WG_S16(7) WG_S16(8) WG_S16(9) WG_S16(10)
      WG_S16(11) "%120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n}\n"
      : WG_R64(0), WG_R64(64)
      : "l"(da), "l"(db)
      : "memory");
#endif
}
#undef WG_S16
#undef WG_R64
#undef WG_R8

MXRT_DEVICE void wg_fence_acc(float (&d)[WG_REGS]) {
#pragma unroll
  for (int i = 0; i < WG_REGS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}


extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgrad_bf16_sm90(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                         void* __restrict__ out, const i32* __restrict__ ends, const u32* __restrict__ gate, u32 m,
                         u32 n, u32 G, u32 k, const float* __restrict__ fa, const float* __restrict__ fb) {
  if (gate != nullptr && *gate != 0u) return;  // the exact fallback computes every output (uniform: the whole CTA)
  extern __shared__ u8 smem_raw[];
  u8* dsm = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const u32 tiles = smem_addr(dsm), bars = tiles + STAGES * WG_STAGE;
  const u32 full0 = bars, empty0 = bars + 8u * STAGES;
  const u32 tid = MXRT_TID_X;
  u32 m0, n0, c0, c1, g, row_end, brow;  // tile origin, K range, group, rows stored below row_end, B's first row
#if MODE == 1
  // unit x: the groups' row tiles x the column tiles in group order (each group's GROUP_M raster), then the tail rows
  // [S, m) past the last group (stored as zeros); units past those exit (the grid is the host bound)
  {
    const u32 tn = (n + BN - 1u) / BN;
    u32 u = MXRT_BID_X, start = 0u;
    g = G;
    for (u32 j = 0; j < G; ++j) {
      const u32 e = (u32)ends[j] > start ? (u32)ends[j] : start, cnt = (e - start + BM - 1u) / BM * tn;
      if (u < cnt) {
        g = j;
        ws_tile(u, (e - start + BM - 1u) / BM, tn, m0, n0);
        m0 += start;
        row_end = e;
        break;
      }
      u -= cnt;
      start = e;
    }
    if (g == G) {  // the tail
      const u32 cnt = (m - start + BM - 1u) / BM * tn;
      if (u >= cnt) return;  // uniform: the whole CTA
      ws_tile(u, (m - start + BM - 1u) / BM, tn, m0, n0);
      m0 += start;
      row_end = m;
    }
    (void)fa;
    (void)fb;
    c0 = 0u;
    c1 = g == G ? 0u : k;  // the tail multiplies nothing
    brow = (g == G ? 0u : g) * n + n0;
  }
#else
  (void)k;
#if MODE == 0
  (void)fa;
  (void)fb;
#endif
  g = MXRT_BID_Z;
  ws_tile(MXRT_BID_X, (m + BM - 1u) / BM, (n + BN - 1u) / BN, m0, n0);
  c0 = g == 0u ? 0u : (u32)ends[g - 1u];
  c1 = (u32)ends[g];
  row_end = m;
  brow = n0;
#endif
  const u32 nk = c1 > c0 ? (c1 - c0 + 63u) / 64u : 0u;  // the unit's tiles of 64 columns
  if (tid == 0) {
    for (u32 s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8u * s, 1u);  // the TMA thread's arrive.expect_tx
      mbar_init(empty0 + 8u * s, 256u);  // every consumer thread, once its wgmmas of the stage are done
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tma) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tmb) : "memory");
  }
  __syncthreads();
  if (tid < 128u) {
    // ---------------- producer: thread 0 streams the group's tiles through the ring ----------------
    if (tid == 0) {
      for (u32 t = 0; t < nk; ++t) {
        const u32 slot = t % STAGES, full = full0 + 8u * slot;
        if (t >= STAGES) mbar_wait(empty0 + 8u * slot, ((t / STAGES) - 1u) & 1u);
        mbar_arrive_tx(full, WG_STAGE);  // rows past m / n and columns past kp arrive as zeros
        const i32 col = (i32)(2u * (c0 + 64u * t));  // bytes
        tma_load_2d(tiles + slot * WG_STAGE, &tma, full, col, (i32)m0);
        tma_load_2d(tiles + slot * WG_STAGE + WG_ATILE, &tmb, full, col, (i32)brow);
      }
    }
    return;
  }
  // ---------------- consumer warpgroup w: rows m0 + 64 w .. + 64 of the tile ----------------
  const u32 w = tid / 128u - 1u, t = tid % 128u, lane = t % 32u;
  float acc[WG_REGS];
#pragma unroll
  for (int i = 0; i < WG_REGS; ++i) acc[i] = 0.0f;
#if MODE == 2
  // blocks of 128 columns (two stages): the block's eight k16 wgmmas into a partial p from zero, then
  // acc += p * fb[col] * fa[row] (one FMUL + FFMA an element). The factors' global loads are issued before the
  // wgmmas: fa's two per thread in registers, fb's 128 of the tile one per thread, parked in shared memory (a
  // buffer per warpgroup and block parity; the warpgroup's barrier after the stores also orders the reads of the
  // block two back before them) and read after the wait (64 + 64 registers are live across it)
  {
    __shared__ __align__(16) float fb_s[2][2][BN];
    const u32 r0 = m0 + 64u * w + 16u * (t / 32u) + lane / 4u, cq0 = n0 + 2u * (lane % 4u);
    const u32 nb = nk / 2u, b0 = c0 / 128u;
    float p[WG_REGS];
    for (u32 kb = 0; kb < nb; ++kb) {
      const u64 b = b0 + kb;
      const float fa0 = r0 < m ? fa[b * m + r0] : 0.0f, fa1 = r0 + 8u < m ? fa[b * m + r0 + 8u] : 0.0f;
      const float fbt = n0 + t < n ? fb[b * n + n0 + t] : 0.0f;  // column n0 + t of the tile
#pragma unroll
      for (int i = 0; i < WG_REGS; ++i) p[i] = 0.0f;
#pragma unroll
      for (u32 h = 0; h < 2; ++h) {
        const u32 kt = 2u * kb + h, slot = kt % STAGES;
        mbar_wait(full0 + 8u * slot, (kt / STAGES) & 1u);
        const u32 ta = tiles + slot * WG_STAGE + w * 64u * 128u, tb = tiles + slot * WG_STAGE + WG_ATILE;
        wg_fence();
#pragma unroll
        for (u32 s = 0; s < 4; ++s) wg_mma_bf16(p, make_desc(ta + 32u * s), make_desc(tb + 32u * s));
        wg_commit();
      }
      float* fbk = fb_s[w][kb & 1u];
      fbk[t] = fbt;
      if (w == 0u) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
      } else {
        asm volatile("bar.sync 2, 128;" ::: "memory");
      }
      wg_wait<0>();
      wg_fence_acc(p);
      mbar_arrive(empty0 + 8u * ((2u * kb) % STAGES));
      mbar_arrive(empty0 + 8u * ((2u * kb + 1u) % STAGES));
#pragma unroll
      for (u32 j = 0; j < BN / 8u; ++j) {
        const float2 f01 = *reinterpret_cast<const float2*>(fbk + cq0 - n0 + 8u * j);
        const float f0 = f01.x, f1 = f01.y;
#pragma unroll
        for (u32 e = 0; e < 4; ++e) {  // accumulator 4 j + e: row r0 + 8 (e / 2), column cq0 + 8 j + e % 2
          acc[4 * j + e] = fmaf(p[4 * j + e] * ((e & 1u) ? f1 : f0), e < 2u ? fa0 : fa1, acc[4 * j + e]);
        }
      }
    }
  }
#else
  for (u32 kt = 0; kt < nk; ++kt) {
    const u32 slot = kt % STAGES;
    mbar_wait(full0 + 8u * slot, (kt / STAGES) & 1u);
    const u32 ta = tiles + slot * WG_STAGE + w * 64u * 128u, tb = tiles + slot * WG_STAGE + WG_ATILE;
    const u32 valid = c1 - c0 - 64u * kt;  // a last tile of 16, 32 or 48 columns (ends % 16 == 0): CTA-uniform
    if (valid < 64u) {
      // zero this warpgroup's A columns past the group (the next group's, finite: 0 x them is 0) instead of issuing
      // fewer wgmmas: a wgmma on a data-dependent path made ptxas serialise every wgmma of the kernel (C7519)
      u8* ar = dsm + slot * WG_STAGE + w * 64u * 128u;
      for (u32 i = t; i < 64u * 8u; i += 128u) {
        const u32 row = i / 8u, c = i % 8u;  // 16-byte chunk c (8 columns) of row `row`, at c ^ (row & 7)
        if (8u * c >= valid) *reinterpret_cast<uint4*>(ar + 128u * row + ((c ^ (row & 7u)) << 4)) = uint4{0, 0, 0, 0};
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the wgmmas read through the async proxy
      if (w == 0u) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
      } else {
        asm volatile("bar.sync 2, 128;" ::: "memory");
      }
    }
    wg_fence();
#pragma unroll
    for (u32 s = 0; s < 4; ++s) wg_mma_bf16(acc, make_desc(ta + 32u * s), make_desc(tb + 32u * s));
    wg_commit();
    wg_wait<1>();  // the previous stage's wgmmas are done: release its slot
    if (kt > 0) mbar_arrive(empty0 + 8u * ((kt - 1u) % STAGES));
  }
  wg_wait<0>();
  wg_fence_acc(acc);
#endif
  // ---------------- epilogue: this thread's rows r, r + 8 and column pairs 8 j + 2 q ----------------
  if (ACCUM && nk == 0u) return;  // out + 0: untouched
  const u32 r = m0 + 64u * w + 16u * (t / 32u) + lane / 4u;  // the m64 fragment: warp t / 32 holds 16 rows
  const u32 cq = n0 + 2u * (lane % 4u);
  const u64 base = MODE == 1 ? 0ull : (u64)g * m * n;
#pragma unroll
  for (u32 h = 0; h < 2; ++h) {
    const u32 row = r + 8u * h;
    if (row >= row_end) continue;
#pragma unroll
    for (u32 j = 0; j < BN / 8u; ++j) {
      const u32 col = cq + 8u * j;
#pragma unroll
      for (u32 e = 0; e < 2; ++e) {
        if (col + e >= n) continue;
        const u64 idx = base + (u64)row * n + col + e;
        float v = acc[4 * j + 2 * h + e];
#if OUT_DTYPE == MXRT_OUT_F32
        if (ACCUM) v += ((const float*)out)[idx];
        ((float*)out)[idx] = v;
#else
        if (ACCUM) v += mxrt_16_bits_to_f32<OUT_DTYPE>(((const u16*)out)[idx]);
        ((u16*)out)[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v);
#endif
      }
    }
  }
}
#endif  // MXRT_CUDA
