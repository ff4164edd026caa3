// kernel   gemm_mx_decode_sm90_wg                                                     (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k], m <= NT. Swap-AB
//          on wgmma: a CTA owns 64 weight rows (M side) and NT tokens (N side, NS parts); per MX block one wgmma
//          m64n(NT/NS)k32 from zero, promoted exactly (fast when a stage's scales lie in [64, 190]; NaN for 0xFF).
//          PW producer warps stream 4-block stages (TMA codes, cp.async scales), prepare each (token factors, flag);
//          e2m1 B: cp.async PF-1 stages ahead, widened to e4m3 (2^-6 x) into the tile. Consumer wg c: part c % NS.
// args     const __grid_constant__ mxrt_tmap tmx, tmw (A [m,k], fp8 B [n,k]: boxes NT / 64 rows x 128 B, SWIZZLE_128B,
//          0 fill; tmw unread for e2m1 B) | const u8* sa [m,k/32], sb [n,k/32] E8M0 | const u8* wq (e2m1 B [n,k/2];
//          unread for fp8) | void* out (SK 0: fp32 slice z if split_k > 1 and ATOMIC=0) | u32 m, n, k, split_k (z:
//          groups [z*G/split_k, (z+1)*G/split_k), G = k/128) | float* skw [C][NC][128][NTW/2], u32* skc [slabs] (SK)
// grid     SK 0 (ceil(n/64),1,split_k), SK 1 (C,1,1)  block (128*NC+32*PW,1,1)  smem gemm_decode_kernels.wg_smem_bytes
// defines  A_FMT (e4m3/e5m2), B_FMT (e4m3/e5m2/e2m1), OUT_DTYPE, ATOMIC, NT (16/32/64), NC (1/2/4), NS (1/2), PW
//          (1/2/4/8), STAGES (2..16, a multiple of NC/NS and PW), SK (1 stream-K), PF (e2m1 B: 2..4), WLB (1: B codes in
//          the aiter16x16 layout [np, kk]: fp8 via tmw = the 3-D map (256, kk/16, np/16), 8 boxes (256, 1, 4) per
//          stage into the no-swizzle K-major tile; e2m1 wq read at the layout's offsets; absent = 0)  ops/gemm_decode_wg
// requires sm_90a; k % 128 == 0; codes 16-B, scales 4-B aligned; m <= NT; m, n, k < 2^31; split_k <= 65535; ATOMIC
//          with 16-bit out: out 4-byte aligned, m*n even; SK 1: skc zero (left zero), slabs*G < 2^31 ops/gemm_decode_wg
#include "../common/mx_gemm.h"

#if !defined(A_FMT) || !defined(B_FMT) || !defined(OUT_DTYPE) || !defined(ATOMIC) || !defined(NT) || !defined(NC) || \
    !defined(NS) || !defined(PW) || !defined(STAGES) || !defined(SK)
#error "A_FMT, B_FMT, OUT_DTYPE, ATOMIC, NT, NC, NS, PW, STAGES and SK must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(NT == 16 || NT == 32 || NT == 64, "NT: 16, 32 or 64 tokens (the wgmma N)");
MXRT_STATIC_ASSERT(NC == 1 || NC == 2 || NC == 4, "NC: 1, 2 or 4 consumer warpgroups");
MXRT_STATIC_ASSERT((NS == 1 || NS == 2) && NC % NS == 0 && NT / NS >= 16,
                   "NS: 1 or 2 token parts (of at least 16 columns), a divisor of NC");
#define DWG_KS (NC / NS)  // consumer warpgroups per token part: they take the stages in turn
#define DWG_NTW (NT / NS)  // the wgmma N of one warpgroup
MXRT_STATIC_ASSERT(STAGES >= 2 && STAGES <= 16 && STAGES % DWG_KS == 0,
                   "STAGES: 2..16, a multiple of NC / NS (a slot is always consumed by the same warpgroups, so its "
                   "barrier parity never runs two phases ahead of a waiter)");
MXRT_STATIC_ASSERT((PW == 1 || PW == 2 || PW == 4 || PW == 8) && STAGES % PW == 0,
                   "PW: 1, 2, 4 or 8 producer warps, STAGES a multiple of PW (a slot is always filled by the same "
                   "warp, which prepares a stage before it waits for that slot again)");
#if B_FMT == MXRT_FMT_E2M1
#ifndef PF
#error "PF (the e2m1 staging slots per producer warp) must be defined by the launcher for e2m1 weights"
#endif
MXRT_STATIC_ASSERT(PF >= 2 && PF <= 4, "PF: 2..4 staging slots per producer warp (PF - 1 stages fetched ahead)");
#endif
MXRT_STATIC_ASSERT(A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2, "A_FMT: e4m3 or e5m2");
MXRT_STATIC_ASSERT(B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2 || B_FMT == MXRT_FMT_E2M1,
                   "B_FMT: e4m3, e5m2 or e2m1 (widened to e4m3 by the producer warps)");
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_F32 || OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16,
                   "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(ATOMIC == 0 || ATOMIC == 1, "ATOMIC: 0 or 1");
MXRT_STATIC_ASSERT(SK == 0 || (SK == 1 && ATOMIC == 0 && OUT_DTYPE != MXRT_OUT_F32),
                   "SK: 0 (grid x = slabs, z = split_k), or 1 (stream-K, 16-bit out, no atomics)");
// WLB: 1 when the weight codes are in aiter's 16x16 layout (MX_REFERENCE.md 3b', mxrt.preshuffle_weight): a 16-row
// tile's 16-byte chunk column is 256 contiguous bytes (rows 0..15), i.e. two 8 x 16-byte core matrices of the
// no-swizzle K-major wgmma layout. fp8: each stage's 8 chunk columns of the CTA's 4 tiles arrive by 8 TMA boxes as
// [chunk][tile][256 B], so the 64-row x 128-byte tile is canonical with core matrices 128 B apart along M (SBO) and
// 1024 B apart along K (LBO), and a block's descriptor starts 2048 B further (dwg_wdesc). e2m1: the producers' cp.async
// sources follow the layout; the widened tile they write is the row-major one. Absent: 0 (row-major codes).
#ifndef WLB
#define WLB 0
#endif
MXRT_STATIC_ASSERT(WLB == 0 || WLB == 1, "WLB: 0 row-major weight codes, 1 aiter16x16");
// DWG_DIAG (development timing only, benchmarks/dev_decode_wg_diag.py; not in the spec): 1 the consumers only wait
// for each stage and release it (the producer and memory pipeline alone); 2 also the wgmmas, no promotion
#ifndef DWG_DIAG
#define DWG_DIAG 0
#endif

#if defined(MXRT_CUDA)
#include "sm90_async.h"

#define DWG_THREADS (128 * NC + 32 * PW)
// four partials per stage where the registers allow: a wgmma N of at most 32, or N 64 with the producer warps a
// whole warpgroup (PW 4) next to two consumer warpgroups, which then rebalance registers (setmaxnreg 56 / 224)
#define DWG_SETMAXNREG (DWG_NTW == 64 && PW == 4 && NC == 2)
#define DWG_P4 (DWG_NTW <= 32 || DWG_SETMAXNREG)
#define DWG_ROWS 64                                   // weight rows per CTA (the wgmma M)
#define DWG_W_TILE (DWG_ROWS * 128)                   // 8 KB: 64 rows x 4 blocks of fp8
#define DWG_X_TILE (NT * 128)                         // 2 / 4 / 8 KB
#define DWG_CODE (DWG_W_TILE + DWG_X_TILE)            // a code stage (a multiple of 1024: the swizzle's alignment)
#define DWG_W4 (B_FMT == MXRT_FMT_E2M1)                // e2m1 weights: staged packed, widened into the code stage
#define DWG_STG (DWG_ROWS * 64)                       // a stage's packed e2m1 tile: 64 rows x 64 bytes (4 blocks)
#define DWG_WMUL SM90_LO6_MUL(B_FMT)                  // e2m1 tiles hold 2^-6 x the weights (sm90_e2m1x8_lo6)
#define DWG_SCALE ((DWG_ROWS + NT) * 4)               // a scale stage: one word (4 blocks) per weight row and token
// e2m1 weights: PW x PF staging slots (warp w's PF slots: the packed tile, then the scale words of one of its stages)
#define DWG_SS (DWG_STG + DWG_SCALE)
#if DWG_W4
#define DWG_STAGING (PW * PF * DWG_SS)
#else
#define DWG_STAGING 0
#endif
#define DWG_TG (DWG_NTW / 4 + 4)  // floats per t-group of a token-factor buffer (NTW / 4 used, + 4: distinct banks)
#define DWG_FB (NS * 16 * DWG_TG)  // floats of a stage's token factors: [part][block][t-group][DWG_TG]
#define DWG_REGS (DWG_NTW / 2)                        // accumulator registers per thread (m64nNTW)
MXRT_STATIC_ASSERT(DWG_CODE % 1024 == 0, "code stages must keep the 1024-byte alignment of the swizzle");

#if B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E2M1
#define DWG_WTYPE "e4m3"
#else
#define DWG_WTYPE "e5m2"
#endif
#if A_FMT == MXRT_FMT_E4M3
#define DWG_XTYPE "e4m3"
#else
#define DWG_XTYPE "e5m2"
#endif

// d = W(64x32) * X(32xNTW)^T from zero (scale-d 0): one MX block's partial, this thread's NT / 2 registers
#define DWG_R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                  "+f"(d[i + 6]), "+f"(d[i + 7])
// The weight tile's descriptor for MX block u of a stage at shared address wt: the 128-byte swizzle of the row-major
// tile (make_desc: K offset 32 u bytes), or with fp8 WLB the no-swizzle K-major tile (LBO 1024 B between 16-byte
// core-matrix columns along K, SBO 128 B between 8-row core matrices along M; block u from column 2u)
MXRT_DEVICE u64 dwg_wdesc(u32 wt, u32 u) {
#if WLB && B_FMT != MXRT_FMT_E2M1
  const u32 a = wt + 2048u * u;
  return (u64)((a & 0x3FFFFu) >> 4) | ((u64)(1024u >> 4) << 16) | ((u64)(128u >> 4) << 32);
#else
  return make_desc(wt + 32u * u);
#endif
}

MXRT_DEVICE void dwg_mma(float (&d)[DWG_REGS], u64 dw, u64 dx) {
#if DWG_NTW == 16
  asm volatile("{\nwgmma.mma_async.sync.aligned.m64n16k32.f32." DWG_WTYPE "." DWG_XTYPE
               " {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 0, 1, 1;\n}\n"
               : DWG_R8(0)
               : "l"(dw), "l"(dx)
               : "memory");
#elif DWG_NTW == 32
  asm volatile("{\nwgmma.mma_async.sync.aligned.m64n32k32.f32." DWG_WTYPE "." DWG_XTYPE
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 0, 1, 1;\n}\n"
               : DWG_R8(0), DWG_R8(8)
               : "l"(dw), "l"(dx)
               : "memory");
#else
  asm volatile("{\nwgmma.mma_async.sync.aligned.m64n64k32.f32." DWG_WTYPE "." DWG_XTYPE
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
               "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 0, 1, 1;\n}\n"
               : DWG_R8(0), DWG_R8(8), DWG_R8(16), DWG_R8(24)
               : "l"(dw), "l"(dx)
               : "memory");
#endif
}
#undef DWG_R8

// the partial's registers are written asynchronously: no read may move above the wait
MXRT_DEVICE void dwg_fence_regs(float (&d)[DWG_REGS]) {
#pragma unroll
  for (int i = 0; i < DWG_REGS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// cp.async of one 4-byte scale word
MXRT_DEVICE void dwg_cp4(u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

// All four scale bytes of w in [64, 190] (per byte, no carries between bytes: b + 65 and b + 64 both have their
// top bit set exactly for b in [64, 190]); 0x80808080 when they do.
MXRT_DEVICE u32 dwg_fast4(u32 w) {
  const u32 lo7 = w & 0x7F7F7F7Fu, top = w & 0x80808080u;
  return ((lo7 + 0x41414141u) ^ top) & ((lo7 + 0x40404040u) ^ top) & 0x80808080u;
}
// 2^(s-127) of byte U of w, s in [1, 254] (a normal fp32: s << 23 is its bit pattern)
template <u32 U>
MXRT_DEVICE float dwg_factor(u32 w) {
  return mxrt_f32_from_bits(U == 3u ? (w >> 1) & 0x7F800000u : (w << (23u - 8u * U)) & 0x7F800000u);
}
// token j's partials of weight row i in red, its part's warpgroups added in stage order
MXRT_DEVICE float dwg_red_sum(const float* red, u32 i, u32 j) {
  const u32 jp = j / DWG_NTW, jj = j % DWG_NTW;
  float v = red[(jp * DWG_NTW + jj) * 64u + i];
#pragma unroll
  for (u32 w = 1; w < DWG_KS; ++w) v += red[((w * NS + jp) * DWG_NTW + jj) * 64u + i];
  return v;
}
// one output element (plain store)
MXRT_DEVICE void dwg_store(void* out, u64 idx, float v) {
#if OUT_DTYPE == MXRT_OUT_F32
  ((float*)out)[idx] = v;
#else
  ((u16*)out)[idx] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(v);
#endif
}
// the consumer warpgroups' named barrier, and one warpgroup's (immediate ids: racecheck follows them)
MXRT_DEVICE void dwg_consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(128 * NC) : "memory"); }
MXRT_DEVICE void dwg_warpgroup_sync(u32 c) {
  switch (c) {
    case 0: asm volatile("bar.sync 2, 128;" ::: "memory"); break;
    case 1: asm volatile("bar.sync 3, 128;" ::: "memory"); break;
    case 2: asm volatile("bar.sync 4, 128;" ::: "memory"); break;
    default: asm volatile("bar.sync 5, 128;" ::: "memory"); break;
  }
}
// a stage's first weight row and its group of 4 MX blocks
struct DwgAt {
  u32 rs, gi;
};
template <u32 U>
struct dwg_u {
  static constexpr u32 value = U;
};
template <bool B>
struct dwg_b {
  static constexpr bool value = B;
};

extern "C" __global__ void __launch_bounds__(DWG_THREADS, 1)
    gemm_mx_decode_sm90_wg(const __grid_constant__ mxrt_tmap tmx, const __grid_constant__ mxrt_tmap tmw,
                           const u8* __restrict__ sa, const u8* __restrict__ sb, const u8* __restrict__ wq,
                           void* __restrict__ out, u32 m, u32 n, u32 k, u32 split_k, float* __restrict__ skw,
                           u32* __restrict__ skc) {
  extern __shared__ u8 smem_raw[];
  // [STAGES] code stages (1024-aligned) | [PW][PF] staging slots (DWG_W4) | [STAGES] scale words | [STAGES] token
  // factors | [STAGES (even)] stage flags | [NC][NTW][64] epilogue partials | [STAGES] full, [STAGES] empty mbarriers
  u8* dsm = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  u8* codes = dsm;
  u8* stg = dsm + STAGES * DWG_CODE;
  u32* scales = reinterpret_cast<u32*>(stg + DWG_STAGING);
  float* fb_s = reinterpret_cast<float*>(scales + STAGES * (DWG_ROWS + NT));
  u32* flags = reinterpret_cast<u32*>(fb_s + STAGES * DWG_FB);
  float* red = reinterpret_cast<float*>(flags + (STAGES + 1) / 2 * 2);  // the epilogue's own region
  const u32 bars = smem_addr(red + NC * DWG_NTW * 64);  // 8-byte aligned: every region above is a multiple of 8 B
  const u32 full0 = bars, empty0 = bars + 8u * STAGES;

  const u32 tid = MXRT_TID_X;
  const u32 kbt = k / 32u, groups = k / 128u;
#if SK
  // stream-K: the CTA of rank r = C - 1 - blockIdx.x takes the work units [r U / C, (r + 1) U / C) of U = slabs x
  // groups (slab-major; C = the grid) as its stages: stage g is group (u0 + g) % groups of slab (u0 + g) / groups.
  // Ranks run against the block index so that a slab's fix-up waits only on CTAs launched before its own (below).
  (void)split_k;
  const u64 units = (u64)((n + DWG_ROWS - 1u) / DWG_ROWS) * groups;
  const u32 rank = gridDim.x - 1u - MXRT_BID_X;
  const u32 u0 = (u32)((u64)rank * units / gridDim.x), ngr = (u32)((u64)(rank + 1u) * units / gridDim.x) - u0;
  // stage g's first weight row and group; step: the same warp's next stage (PW on), without a division per stage (a
  // suspect for stream-K's loss on filled grids that call 5 cleared: kept as the cheaper form)
  auto at = [&](u32 g) -> DwgAt { return DwgAt{(u0 + g) / groups * DWG_ROWS, (u0 + g) % groups}; };
  auto step = [&](DwgAt& a) {
    a.gi += PW;
    while (a.gi >= groups) {
      a.gi -= groups;
      a.rs += DWG_ROWS;
    }
  };
#else
  (void)skw;
  (void)skc;
  const u32 z = MXRT_BID_Z;
  const u32 cg0 = (u32)((u64)z * groups / split_k), ngr = (u32)((u64)(z + 1u) * groups / split_k) - cg0;
  const u32 row0 = MXRT_BID_X * DWG_ROWS;
  auto at = [&](u32 g) -> DwgAt { return DwgAt{row0, cg0 + g}; };
  auto step = [&](DwgAt& a) { a.gi += PW; };
#endif
  if (tid == 0) {
    for (u32 s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8u * s, 1u + 32u);  // the TMA lane's arrive.expect_tx + each producer lane once it prepared
      mbar_init(empty0 + 8u * s, 128u * NS);  // every thread of the warpgroups consuming it (one per token part)
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tmx) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tmw) : "memory");
  }
  __syncthreads();

  if (tid >= 128u * NC) {
#if DWG_SETMAXNREG
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;" ::: "memory");
#endif
    // ---------------- producer warps: warp w takes stages w, w + PW, ... ----------------
    // Its iteration j issues stage g = w + j * PW into slot g % STAGES (TMA code tiles; the scale words by cp.async,
    // one commit group per iteration) and prepares its stage of iteration j - LAG, whose scale words have landed:
    // the token factors in the layout the consumers' fragments read and the stage flag (every scale byte of the stage
    // in [64, 190]: the fast promotion); then its lanes arrive on that stage's full barrier (releasing their stores).
    // One producer warp issuing ~170 instructions per stage bound the kernel at ~2 TB/s (session 12, call 10: the
    // consumers waited on full barriers, the producer never on an empty one); PW warps share that work.
    const u32 lane = tid % 32u, w = (tid - 128u * NC) / 32u;
    const bool xv0 = lane < NT && lane < m, xv1 = lane + 32u < NT && lane + 32u < m;
    const u32 mine = ngr > w ? (ngr - w + PW - 1u) / PW : 0u;  // this warp's stages
    // the 4 scale bytes of stage g's group per weight row and token (k % 128 == 0: one aligned word) to the words at
    // sdst (weights lane, lane + 32, tokens lane, lane + 32); rows past n and tokens past m are not copied (prepare
    // reads them as 0x7F bytes, and the consumers too)
    auto fetch_scales = [&](u32 sdst, DwgAt at_g) {
      const u32 rs = at_g.rs, go = 4u * at_g.gi;
      const u8* wsp = sb + (u64)(rs + lane) * kbt + go;
      const u8* xsp = sa + (u64)lane * kbt + go;
      if (rs + lane < n) dwg_cp4(sdst, wsp);
      if (rs + lane + 32u < n) dwg_cp4(sdst + 128u, wsp + 32u * (u64)kbt);
      if (xv0) dwg_cp4(sdst + 4u * DWG_ROWS, xsp);
      if (xv1) dwg_cp4(sdst + 4u * DWG_ROWS + 128u, xsp + 32u * (u64)kbt);
    };
    // a stage's preparation, once its scale words are at src (the code slot's own words; for e2m1 weights the warp's
    // staging slot, copied here into the code slot for the consumers): the token factors, the stage flag, the arrive
    auto prepare = [&](u32 hs, const u32* src, u32 rs) {
      float* fb = fb_s + hs * DWG_FB;
      const bool wv0 = rs + lane < n, wv1 = rs + lane + 32u < n;
      const u32 wd0 = wv0 ? src[lane] : 0x7F7F7F7Fu, wd1 = wv1 ? src[lane + 32u] : 0x7F7F7F7Fu;
#if DWG_W4
      u32* sw = scales + hs * (DWG_ROWS + NT);
      sw[lane] = wd0;
      sw[lane + 32u] = wd1;
#endif
      u32 ok = dwg_fast4(wd0) & dwg_fast4(wd1);
#pragma unroll
      for (u32 i = 0; i < (NT + 31u) / 32u; ++i) {
        const u32 tok = lane + 32u * i;
        if (tok < NT) {
          // token tok of part tok / NTW: column 8j + 2q + e of that part, block u at [(4u + q) * DWG_TG + 2j + e]
          const u32 wd = (i == 0 ? xv0 : xv1) ? src[DWG_ROWS + tok] : 0x7F7F7F7Fu, tt = tok % DWG_NTW;
#if DWG_W4
          sw[DWG_ROWS + tok] = wd;
#endif
          ok &= dwg_fast4(wd);
          const u32 o = (tok / DWG_NTW) * (16u * DWG_TG) + ((tt % 8u) / 2u) * DWG_TG + 2u * (tt / 8u) + (tt % 2u);
          fb[o] = dwg_factor<0>(wd);
          fb[4 * DWG_TG + o] = dwg_factor<1>(wd);
          fb[8 * DWG_TG + o] = dwg_factor<2>(wd);
          fb[12 * DWG_TG + o] = dwg_factor<3>(wd);
        }
      }
      const bool fast = __all_sync(0xFFFFFFFFu, ok == 0x80808080u);
      if (lane == 0) flags[hs] = fast ? 1u : 0u;
      mbar_arrive(full0 + 8u * hs);  // each lane after its own stores (the consumers' wait acquires them)
    };
#if DWG_W4
    // e2m1 weights: the warp fetches its stages PF - 1 of its iterations ahead (packed tile and scale words by
    // cp.async into its own staging slots: no barrier, one commit group per iteration), so its period is the
    // widening, not a memory latency (with one slot per warp and no lookahead the consumers waited on full stages 40%
    // of samples, session 13). Lane l copies and later widens the 16-byte chunk l % 4 (MX block l % 4 of the stage)
    // of rows l / 4 + 8i, i < 8 (staged at 16 l + 512 i: the warp's 16-byte accesses are contiguous; WLB: staged in the
    // layout's order, see fetch); rows past n are not copied (their stale, always finite widened codes meet 0x7F
    // scales and reach no stored output).
    constexpr u32 AHEAD = PF - 1u;
    const u32 wr = lane / 4u, wc = lane % 4u;
    const u64 wrow = k / 2u;
    u8* const mystg = stg + w * (PF * DWG_SS);
    auto fetch = [&](u32 jf, DwgAt at_g) {  // this warp's stage of iteration jf (at at_g) into staging slot jf % PF
      const u32 base = smem_addr(mystg + (jf % PF) * DWG_SS), rs = at_g.rs;
#if WLB  // the stage in the layout's own order, a straight copy: instruction i takes bytes [512 (i % 2), +512) of row
      // tile i / 2's 1 KB (MX_REFERENCE.md 3b': chunk column c of row n1 at 256 c + 16 n1), lane l the 16 bytes at 16 l
      // (row n1 = l % 16): global and shared addresses both contiguous. (Staging in the row-major order instead made
      // each lane's cp.async its own L2 request: 3.3x the requests, 26% slower at M 16, call 8.) The widening reads the
      // layout's offsets.
      const u8* src = wq + (u64)(rs / 16u) * 16u * wrow + 1024u * (u64)at_g.gi + 16u * lane;
#pragma unroll
      for (u32 i = 0; i < 8; ++i) {
        if (rs + 16u * (i / 2u) + lane % 16u < n) sm90_cp16(base + 16u * lane + 512u * i, src + 512u * (i % 2u), 16u);
        if (i & 1u) src += 16u * wrow;
      }
#else
      const u8* src = wq + (u64)(rs + wr) * wrow + 64u * (u64)at_g.gi + 16u * wc;
#pragma unroll
      for (u32 i = 0; i < 8; ++i, src += 8u * wrow) {
        if (rs + wr + 8u * i < n) sm90_cp16(base + 16u * lane + 512u * i, src, 16u);
      }
#endif
      fetch_scales(base + DWG_STG + 4u * lane, at_g);
    };
    DwgAt fetched = at(w), done = fetched;  // the next stage to fetch, the next to widen
#pragma unroll
    for (u32 jf = 0; jf < AHEAD; ++jf) {
      if (jf < mine) fetch(jf, fetched);
      step(fetched);
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    for (u32 j = 0; j < mine; ++j) {
      if (j + AHEAD < mine) fetch(j + AHEAD, fetched);
      step(fetched);
      asm volatile("cp.async.commit_group;" ::: "memory");
      const u32 g = w + j * PW, slot = g % STAGES;
      asm volatile("cp.async.wait_group %0;" ::"n"(AHEAD) : "memory");  // this lane's copies of stage g landed
      __syncwarp();
      if (g >= STAGES) mbar_wait(empty0 + 8u * slot, ((g / STAGES) - 1u) & 1u);
      const u32 full = full0 + 8u * slot;
      if (lane == 0) {
        mbar_arrive_tx(full, DWG_X_TILE);  // the tokens only: the weight tile is the producers' own stores
        tma_load_2d(smem_addr(codes + slot * DWG_CODE) + DWG_W_TILE, &tmx, full, (i32)(done.gi * 128u), 0);
      }
      // widen this lane's 8 staged chunks (32 e2m1 codes each) into the stage's e4m3 tile: row r's block wc is the
      // 16-byte chunks 2wc, 2wc + 1 of its 128 bytes, at chunk c ^ (r & 7) as TMA's 128-byte swizzle would put them
      // (r & 7 == wr: the rows are wr + 8i)
      const u8* sg = mystg + (j % PF) * DWG_SS;
      u8* wt = codes + slot * DWG_CODE + 128u * wr;
      const u32 c0 = ((2u * wc) ^ wr) << 4, c1 = ((2u * wc + 1u) ^ wr) << 4;
#pragma unroll
      for (u32 i = 0; i < 8; ++i) {
#if WLB  // row wr + 8i (tile i / 2, row wr + 8 (i % 2)), chunk wc: a warp reads 4 whole 128-byte lines
        const uint4 v = *reinterpret_cast<const uint4*>(sg + 1024u * (i / 2u) + 256u * wc + 128u * (i % 2u) + 16u * wr);
#else
        const uint4 v = *reinterpret_cast<const uint4*>(sg + 16u * lane + 512u * i);
#endif
        uint4 lo, hi;
        sm90_e2m1x8_lo6(v.x, lo.x, lo.y);
        sm90_e2m1x8_lo6(v.y, lo.z, lo.w);
        sm90_e2m1x8_lo6(v.z, hi.x, hi.y);
        sm90_e2m1x8_lo6(v.w, hi.z, hi.w);
        *reinterpret_cast<uint4*>(wt + 1024u * i + c0) = lo;
        *reinterpret_cast<uint4*>(wt + 1024u * i + c1) = hi;
      }
      // the wgmmas read the tile through the async proxy: order these generic stores before the arrive
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      prepare(slot, reinterpret_cast<const u32*>(sg + DWG_STG), done.rs);
      step(done);
    }
#else
    (void)wq;
    (void)stg;
    // slots per warp; iterations of lag (0 with one slot per warp: the warp prepares the stage it just issued, and the
    // PW warps' stages overlap each other's waits instead)
    constexpr u32 SPW = STAGES / PW, LAG = SPW / 2;
    DwgAt issued = at(w), prepared = issued;  // the next stage to issue, the next to prepare
    for (u32 j = 0; j < mine + LAG; ++j) {
      if (j < mine) {
        const u32 g = w + j * PW, slot = g % STAGES, gi = issued.gi;
        if (g >= STAGES) mbar_wait(empty0 + 8u * slot, ((g / STAGES) - 1u) & 1u);
        const u32 full = full0 + 8u * slot;
        if (lane == 0) {
          const u32 dst = smem_addr(codes + slot * DWG_CODE);
          mbar_arrive_tx(full, DWG_CODE);  // rows past n / m arrive as zeros and count in the bytes
#if WLB  // chunk column c of the 4 tiles into [c][tile][256 B] (the no-swizzle K-major tile)
#pragma unroll
          for (u32 c = 0; c < 8u; ++c)
            tma_load_3d(dst + 1024u * c, &tmw, full, 0, (i32)(gi * 8u + c), (i32)(issued.rs / 16u));
#else
          tma_load_2d(dst, &tmw, full, (i32)(gi * 128u), (i32)issued.rs);
#endif
          tma_load_2d(dst + DWG_W_TILE, &tmx, full, (i32)(gi * 128u), 0);
        }
        fetch_scales(smem_addr(scales + slot * (DWG_ROWS + NT)) + 4u * lane, issued);
        step(issued);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
      if (j < LAG) continue;
      const u32 h = w + (j - LAG) * PW, hs = h % STAGES;
      asm volatile("cp.async.wait_group %0;" ::"n"(LAG) : "memory");  // this lane's copies of stage h landed
      __syncwarp();  // ... and every lane's
      prepare(hs, scales + hs * (DWG_ROWS + NT), prepared.rs);
      step(prepared);
    }
#endif
  } else {
#if DWG_SETMAXNREG
  asm volatile("setmaxnreg.inc.sync.aligned.u32 224;" ::: "memory");
#endif
  // ---------------- consumer warpgroup c: token part c % NS, stages c / NS, c / NS + NC / NS, ... -------------
  const u32 c = tid / 128u, t = tid % 128u, lane = t % 32u, q = lane % 4u, part = c % NS;
  const u32 r0 = 16u * (t / 32u) + lane / 4u, r1 = r0 + 8u;  // this thread's rows (m64 fragment)
  float acc[DWG_REGS];
#pragma unroll
  for (int i = 0; i < DWG_REGS; ++i) acc[i] = 0.0f;
  // the stage's partials: all four wgmmas in flight at once (DWG_P4: the promotion of block u overlaps blocks u + 1..3
  // instead of paying each wgmma's latency), else two (a block's promotion overlaps the next one's wgmma)
  float p0[DWG_REGS], p1[DWG_REGS];
#if DWG_P4
  float p2[DWG_REGS], p3[DWG_REGS];
#endif
  const u32 codes_s = smem_addr(codes);
  // stage i (this warpgroup's), of weight rows whose first n-tails are in0 / in1
  auto consume = [&](u32 i, bool in0, bool in1) {
    const u32 slot = i % STAGES;
    mbar_wait(full0 + 8u * slot, (i / STAGES) & 1u);
    const bool fast = flags[slot] != 0u;  // CTA-uniform: one promotion branch per stage
    const u32* sw = scales + slot * (DWG_ROWS + NT);
    const float* fb = fb_s + slot * DWG_FB + part * (16u * DWG_TG);
    const u32 wa0 = in0 ? sw[r0] : 0x7F7F7F7Fu, wa1 = in1 ? sw[r1] : 0x7F7F7F7Fu;
    const u32 wt = codes_s + slot * DWG_CODE, xt = wt + DWG_W_TILE + part * DWG_NTW * 128u;
    // acc += P * 2^(sx-127) * 2^(sw-127) for block u (fast: one FMUL + FFMA per element; wide: the two-step factors)
    // block u's token factors of this thread's columns, loaded one block ahead (a block's first FMUL waited on
    // these loads behind the wgmma fences: 6.5% of all stall samples at M = 64, session 12 call 22)
    auto load_fb = [&](f32x4(&fv)[DWG_NTW / 16], auto uc) {
      constexpr u32 u = decltype(uc)::value;
      const float* fq = fb + (4u * u + q) * DWG_TG;
#pragma unroll
      for (u32 j = 0; j < DWG_NTW / 16u; ++j) fv[j] = *reinterpret_cast<const f32x4*>(fq + 4u * j);
    };
    auto promote = [&](const float(&pp)[DWG_REGS], const f32x4(&fv)[DWG_NTW / 16], auto uc, auto wide) {
      constexpr u32 u = decltype(uc)::value;
      constexpr bool W = decltype(wide)::value;
      if constexpr (!W) {
        // e2m1 weights: the tile holds 2^-6 times their values (sm90_e2m1x8_lo6): 2^6 back in the weight factor
        const float fa0 = dwg_factor<u>(wa0) * DWG_WMUL, fa1 = dwg_factor<u>(wa1) * DWG_WMUL;
#pragma unroll
        for (u32 j = 0; j < DWG_NTW / 8u; j += 2u) {
          const f32x4 b = fv[j / 2u];
          acc[4 * j + 0] = mxrt_fma(pp[4 * j + 0] * b.x, fa0, acc[4 * j + 0]);
          acc[4 * j + 1] = mxrt_fma(pp[4 * j + 1] * b.y, fa0, acc[4 * j + 1]);
          acc[4 * j + 2] = mxrt_fma(pp[4 * j + 2] * b.x, fa1, acc[4 * j + 2]);
          acc[4 * j + 3] = mxrt_fma(pp[4 * j + 3] * b.y, fa1, acc[4 * j + 3]);
          acc[4 * j + 4] = mxrt_fma(pp[4 * j + 4] * b.z, fa0, acc[4 * j + 4]);
          acc[4 * j + 5] = mxrt_fma(pp[4 * j + 5] * b.w, fa0, acc[4 * j + 5]);
          acc[4 * j + 6] = mxrt_fma(pp[4 * j + 6] * b.z, fa1, acc[4 * j + 6]);
          acc[4 * j + 7] = mxrt_fma(pp[4 * j + 7] * b.w, fa1, acc[4 * j + 7]);
        }
      } else {
        const u32 bw0 = (wa0 >> (8u * u)) & 0xFFu, bw1 = (wa1 >> (8u * u)) & 0xFFu;
#pragma unroll
        for (u32 j = 0; j < DWG_NTW / 8u; ++j) {
#pragma unroll
          for (u32 e = 0; e < 2; ++e) {
            const u32 tok = part * DWG_NTW + 8u * j + 2u * q + e;
            const u32 bx = ((tok < m ? sw[DWG_ROWS + tok] : 0x7F7F7F7Fu) >> (8u * u)) & 0xFFu;
#pragma unroll
            for (u32 h = 0; h < 2; ++h) {
              const u32 bw = h == 0 ? bw0 : bw1;
              float& a = acc[4 * j + 2 * h + e];
              if (bw == MXRT_E8M0_NAN || bx == MXRT_E8M0_NAN) {
                a = mxrt_f32_from_bits(0x7FC00000u);
              } else {
                float f1, f2;
                mxrt_scale_steps(bw, bx, f1, f2);
                a = mxrt_fma(pp[4 * j + 2 * h + e] * DWG_WMUL * f1, f2, a);  // P * 2^6 first: exact, then as fp8
              }
            }
          }
        }
      }
    };
#define DWG_ISSUE(P, U)                                                           \
  do {                                                                            \
    wg_fence();                                                                   \
    dwg_mma(P, dwg_wdesc(wt, U), make_desc(xt + 32u * (U)));                      \
    wg_commit();                                                                  \
  } while (0)
    // the stage's four blocks, fast / wide behind one CTA-uniform branch (no wgmma in flight across it)
    auto stage = [&](auto wide) {
      f32x4 fa_[DWG_NTW / 16], fb_[DWG_NTW / 16];  // factor buffers of alternate blocks
      load_fb(fa_, dwg_u<0>{});
#if DWG_P4
      DWG_ISSUE(p0, 0u);
      DWG_ISSUE(p1, 1u);
      DWG_ISSUE(p2, 2u);
      DWG_ISSUE(p3, 3u);
      wg_wait<3>();
      dwg_fence_regs(p0);
      load_fb(fb_, dwg_u<1>{});
      promote(p0, fa_, dwg_u<0>{}, wide);
      wg_wait<2>();
      dwg_fence_regs(p1);
      load_fb(fa_, dwg_u<2>{});
      promote(p1, fb_, dwg_u<1>{}, wide);
      wg_wait<1>();
      dwg_fence_regs(p2);
      load_fb(fb_, dwg_u<3>{});
      promote(p2, fa_, dwg_u<2>{}, wide);
      wg_wait<0>();
      dwg_fence_regs(p3);
      promote(p3, fb_, dwg_u<3>{}, wide);
#else
      DWG_ISSUE(p0, 0u);
      DWG_ISSUE(p1, 1u);
      wg_wait<1>();
      dwg_fence_regs(p0);
      load_fb(fb_, dwg_u<1>{});
      promote(p0, fa_, dwg_u<0>{}, wide);
      DWG_ISSUE(p0, 2u);
      wg_wait<1>();
      dwg_fence_regs(p1);
      load_fb(fa_, dwg_u<2>{});
      promote(p1, fb_, dwg_u<1>{}, wide);
      DWG_ISSUE(p1, 3u);
      wg_wait<1>();
      dwg_fence_regs(p0);
      load_fb(fb_, dwg_u<3>{});
      promote(p0, fa_, dwg_u<2>{}, wide);
      wg_wait<0>();
      dwg_fence_regs(p1);
      promote(p1, fb_, dwg_u<3>{}, wide);
#endif
    };
#undef DWG_ISSUE
#if DWG_DIAG == 1
    (void)fast;
    acc[0] += fb[q] + (float)(wa0 ^ wa1);
#elif DWG_DIAG == 2
    (void)fast;
    wg_fence();
#pragma unroll
    for (u32 u = 0; u < 4; ++u) {
      dwg_mma(u % 2u == 0u ? p0 : p1, dwg_wdesc(wt, u), make_desc(xt + 32u * u));
    }
    wg_commit();
    wg_wait<0>();
    dwg_fence_regs(p0);
    dwg_fence_regs(p1);
    acc[0] += p0[0] + p1[1] + fb[q] + (float)(wa0 ^ wa1);
#else
    if (fast) {
      stage(dwg_b<false>{});
    } else {
      stage(dwg_b<true>{});
    }
#endif
    mbar_arrive(empty0 + 8u * slot);  // the stage's tiles, scale words and factors are read: it may be refilled
  };
  // the partials -> red [NC][NTW tokens][64 rows]: warpgroup c's partials of token part c % NS
  auto partials_to_red = [&]() {
#pragma unroll
    for (u32 j = 0; j < DWG_NTW / 8u; ++j) {
#pragma unroll
      for (u32 e = 0; e < 4; ++e) {
        const u32 col = 8u * j + 2u * q + (e & 1u), row = e < 2 ? r0 : r1;
        red[(c * DWG_NTW + col) * 64u + row] = acc[4 * j + e];
      }
    }
  };
#if SK
  // ---------------- stream-K: one segment (the CTA's stages [a, b) of one slab) after the other ----------------
  // A slab held whole: the warpgroups' partials are added in warpgroup order (red) and stored. A slab shared by the
  // ranks r_first..r_last: rank r > r_first holds the slab's last units as its first segment, done early; it stores
  // its warpgroups' accumulators as they are (fragment order, its slot of skw) and each warpgroup counts itself on
  // skc[slab] (release). Rank r_first holds the slab's first units as its last segment, done at its end, and owns
  // the slab: each warpgroup waits (acquire) until the other ranks' warpgroups have counted (they are CTAs of lower
  // block index, launched before it), the first warpgroup of each token part adds their parts in rank and warpgroup
  // order to its accumulator, and the slab is stored as a whole one; the owner resets skc[slab] for the next launch.
  // Deterministic for a given grid. The producers stream on meanwhile.
  const u32 tokens = m < NT ? m : NT;
  for (u32 a = 0; a < ngr;) {
    const u32 slab = (u0 + a) / groups, b = min(ngr, (slab + 1u) * groups - u0), rs = slab * DWG_ROWS;
    for (u32 i = a + (c / NS + DWG_KS - a % DWG_KS) % DWG_KS; i < b; i += DWG_KS) consume(i, rs + r0 < n, rs + r1 < n);
    const u32 u_first = slab * groups;
    if (u0 + a > u_first) {  // a later rank's part of a shared slab: store, count, move on
      f32x4* slot = reinterpret_cast<f32x4*>(skw + (((u64)rank * NC + c) * 128u + t) * DWG_REGS);
#pragma unroll
      for (u32 r = 0; r < DWG_REGS / 4u; ++r) {
        slot[r] = f32x4{acc[4 * r], acc[4 * r + 1], acc[4 * r + 2], acc[4 * r + 3]};
        acc[4 * r] = acc[4 * r + 1] = acc[4 * r + 2] = acc[4 * r + 3] = 0.0f;
      }
      dwg_warpgroup_sync(c);  // the warpgroup's stores, then its release (cumulative through the barrier)
      if (t == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(skc + slab) : "memory");
      a = b;
      continue;
    }
    if (b - a < groups) {  // the owner of a shared slab: the other ranks' parts into the first warpgroup of each part
      const u64 cn = gridDim.x, u_last = (u64)u_first + groups - 1u;
      const u32 r_last = (u32)(((u_last + 1u) * cn - 1u) / units), want = NC * (r_last - rank);
      if (t == 0) {
        u32 seen;
        do {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(skc + slab) : "memory");
        } while (seen < want);
      }
      dwg_warpgroup_sync(c);
      if (c < NS) {
        float ext[DWG_REGS];
#pragma unroll
        for (int i = 0; i < DWG_REGS; ++i) ext[i] = 0.0f;
        for (u32 rr = rank + 1u; rr <= r_last; ++rr) {
          for (u32 wgi = c; wgi < NC; wgi += NS) {
            const float4* slot = reinterpret_cast<const float4*>(skw + (((u64)rr * NC + wgi) * 128u + t) * DWG_REGS);
#pragma unroll
            for (u32 r = 0; r < DWG_REGS / 4u; ++r) {
              const float4 v = __ldcg(slot + r);  // L2: written by another CTA in this launch
              ext[4 * r] += v.x;
              ext[4 * r + 1] += v.y;
              ext[4 * r + 2] += v.z;
              ext[4 * r + 3] += v.w;
            }
          }
        }
#pragma unroll
        for (int i = 0; i < DWG_REGS; ++i) acc[i] = ext[i] + acc[i];
      }
    }
    partials_to_red();
#pragma unroll
    for (int i = 0; i < DWG_REGS; ++i) acc[i] = 0.0f;
    dwg_consumers_sync();
    if (b - a < groups && tid == 0) skc[slab] = 0u;  // every waiter has passed: ready for the next launch
    for (u32 e = tid; e < DWG_ROWS * tokens; e += 128u * NC) {
      const u32 i = e % DWG_ROWS, j = e / DWG_ROWS;
      if (rs + i < n) dwg_store(out, (u64)j * n + rs + i, dwg_red_sum(red, i, j));
    }
    dwg_consumers_sync();  // red free for the next segment
    a = b;
  }
  }  // consumers
#else
  for (u32 i = c / NS; i < ngr; i += DWG_KS) consume(i, row0 + r0 < n, row0 + r1 < n);
  // ---------------- epilogue: the partials -> shared memory -> summed in stage order, stored ----------------
  partials_to_red();
  }  // consumers
  // every partial stored; the producer warp, done with its stages, takes part in the barrier only (with it reading
  // the partials too, racecheck reported its reads as unordered after the consumers' stores)
  __syncwarp();
  __syncthreads();
  if (tid >= 128u * NC) return;
  const u32 tokens = m < NT ? m : NT;
  const u64 mn = (u64)m * n;
  for (u32 e = tid; e < DWG_ROWS * tokens; e += 128u * NC) {
    const u32 i = e % DWG_ROWS, j = e / DWG_ROWS;  // consecutive threads: consecutive n (coalesced)
    const u32 col = row0 + i;
    if (col >= n) continue;
    const float v = dwg_red_sum(red, i, j);
    const u64 idx = (u64)j * n + col;
#if ATOMIC
#if OUT_DTYPE == MXRT_OUT_F32
    mxrt_atomic_add_f32((float*)out + idx, v);
#else
    mxrt_atomic_add_16<OUT_DTYPE>((u16*)out + idx, v);
#endif
#else
    dwg_store(out, OUT_DTYPE == MXRT_OUT_F32 ? (u64)z * mn + idx : idx, v);  // fp32: split z's slice
#endif
  }
  (void)mn;
#endif  // SK
}

#endif  // MXRT_CUDA
