// kernel   gemm_mx_sm90_bf16                                                          (extern "C")
// computes out[m,n] = sum_k (A[m,k] 2^(sa-127)) (B[n,k] 2^(sb-127)) (NT, MX block 32 along K), the issue-10 bf16 route
//          (design notes below): every element dequantised exactly to bf16 on chip, one fp32 accumulator over all K
// args     const __grid_constant__ mxrt_tmap tma, tmb (fp8 codes A [m,k], B [n,k] uint8, boxes 64 bytes x 256 / 128
//          rows, SWIZZLE_64B, zero OOB fill) | const u8* sa, sb (E8M0 row-major [rows, ceil(k/32)] or layouts SLA /
//          SLB in place) | void* out [m,n] | int m, n, k | const u32* gate (0: the window check passed, else the
//          exact SIMT fallback runs) | const u8* ca, cb (the codes as plain pointers, rows k bytes apart: fallback)
// grid     (min(#SMs, tiles),1,1) persistent, GROUP_M 8 raster of 256 x 128 tiles; block (384,1,1): warpgroups 0, 1
//          consume (128 rows each as two m64 halves, m64n128k16 RS wgmma), warpgroup 2 produces (thread 256 the
//          TMAs, warps 9-11 convert B and the A multipliers); smem: gemm_sm90_bf16.py smem_bytes
// defines  A_FMT, B_FMT (e4m3 / e5m2; e2m1 expanded first), OUT_DTYPE, RING (3..5), SLA, SLB, PRODUCER_REGS
//          (56 / 72 / 88), BF_DIAG / BF_PROF (timing diagnostics); the shared header's BM 256, BN 128, STAGES 3,
//          ATOMIC 0, DBUF 0, DIAG 0 are fixed by the launcher and unused here
// requires sm_90a; k % 16 == 0, code bases 16-byte aligned (TMA); m, n, ceil(k/32) * max(m, n) and a layout's
//          storage < 2^31; no split-K.   Checked by mxrt/ops/gemm_sm90_bf16.py supports()
//
// Design: A in registers (RS wgmma, converted by the consumers), B converted by three converter warps into a
// swizzled bf16 tile. Exact while every scale byte lies in the format's window (e4m3 [10, 134], e5m2 [17, 142], or
// 255 = NaN): bf16 holds every scaled element there. The launcher's device-side check (mx_gemm_window.hip) sets
// *gate for any other byte and for NaN / Inf codes inside a finite-scale block (the bit tricks would not propagate
// them); the kernel then computes every output with an exact SIMT loop instead (slow: pathological inputs only).
#if !defined(SLA) || !defined(SLB) || !defined(RING) || !defined(PRODUCER_REGS)
#error "SLA, SLB, RING and PRODUCER_REGS must be defined by the launcher"
#endif
#include "gemm_sm90_tile.h"
#include "../common/mx_dequant.h"

#if defined(MXRT_CUDA)

MXRT_STATIC_ASSERT(RING >= 3 && RING <= 5, "RING: 3..5 stages of 42 KB");
MXRT_STATIC_ASSERT(ATOMIC == 0, "gemm_mx_sm90_bf16 stores (ATOMIC 0)");
// BF_DIAG (timing diagnostics, inexact): 1 the converter warps only wait for the TMA and arrive (no B tile, no
// multipliers); 2 the consumers skip the A conversion (raw code words as fragments); 3 both
#ifndef BF_DIAG
#define BF_DIAG 0
#endif
// BF_PROF (timing diagnostic): clock64 intervals of one lane per role summed per CTA into gate[2..] (u64 slots):
// 1 TMA wait empty, 2 TMA total, 3 converter wait full, 4 converter convert, 5 converter total, 6 consumer wait
// full + conv, 7 consumer wg_wait, 8 consumer convert + issue, 9 consumer epilogue, 10 consumer total, 11
// converter loop top (the copies of the prefetched scales), 12 converter next-stage scale load issue
#ifndef BF_PROF
#define BF_PROF 0
#endif
#if BF_PROF
#define PROF_DECL u64 prof_[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; u64 pt_ = clock64(); const u64 p0_ = pt_;
#define PROF_MARK(I) do { const u64 t_ = clock64(); prof_[I] += t_ - pt_; pt_ = t_; } while (0)
#define PROF_SKIP() do { pt_ = clock64(); } while (0)
#define PROF_END(I, FIRST, LAST, ON)                                                                           \
  do {                                                                                                      \
    prof_[I] = clock64() - p0_;                                                                             \
    if (ON)                                                                                                 \
      for (int i_ = FIRST; i_ <= LAST; ++i_)                                                                \
        atomicAdd(reinterpret_cast<unsigned long long*>(const_cast<u32*>(gate)) + i_, (unsigned long long)prof_[i_]); \
  } while (0)
#else
#define PROF_DECL
#define PROF_MARK(I) do { } while (0)
#define PROF_SKIP() do { } while (0)
#define PROF_END(I, FIRST, LAST, ON) do { } while (0)
#endif
MXRT_STATIC_ASSERT(PRODUCER_REGS == 56 || PRODUCER_REGS == 72 || PRODUCER_REGS == 88,
                   "PRODUCER_REGS: 56 / 72 / 88 (consumers 224 / 216 / 208: 384 x 168 in all)");

#define BF_THREADS 384
// 2 x 128 x 216 + 128 x 72 = 384 x 168, the launch's registers: the converter warps need room for their
// conversions to overlap (at 56 they ran latency-bound, ~10 cycles per instruction: device call 1)
#define BF_PRODUCER_REGS PRODUCER_REGS
#define BF_CONSUMER_REGS (224 - ((PRODUCER_REGS - 56) / 2))
#define BF_BM 256
#define BF_BN 128
#define BF_BK 64                        // K elements (fp8 bytes) per stage: two MX blocks
#define BF_TILE_A (BF_BM * BF_BK)       // 16 KB fp8, 64-byte rows, SWIZZLE_64B
#define BF_TILE_B (BF_BN * BF_BK)       // 8 KB fp8
#define BF_TILE_W (BF_BN * BF_BK * 2)   // 16 KB bf16 B, 128-byte rows, SWIZZLE_128B (the wgmma operand)
#define BF_MULT (BF_BM * 8)             // 2 KB: per A row the two blocks' bf16x2 multipliers
#define BF_GROUPS (2 * 6 * 96 * 8)      // 9 KB: the converters' scale words, [2 groups][6 slots][96 lanes] u64
// bf16 bits of a code with the sign byte kept and the magnitude shifted into the exponent / mantissa fields: the
// element times 2^-120 (e4m3, shift 4) or 2^-112 (e5m2, shift 3), normal or subnormal alike; the multiplier
// 2^(s - 127 + 120 / 112) restores it with one bf16 multiply (exact while the result is a normal bf16)
#if A_FMT == MXRT_FMT_E4M3
#define BF_SH_A 4
#define BF_BIAS_A 120
#else
#define BF_SH_A 3
#define BF_BIAS_A 112
#endif
#if B_FMT == MXRT_FMT_E4M3
#define BF_SH_B 4
#define BF_BIAS_B 120
#else
#define BF_SH_B 3
#define BF_BIAS_B 112
#endif

// the multiplier of scale byte s as bf16x2 (both halves): 2^(s - 127 + bias); 255 -> NaN; out: 0 (a row or block
// outside the matrix, where TMA brought zero codes). Bytes past the window saturate (the launcher's check keeps
// such operands off this kernel).
template <int BIAS>
MXRT_DEVICE u32 bf_mult(u32 s, bool in) {
  const u32 e = s + BIAS > 254u ? 254u : s + BIAS;
  const u32 h = !in ? 0u : (s == 255u ? 0x7FC0u : e << 7);
  return h | (h << 16);
}

// MX blocks 8 q .. 8 q + 7 (q = kt / 4: the stages kt .. kt + 3 of a 4-aligned kt) of matrix row `row` in layout L,
// block 8 q + b in byte b; 0 for a row outside the matrix and for blocks past kbs (a finite multiplier: TMA
// brought zero codes there). words: row-major with kbs % 8 == 0, one aligned 8-byte load
template <int L>
MXRT_DEVICE u64 bf_group(const u8* s, u32 row, u32 rows, u32 kt, u32 kbs, bool words) {
  if (row >= rows) return 0u;
  const u32 c0 = 2u * kt;
  if (words) return __ldg(reinterpret_cast<const unsigned long long*>(s + (u64)row * kbs + c0));
  u64 v = 0u;
#pragma unroll
  for (u32 b = 0; b < 8; ++b)
    if (c0 + b < kbs) v |= (u64)__ldg(s + sm90_scale_offset<L>(row, c0 + b, rows, kbs)) << (8u * b);
  return v;
}

// ws_tile / WsCursor: the engine's persistent GROUP_M raster over 256 x 128 tiles (BM, BN of the launcher)
MXRT_STATIC_ASSERT(BM == BF_BM && BN == BF_BN, "gemm_mx_sm90_bf16: the launcher's BM / BN are the tile");
#include "gemm_tile_raster.h"

// d += A(64x16, registers) * B(16x128)^T, bf16 inputs, fp32 accumulate
MXRT_DEVICE void wgmma_bf16_rs(float (&d)[64], const u32 (&a)[4], u64 db) {
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)
      : "memory");
}
// The exact fallback (gate set: a scale outside the window, or a NaN / Inf code in a finite-scale block somewhere
// in A or B): every thread of the CTA computes whole outputs of its tiles in fp32 SIMT, per MX block the partial
// sum of decoded products (mx_gemm.h mxrt_decode) applied with the two-step factors of mxrt_scale_steps, as the
// generic kernel does; NaN scales give NaN. Slow (pathological inputs only) and exact.
MXRT_DEVICE void bf_exact_tiles(const u8* ca, const u8* cb, const u8* sa, const u8* sb, void* out, int m, int n,
                                int k, u32 tiles_m, u32 tiles_n, u32 ntiles) {
  const u32 kbs = ((u32)k + 31u) / 32u;
  for (u32 t = MXRT_BID_X; t < ntiles; t += (u32)gridDim.x) {
    u32 m0, n0;
    ws_tile(t, tiles_m, tiles_n, m0, n0);
    for (u32 idx = MXRT_TID_X; idx < BF_BM * BF_BN; idx += BF_THREADS) {
      const u32 row = m0 + idx / BF_BN, col = n0 + idx % BF_BN;
      if (row >= (u32)m || col >= (u32)n) continue;
      const u8* pa = ca + (u64)row * (u32)k;
      const u8* pb = cb + (u64)col * (u32)k;
      float acc = 0.0f;
      for (u32 kb = 0; kb < kbs; ++kb) {
        float part = 0.0f;
        const u32 k1 = 32u * kb + 32u < (u32)k ? 32u * kb + 32u : (u32)k;
        for (u32 kk = 32u * kb; kk < k1; ++kk)
          part = mxrt_fma(mxrt_decode<A_FMT>(pa[kk]), mxrt_decode<B_FMT>(pb[kk]), part);
        const u32 s_a = sa[sm90_scale_offset<SLA>(row, kb, (u32)m, kbs)];
        const u32 s_b = sb[sm90_scale_offset<SLB>(col, kb, (u32)n, kbs)];
        if (s_a == 255u || s_b == 255u) {
          acc = __uint_as_float(0x7FC00000u);
        } else {
          float f1, f2;
          mxrt_scale_steps(s_a, s_b, f1, f2);
          acc = mxrt_fma(part * f1, f2, acc);
        }
      }
      store_pair(out, (u64)row * (u32)n + col, acc, 0.0f, false, false);
    }
  }
}

extern "C" __global__ void __launch_bounds__(BF_THREADS, 1)
    gemm_mx_sm90_bf16(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                      const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out, int m, int n,
                      int k, const u32* __restrict__ gate, const u8* __restrict__ ca, const u8* __restrict__ cb) {
  if (*gate != 0u) {  // the window check failed (mx_gemm_window.hip): the exact SIMT fallback writes out
    const u32 tm = ((u32)m + BF_BM - 1) / BF_BM, tn = ((u32)n + BF_BN - 1) / BF_BN;
    bf_exact_tiles(ca, cb, sa, sb, out, m, n, k, tm, tn, tm * tn);
    return;
  }
  PROF_DECL
  extern __shared__ u8 smem_raw[];
  u8* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  u8* tile_a = smem;                                 // RING x BF_TILE_A
  u8* tile_b = tile_a + RING * BF_TILE_A;            // RING x BF_TILE_B
  u8* tile_w = tile_b + RING * BF_TILE_B;            // RING x BF_TILE_W (1024-aligned: 16 KB steps)
  u32* mult_s = reinterpret_cast<u32*>(tile_w + RING * BF_TILE_W);  // RING x [256 rows][2]
  u64* gbuf = reinterpret_cast<u64*>(tile_w + RING * BF_TILE_W + RING * BF_MULT);
  u64* bars = reinterpret_cast<u64*>(tile_w + RING * BF_TILE_W + RING * BF_MULT + BF_GROUPS);
  const u32 full0 = smem_addr(bars), conv0 = smem_addr(bars + RING), empty0 = smem_addr(bars + 2 * RING);
  const u32 tid = MXRT_TID_X;
  const u32 tiles_m = ((u32)m + BF_BM - 1) / BF_BM, tiles_n = ((u32)n + BF_BN - 1) / BF_BN;
  const u32 ntiles = tiles_m * tiles_n;
  const u32 kbs = ((u32)k + 31u) / 32u, nkt = ((u32)k + BF_BK - 1) / BF_BK;
  const void* ta = &tma;
  const void* tb = &tmb;
  if (tid == 0) {
    for (u32 s = 0; s < RING; ++s) {
      mbar_init(full0 + 8 * s, 1);     // the TMA thread (+ tx bytes)
      mbar_init(conv0 + 8 * s, 96);    // the three converter warps, every lane after its stores
      mbar_init(empty0 + 8 * s, 256);  // every consumer thread after the stage's wgmmas completed
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(ta) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(tb) : "memory");
  }
  __syncthreads();

  if (tid >= 256u) {
    // ---------------- producer warpgroup ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(BF_PRODUCER_REGS));
    const u32 pw = (tid - 256u) / 32u, lane = tid % 32u;
    const u32 bid = MXRT_BID_X, grid = (u32)gridDim.x;
    const u32 total = bid < ntiles ? ((ntiles - bid + grid - 1u) / grid) * nkt : 0u;  // this CTA's stages
    if (pw == 0) {
      if (lane == 0) {
        WsCursor c = ws_start(bid, tiles_m, tiles_n);
        for (u32 g = 0; g < total; ++g, ws_next(c, nkt, grid, ntiles, tiles_m, tiles_n)) {
          const u32 slot = g % RING;
          PROF_SKIP();
          if (g >= RING) mbar_wait(empty0 + 8 * slot, ((g / RING) - 1u) & 1u);
          PROF_MARK(1);
          mbar_arrive_tx(full0 + 8 * slot, BF_TILE_A + BF_TILE_B);
          tma_load_2d(smem_addr(tile_a + slot * BF_TILE_A), ta, full0 + 8 * slot, (i32)(c.kt * BF_BK), (i32)c.m0);
          tma_load_2d(smem_addr(tile_b + slot * BF_TILE_B), tb, full0 + 8 * slot, (i32)(c.kt * BF_BK), (i32)c.n0);
        }
        PROF_END(2, 1, 2, true);
      }
    } else {
      // converter warps 9-11 (ct = 0..95) share every stage: B units u = ct + 96 i < 256 (row u % 128, block
      // u / 128 of the stage), A rows ct + 96 i < 256 (multipliers of both blocks). Scales come as 8-block words
      // (bf_group: blocks 8 q .. 8 q + 7 of a row, the stages 4 q .. 4 q + 3), loaded once per 4 stages and one
      // group ahead: per-stage byte loads from every row stalled the converters ~5 k cycles per stage (call 5).
      const u32 ct = tid - 288u;
      WsCursor c = ws_start(bid, tiles_m, tiles_n);
      // 8-byte cp.async words: row-major, kbs % 8 == 0 and both scale bases 8-byte aligned (a view of a scale
      // buffer may start anywhere)
      const bool words = SLA == MXRT_SCALE_LAYOUT_NONE && SLB == MXRT_SCALE_LAYOUT_NONE && kbs % 8u == 0u &&
                         ((reinterpret_cast<u64>(sa) | reinterpret_cast<u64>(sb)) & 7u) == 0u;
      // group words staged in shared memory, one group ahead: slot i < 3 A row ct + 96 i, 3 + i the B row of
      // unit i; each lane reads back only its own copies (cp.async.wait_group orders them), so no barrier
      auto stage_group = [&](u32 gb, u32 m0, u32 n0, u32 kt) {
#pragma unroll
        for (u32 i = 0; i < 6; ++i) {
          const u32 u = ct + 96u * (i % 3u);
          if (u >= 256u) continue;
          const bool is_a = i < 3u;
          const u32 row = is_a ? m0 + u : n0 + (u & 127u), rows = is_a ? (u32)m : (u32)n;
          u64* dst = gbuf + (gb * 6u + i) * 96u + ct;
          if (words && row < rows) {
            const u8* src = (is_a ? sa : sb) + (u64)row * kbs + 2u * kt;
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
          } else {
            *dst = is_a ? bf_group<SLA>(sa, row, rows, kt, kbs, false) : bf_group<SLB>(sb, row, rows, kt, kbs, false);
          }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
      };
      // the cursor of the next group to stage (kt a multiple of 4: the next 4 stages of this tile, or the next tile)
      WsCursor lc = c;
      auto next_group = [&]() {
        if (lc.kt + 4u < nkt) {
          lc.kt += 4u;
        } else {
          lc.kt = 0u;
          lc.tile += grid;
          if (lc.tile < ntiles) ws_tile(lc.tile, tiles_m, tiles_n, lc.m0, lc.n0);
        }
      };
      u32 buf = 0;
      if (total > 0u) stage_group(0u, lc.m0, lc.n0, lc.kt);
      for (u32 g = 0; g < total; ++g, ws_next(c, nkt, grid, ntiles, tiles_m, tiles_n)) {
        PROF_SKIP();
        const u32 slot = g % RING;
        if ((c.kt & 3u) == 0u) {  // a new group: its words landed; stage the next group's into the other buffer
          asm volatile("cp.async.wait_group 0;" ::: "memory");
          if (g > 0u) buf ^= 1u;
          next_group();
          if (lc.tile < ntiles) stage_group(buf ^ 1u, lc.m0, lc.n0, lc.kt);
        }
        PROF_MARK(12);
        mbar_wait(full0 + 8 * slot, (g / RING) & 1u);  // TMA landed (and the slot's previous readers are done)
        PROF_MARK(3);
        if (BF_DIAG & 1) {
          mbar_arrive(conv0 + 8 * slot);
          continue;
        }
        const u32 sh = 16u * (c.kt & 3u);  // this stage's two bytes in the group words
        const u64* gw = gbuf + buf * 6u * 96u + ct;
        u32* ms = mult_s + slot * (BF_BM * 2);
        const u8* bt = tile_b + slot * BF_TILE_B;
        u8* wt = tile_w + slot * BF_TILE_W;
        // every shared-memory load of the stage first (scale words, the units' codes), then the conversions and
        // stores: the compiler may not move a load across a possibly aliasing store, and one unit at a time left
        // the converters waiting on their own dependency chains (ncu call 7: 'wait' + 'short scoreboard')
        const bool has3 = ct + 192u < 256u;
        u64 wsa[3], wsb[3];
        uint4 cd[3][2];
#pragma unroll
        for (u32 i = 0; i < 3; ++i) {
          if (i < 2u || has3) {
            const u32 u = ct + 96u * i, r = u & 127u, j = u >> 7;
            wsa[i] = gw[96u * i];
            wsb[i] = gw[96u * (3u + i)];
            cd[i][0] = *reinterpret_cast<const uint4*>(bt + r * 64u + 16u * ((2u * j) ^ ((r >> 1) & 3u)));
            cd[i][1] = *reinterpret_cast<const uint4*>(bt + r * 64u + 16u * ((2u * j + 1u) ^ ((r >> 1) & 3u)));
          }
        }
#pragma unroll
        for (u32 i = 0; i < 3; ++i) {
          const u32 r = ct + 96u * i;
          if (i < 2u || has3) {
            const u32 v = (u32)(wsa[i] >> sh);
            uint2 mm;
            mm.x = bf_mult<BF_BIAS_A>(v & 255u, c.m0 + r < (u32)m);
            mm.y = bf_mult<BF_BIAS_A>((v >> 8) & 255u, c.m0 + r < (u32)m);
            *reinterpret_cast<uint2*>(ms + 2u * r) = mm;
          }
        }
#pragma unroll
        for (u32 i = 0; i < 3; ++i) {
          if (i < 2u || has3) {
            const u32 u = ct + 96u * i, r = u & 127u, j = u >> 7;
            const u32 mb = bf_mult<BF_BIAS_B>((u32)(wsb[i] >> (sh + 8u * j)) & 255u, c.n0 + r < (u32)n);
            // the block's 32 codes (logical 16-byte chunks 2j, 2j + 1 of the 64-byte row): k16 step 2j gets chunk
            // 4j = lo(W0, W2, W4, W6) and 4j+1 = hi(...), step 2j+1 lo / hi of W1, W3, ... (the K order of the
            // consumers' register fragments of A); 128B swizzle: chunk c at c ^ (r & 7)
            const uint4 c0 = cd[i][0], c1 = cd[i][1];
            u8* row = wt + r * 128u;
            const u32 x = r & 7u;
            uint4 l0, h0, l1, h1;
            mxrt_fp8x4_to_bf16<BF_SH_B>(c0.x, mb, l0.x, h0.x);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c0.z, mb, l0.y, h0.y);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c1.x, mb, l0.z, h0.z);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c1.z, mb, l0.w, h0.w);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c0.y, mb, l1.x, h1.x);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c0.w, mb, l1.y, h1.y);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c1.y, mb, l1.z, h1.z);
            mxrt_fp8x4_to_bf16<BF_SH_B>(c1.w, mb, l1.w, h1.w);
            *reinterpret_cast<uint4*>(row + 16u * ((4u * j) ^ x)) = l0;
            *reinterpret_cast<uint4*>(row + 16u * ((4u * j + 1u) ^ x)) = h0;
            *reinterpret_cast<uint4*>(row + 16u * ((4u * j + 2u) ^ x)) = l1;
            *reinterpret_cast<uint4*>(row + 16u * ((4u * j + 3u) ^ x)) = h1;
          }
        }
        // the bf16 tile is read by wgmma (the async proxy): order this thread's generic stores before it
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_arrive(conv0 + 8 * slot);
        PROF_MARK(4);
      }
      PROF_END(5, 3, 5, ct == 0u);
      PROF_END(5, 12, 12, ct == 0u);
    }
  } else {
    // ---------------- consumer warpgroups 0, 1: rows 128 cw .. 128 cw + 127 as two m64 halves ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(BF_CONSUMER_REGS));
    const u32 cw = tid / 128u, lane = tid % 32u, q = lane & 3u;
    const u32 lrow = 128u * cw + 16u * ((tid / 32u) % 4u) + (lane >> 2), lcol = 2u * q;
    const u32 w_base = smem_addr(tile_w);
    const bool even_n = (n & 1) == 0;
    float acc0[64], acc1[64];
    u32 fr[2][2][2][4];  // [block][half][k16 step of the block][a0..a3]
    u32 f = 0;
    for (u32 t = MXRT_BID_X; t < ntiles; t += (u32)gridDim.x) {
      u32 m0, n0;
      ws_tile(t, tiles_m, tiles_n, m0, n0);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
      u32 prev_slot = 0;
      for (u32 kt = 0; kt < nkt; ++kt, ++f) {
        const u32 slot = f % RING, ph = (f / RING) & 1u;
        PROF_SKIP();
        mbar_wait(full0 + 8 * slot, ph);  // the A codes (TMA)
        mbar_wait(conv0 + 8 * slot, ph);  // the bf16 B tile and the A multipliers
        PROF_MARK(6);
        const u8* at = tile_a + slot * BF_TILE_A;
        const u32* ms = mult_s + slot * (BF_BM * 2);
        // loads first (the previous stage's wgmmas still run): per half h, rows r, r + 8 (e): the two blocks'
        // multipliers and this thread's 8 codes of each block, bytes 32 j + 8 q .. + 7 (64B swizzle)
        uint2 mu[2][2], raw[2][2][2];
#pragma unroll
        for (u32 h = 0; h < 2; ++h)
#pragma unroll
          for (u32 e = 0; e < 2; ++e) {
            const u32 r = lrow + 64u * h + 8u * e;
            mu[h][e] = *reinterpret_cast<const uint2*>(ms + 2u * r);
#pragma unroll
            for (u32 j = 0; j < 2; ++j)
              raw[j][h][e] = *reinterpret_cast<const uint2*>(
                  at + r * 64u + 16u * ((2u * j + (q >> 1)) ^ ((r >> 1) & 3u)) + 8u * (q & 1u));
          }
        // A fragments are written only with no wgmma in flight (ptxas serialises every wgmma otherwise, C7513):
        // the other consumer warpgroup's wgmmas keep the tensor core busy during this one's conversion
        wg_wait<0>();
        PROF_MARK(7);
        if (kt > 0) mbar_arrive(empty0 + 8 * prev_slot);  // every wgmma of the previous stage done
#pragma unroll
        for (u32 j = 0; j < 2; ++j)
#pragma unroll
          for (u32 h = 0; h < 2; ++h)
#pragma unroll
            for (u32 e = 0; e < 2; ++e) {
              const u32 mv = j == 0 ? mu[h][e].x : mu[h][e].y;
              // step 0: a[e] = lo(W0), a[2 + e] = hi(W0); step 1: the same of W1 (W0 / W1: bytes 0-3 / 4-7)
              if (BF_DIAG & 2) {
                fr[j][h][0][e] = raw[j][h][e].x;
                fr[j][h][0][2 + e] = raw[j][h][e].x ^ mv;
                fr[j][h][1][e] = raw[j][h][e].y;
                fr[j][h][1][2 + e] = raw[j][h][e].y ^ mv;
              } else {
                mxrt_fp8x4_to_bf16<BF_SH_A>(raw[j][h][e].x, mv, fr[j][h][0][e], fr[j][h][0][2 + e]);
                mxrt_fp8x4_to_bf16<BF_SH_A>(raw[j][h][e].y, mv, fr[j][h][1][e], fr[j][h][1][2 + e]);
              }
            }
        wg_fence();
#pragma unroll
        for (u32 j = 0; j < 2; ++j)
#pragma unroll
          for (u32 s = 0; s < 2; ++s) {
            const u64 db = make_desc(w_base + slot * BF_TILE_W + 32u * (2u * j + s));
            wgmma_bf16_rs(acc0, fr[j][0][s], db);
            wgmma_bf16_rs(acc1, fr[j][1][s], db);
          }
        wg_commit();
        PROF_MARK(8);
        prev_slot = slot;
      }
      wg_wait<0>();
      PROF_MARK(7);
      fence_regs(acc0);
      fence_regs(acc1);
      if (nkt > 0) mbar_arrive(empty0 + 8 * prev_slot);
      store_half(out, acc0, m0 + lrow, n0 + lcol, m, n, even_n, sm90_keep_all{});
      store_half(out, acc1, m0 + 64u + lrow, n0 + lcol, m, n, even_n, sm90_keep_all{});
      PROF_MARK(9);
    }
    PROF_END(10, 6, 10, tid == 0);
  }
}

#endif  // MXRT_CUDA
