// gemm_sm90_ws_engine.h: the issue-10 engine's warp-specialised CTA (gemm_mx_sm90_ws.hip dense,
// gemm_mx_grouped_sm90_ws.hip grouped): persistent, 384 threads; warpgroup 2 produces (thread 256 the two TMA code
// tiles per stage, warps 9-11 the scale factors, round robin over stages), warpgroups 0 and 1 consume (setmaxnreg
// 56 / 224; one wgmma m64n128k32 per MX block, exact promotion of gemm_sm90_tile.h). The including kernel builds a
// tile walk and calls ws_engine(S, walk, ...): every role walks the same (tile, k-stage) sequence from it.
//
// A walk (WsDenseWalk below; GwsWalk of gemm_mx_grouped_sm90_ws.hip) is a struct with
//   kbs                        MX blocks of K; a computed tile runs ceil(kbs / 4) stages
//   a_rows(), b_rows()         scale rows of A / B; sa_stride(), sb_stride() their row-major strides in bytes
//   kWarpSteps                 (enum) its cursor steps are warp-collective: the TMA loop then runs on all of warp 8
//   producers, one stage at a time (the tiles without stages skipped):
//     Cursor start(), next(Cursor&)   the CTA's first / next stage; c.kt its K step
//     stages()                        the CTA's stage count where known up front (else 0xFFFFFFFF); live(Cursor): the
//                                     cursor is on a stage (the walk's own end)
//     ya(c), yb(c)                    TMA rows of the stage's A / B boxes, also their first scale rows
//     a_end(c), b_end(c)              scale rows where the tile's A / B rows end: factor 0 from there (those rows and
//                                     columns are computed from whatever TMA brings and never stored)
//   consumers, one output tile at a time (the tiles without stages too):
//     Item first(), more(Item), step(Item&)   the CTA's tiles; Tile tile(Item) what its epilogue needs
//     stages(Tile)                            its stages (nkt, or 0: stores zeros)
//     store(out, acc, Tile, lrow, lcol)       the epilogue of a consumer warpgroup's 64 x 128 half
// Every role derives the same (tile, stage) sequence from the walk itself: no schedule is shared at run time.
// defines  as gemm_mx_sm90_ws.hip: A_FMT, B_FMT, OUT_DTYPE, ATOMIC 0, BM BN 128, STAGES, DBUF 0, DIAG, SPLIT,
//          WS_MODE, SLA, SLB; SCALE_F32 (default 0; 1: DeepGEMM's Hopper recipe, float32 scales, a's one word per row
//          and 128-K stage, b's per 128 x 128 block (a walk with a member n); one factor and one promotion per stage;
//          2: the same granularity with E8M0 bytes, promoted fast or wide as the MX builds)
#pragma once
#if !defined(SLA) || !defined(SLB)
#error "SLA and SLB must be defined by the launcher (gemm_sm90_tile.h would default them to row-major)"
#endif
#include "gemm_sm90_tile.h"

#if defined(MXRT_CUDA)

#if !defined(SPLIT) || !defined(WS_MODE)
#error "SPLIT and WS_MODE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(BM == 128 && BN == 128 && ATOMIC == 0 && DBUF == 0 && DIAG <= 1 && (SPLIT == 0 || DIAG == 0),
                   "gemm_mx_sm90_ws: BM = BN = 128, ATOMIC 0, DBUF 0, DIAG 0 / 1, SPLIT 0 / 1 (1: exact only)");
// WS_MODE (timing diagnostics of the skeleton, DIAG = 1 only): 0 the k128 promotion; 2 no promotion (wgmma and
// pipeline only); 3 no wgmma either (the consumers wait for each stage and release it); 4 as 3 without scale warps
MXRT_STATIC_ASSERT(WS_MODE == 0 || (DIAG == 1 && (WS_MODE == 2 || WS_MODE == 3 || WS_MODE == 4)),
                   "WS_MODE: 0; 2, 3, 4 with DIAG = 1");

#ifndef SCALE_F32
#define SCALE_F32 0
#endif
MXRT_STATIC_ASSERT(SCALE_F32 == 0 || ((SCALE_F32 == 1 || SCALE_F32 == 2) && SLA == 0 && SLB == 0 && SPLIT == 0 &&
                                      DIAG == 0),
                   "SCALE_F32 1 / 2: row-major float32 / E8M0 scales per 128 K, SPLIT 0, DIAG 0");
// a stage's step through a scale row, in bytes: 4 E8M0 bytes (MX), one float32 word, one E8M0 byte per 128 K
#define WS_SROW_STEP (SCALE_F32 == 2 ? 1u : (u32)KSTEPS)

#define WS_THREADS 384
#define WS_PRODUCER_REGS 56
#define WS_CONSUMER_REGS 224
// Scale layouts (SLA / SLB) as the scale warps copy them: a stage is 4 consecutive K blocks of a row. Row-major:
// the aligned word(s) around its 4 bytes (2 staged words per row); cublas128x4 / deepgemm_ue8m0 hold the 4 bytes
// as one aligned word; aiter32x8 / turbo16x4 (bytes or uint32 words) scatter them (64 / 16 / 64 bytes apart): one
// word per block, 4 staged words per row.
#define WS_SCATTERED(L) \
  ((L) == MXRT_SCALE_LAYOUT_AITER32X8 || (L) == MXRT_SCALE_LAYOUT_TURBO16X4 || (L) == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
#define WS_WORDS (WS_SCATTERED(SLA) || WS_SCATTERED(SLB) ? 4 : 2)
// stages of scale loads in flight per scale warp (cp.async staging, WS_WORDS KB of shared memory each): as deep as
// the tile ring leaves room for (mxrt/ops/gemm_sm90_ws.py staging_bytes mirrors it)
#define WS_AHEAD ((STAGES <= 4 ? 8 : (STAGES == 5 ? 4 : 1)) * 2 / WS_WORDS)  // per scale warp (3 x WS_AHEAD stages)
MXRT_STATIC_ASSERT(WS_AHEAD >= 1, "a scattered scale layout (aiter32x8, turbo16x4) needs STAGES <= 5");

// cp.async of one 4-byte word global -> shared (the scale warps' staging copies)
MXRT_DEVICE void ws_cp4(u32 dst, const u32* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

// One operand's scale storage as the scale warps copy it: layout L (0 row-major, MXRT_SCALE_LAYOUT_*, 5 turbo16x4
// as uint32 words). Row-major stays on the kernel's own word path; these serve L = 1..5.
template <int L>
struct WsScales {
  const u32* base;  // the storage as 32-bit words (4-byte aligned: checked by the launcher)
  MxrtScaleLayout<L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? MXRT_SCALE_LAYOUT_TURBO16X4 : L> lay;  // code 5: words
  MXRT_DEVICE WsScales(const u8* s, u32 rows, u32 cols) : base(reinterpret_cast<const u32*>(s)), lay(rows, cols) {}
  // cp.async the words holding blocks 4 kt .. 4 kt + 3 of matrix row `row` to shared address dst (WS_WORDS words)
  MXRT_DEVICE void issue(u32 row, u32 kt, u32 dst) const {
    if constexpr (!WS_SCATTERED(L)) {  // one aligned word, byte j = block 4 kt + j
      ws_cp4(dst, base + (lay.offset(row, kt * KSTEPS) >> 2));
    } else {
#pragma unroll
      for (u32 j = 0; j < KSTEPS; ++j) {
        const u32 o = lay.offset(row, kt * KSTEPS + j);
        ws_cp4(dst + 4u * j, base + (L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? o : o >> 2));
      }
    }
  }
  // the stage's 4 scale bytes (block 4 kt + j in byte j) from the staged words sw
  MXRT_DEVICE u32 bytes(const u32* sw, u32 row, u32 kt) const {
    if constexpr (!WS_SCATTERED(L)) {
      return sw[0];
    } else {
      // the 4 blocks share their byte position inside a word (aiter32x8: 64 bytes apart, turbo16x4: 16)
      const u32 sh = L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? 0u : 8u * (lay.offset(row, kt * KSTEPS) & 3u);
      u32 v = 0;
#pragma unroll
      for (u32 j = 0; j < KSTEPS; ++j) v |= ((sw[j] >> sh) & 255u) << (8 * j);
      return v;
    }
  }
};

// ws_tile, WsCursor: the persistent walk's tile order (GROUP_M raster)
#include "gemm_tile_raster.h"

MXRT_DEVICE void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

#if SPLIT == 1
// d = A(64x32) * B(32x64)^T from zero: one MX block of a 64 x 64 accumulator block (column split)
MXRT_DEVICE void wgmma_n64_k32(float (&d)[32], u64 da, u64 db) {
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n64k32.f32." WG_ATYPE "." WG_BTYPE
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 0, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
}
// the partial's registers are written asynchronously: nothing may read them before the wait (no memory clobber,
// so the factor loads can move above the wait)
MXRT_DEVICE void fence32(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i]));
}
// acc += P * 2^(sb-127) * 2^(sa-127) for a 64 x 64 block: this thread's rows r, r + 8 (fa0, fa1), columns
// 8j + 2t + e (fb[2j + e]); fast: one FMUL + FFMA per element; wide: promote_wide (exact for any pair)
template <bool W>
MXRT_DEVICE void promote32(float (&acc)[32], const float (&p)[32], float fa0, float fa1, const float (&fb)[16]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float fa = e < 2 ? fa0 : fa1, b = fb[2 * j + (e & 1)];
      acc[4 * j + e] = W ? promote_wide(acc[4 * j + e], p[4 * j + e], fa, b) : fmaf(p[4 * j + e] * b, fa, acc[4 * j + e]);
    }
  }
}
#endif

// The dense walk: tiles t = bid, bid + grid, ... of the m x n output (GROUP_M raster), nkt stages each; A / B rows
// m0.. / n0.. of the matrices, scale rows likewise (stride ceil(k/32), or the layouts SLA / SLB read in place).
struct WsDenseWalk {
  enum { kWarpSteps = 0 };
  u32 m, n, kbs, nkt, tiles_m, tiles_n, ntiles;
  using Cursor = WsCursor;
  struct Item {
    u32 t;
  };
  struct Tile {
    u32 m0, n0;
  };
  MXRT_DEVICE WsDenseWalk(int m_, int n_, int k_) {
    m = (u32)m_;
    n = (u32)n_;
    tiles_m = (m + BM - 1) / BM;
    tiles_n = (n + BN - 1) / BN;
    ntiles = tiles_m * tiles_n;
    kbs = ((u32)k_ + 31u) / 32u;
    nkt = (kbs + KSTEPS - 1) / KSTEPS;
  }
  // scale rows of A / B and their row strides
  MXRT_DEVICE u32 a_rows() const { return m; }
  MXRT_DEVICE u32 b_rows() const { return n; }
  MXRT_DEVICE u32 sa_stride() const { return kbs; }
  MXRT_DEVICE u32 sb_stride() const { return kbs; }
  // the CTA's place in the persistent grid, read where used (values computed before the role split stay live across
  // setmaxnreg: the consumers spilled 60 bytes with them as members)
  MXRT_DEVICE static u32 bid() { return MXRT_BID_X; }
  MXRT_DEVICE static u32 grid() { return (u32)gridDim.x; }
  // producers: the stage count is known up front (live() is always true)
  MXRT_DEVICE u32 stages() const {
    const u32 b = bid(), g = grid();  // read unconditionally: the cursor's steps reuse them
    return b < ntiles ? ((ntiles - b + g - 1u) / g) * nkt : 0u;
  }
  MXRT_DEVICE Cursor start() const { return ws_start(bid(), tiles_m, tiles_n); }
  MXRT_DEVICE void next(Cursor& c) const { ws_next(c, nkt, grid(), ntiles, tiles_m, tiles_n); }
  MXRT_DEVICE bool live(const Cursor&) const { return true; }
  MXRT_DEVICE u32 ya(const Cursor& c) const { return c.m0; }
  MXRT_DEVICE u32 yb(const Cursor& c) const { return c.n0; }
  MXRT_DEVICE u32 a_end(const Cursor&) const { return m; }
  MXRT_DEVICE u32 b_end(const Cursor&) const { return n; }
  // consumers
  MXRT_DEVICE Item first() const { return Item{bid()}; }
  MXRT_DEVICE bool more(const Item& it) const { return it.t < ntiles; }
  MXRT_DEVICE void step(Item& it) const { it.t += grid(); }
  MXRT_DEVICE Tile tile(const Item& it) const {
    Tile T;
    ws_tile(it.t, tiles_m, tiles_n, T.m0, T.n0);
    return T;
  }
  MXRT_DEVICE u32 stages(const Tile&) const { return nkt; }
  MXRT_DEVICE void store(void* out, const float (&acc)[64], const Tile& T, u32 lrow, u32 lcol) const {
    store_half(out, acc, T.m0 + lrow, T.n0 + lcol, (int)m, (int)n, (n & 1u) == 0u, sm90_keep_all{});
  }
};

// The engine: every thread of the CTA calls it after the kernel's own prologue (it initialises the barriers itself);
// the walk is described at the head of this file.
template <class Walk>
MXRT_DEVICE void ws_engine(const Sm90Smem& S, const Walk& wk, const void* ta, const void* tb, const u8* __restrict__ sa,
                           const u8* __restrict__ sb, void* __restrict__ out) {
  const u32 tid = MXRT_TID_X;
  const u32 kbs = wk.kbs;
  if (tid == 0) {
    for (u32 s = 0; s < STAGES; ++s) {
      // every lane that touched a stage's shared memory arrives itself (a __syncwarp + lane-0 arrival is ordered by
      // the memory model, but compute-sanitizer's racecheck does not follow it: 744 reported hazards, session 8)
      mbar_init(S.full0 + 8 * s, WS_MODE == 4 ? 1 : 1 + 32);  // the TMA thread (+ tx bytes), the scale warp's lanes
      mbar_init(S.empty0 + 8 * s, 256);  // every consumer thread, after its last read of the stage
      S.wide_s[s] = 0u;
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(ta) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(tb) : "memory");
  }
  __syncthreads();

  if (tid >= 256u) {
    // ---------------- producer warpgroup ----------------
    // warp 8 lane 0: the TMA loop alone (a slot's code tiles go out as soon as it is released); warps 9-11: the
    // scale factors, round robin over stages, their loads staged ahead by cp.async. Full = the TMA thread's
    // arrive.expect_tx + the 32 arrivals of the stage's scale warp.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(WS_PRODUCER_REGS));
    const u32 pw = (tid - 256u) / 32u, lane = tid % 32u;
    const u32 total = wk.stages();  // this CTA's stages (where the walk knows them up front, else its cursor ends)
    if (WS_MODE == 4 && pw != 0) {
      // timing diagnostic: no scale warps (the full barrier counts the TMA thread only)
    } else if (pw == 0) {
      if (lane == 0 || Walk::kWarpSteps) {  // a warp-collective walk: every lane steps, lane 0 issues
        typename Walk::Cursor c = wk.start();
        for (u32 g = 0; g < total && wk.live(c); ++g, wk.next(c)) {
          const u32 slot = g % STAGES;
          if (g >= STAGES) mbar_wait(S.empty0 + 8 * slot, ((g / STAGES) - 1u) & 1u);
          if (lane == 0) {
            mbar_arrive_tx(S.full0 + 8 * slot, TILE_A + TILE_B);
            tma_load_2d(smem_addr(S.tile_a + slot * TILE_A), ta, S.full0 + 8 * slot, (i32)(c.kt * BK),
                        (i32)wk.ya(c));
            tma_load_2d(smem_addr(S.tile_b + slot * TILE_B), tb, S.full0 + 8 * slot, (i32)(c.kt * BK),
                        (i32)wk.yb(c));
          }
        }
      }
    } else {
      // scale warp w (0..2) converts the stages g = w, w + 3, ... (round robin: three stages in flight at once, a
      // warp's per-stage chain of waits, loads and stores is latency-bound); lane l: tile rows l + 32 i, i < 8
      // (A rows 0..127, then B rows 0..127)
      const u32 w = pw - 1u;
      // a stage's 4 scale bytes form one aligned word (per operand: the grouped B's rows may be longer than K)
      const bool word_a = SCALE_F32 || (wk.sa_stride() & 3u) == 0u;  // SCALE_F32: float32 words
      const bool word_b = SCALE_F32 || (wk.sb_stride() & 3u) == 0u;
      const u32 words_a = (wk.a_rows() * wk.sa_stride() + 3u) / 4u, words_b = (wk.b_rows() * wk.sb_stride() + 3u) / 4u;
      // a stage's 4 scale bytes of one row: one aligned word when the row stride % 4 == 0, else the two aligned words
      // around them (funnel-shifted at the conversion). They are copied by cp.async into the warp's WS_AHEAD-deep
      // staging ring in shared memory (each thread reads back only its own copies: cp.async.wait_group orders
      // them), so a warp's loads run WS_AHEAD of its stages ahead of the conversion without holding registers.
      // Two cursors (issue and convert) walk the tiles without a division per stage.
      u32* stage_w = S.wide_s + STAGES + w * (WS_AHEAD * 256u * WS_WORDS);  // [3][WS_AHEAD][256 rows][WS_WORDS]
      const WsScales<SLA> lay_a(sa, wk.a_rows(), kbs);  // layouts 1..5 (row-major: the word path below)
      const WsScales<SLB> lay_b(sb, wk.b_rows(), kbs);
#if SCALE_F32
      // b's float32 scales per 128 x 128 block [G, ceil(n/128), *]: every row of a stage's B tile (rows g n + n0 ..,
      // n0 % 128 == 0; rows past the group masked) reads its block's scale row (g, n0 / 128), from y = yb(c): once
      // per stage
      const u32 nb = (wk.n + 127u) / 128u;
      auto srow_b = [&](u32 y) { return (y / wk.n) * nb + (y % wk.n) / 128u; };
#else
      auto srow_b = [](u32) { return 0u; };
#endif
      typename Walk::Cursor ci = wk.start();
      for (u32 d = 0; d < w && wk.live(ci); ++d) wk.next(ci);
      typename Walk::Cursor cc = ci;
      auto step3 = [&](typename Walk::Cursor& c) {
#pragma unroll
        for (u32 d = 0; d < 3; ++d)
          if (wk.live(c)) wk.next(c);
      };
      auto issue = [&](u32 g, u32 sl) {
        if (g < total && wk.live(ci)) {
          const u32 sb_stage = srow_b(wk.yb(ci));
#pragma unroll 4
          for (u32 i = 0; i < 8; ++i) {
            const u32 r = lane + 32u * i;
            const bool is_a = r < 128u;
            const u32 row = is_a ? wk.ya(ci) + r : wk.yb(ci) + r - 128u;
            if (row < (is_a ? wk.a_end(ci) : wk.b_end(ci))) {
              const u32 dst = smem_addr(stage_w + (sl * 256u + r) * WS_WORDS);
              if ((is_a ? SLA : SLB) == MXRT_SCALE_LAYOUT_NONE) {
                const u32 srow = is_a || !SCALE_F32 ? row : sb_stage;
                const u32 o = srow * (is_a ? wk.sa_stride() : wk.sb_stride()) + ci.kt * WS_SROW_STEP;  // < 2^31
                const u32* wp = reinterpret_cast<const u32*>(is_a ? sa : sb) + (o >> 2);
                ws_cp4(dst, wp);
                if (!(is_a ? word_a : word_b) && (o >> 2) + 1u < (is_a ? words_a : words_b)) ws_cp4(dst + 4u, wp + 1);
              } else {
                if (is_a)
                  lay_a.issue(row, ci.kt, dst);
                else
                  lay_b.issue(row, ci.kt, dst);
              }
            }
          }
          step3(ci);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");  // one group per stage, empty ones included
      };
      for (u32 d = 0; d < WS_AHEAD; ++d) issue(w + 3u * d, d);
      u32 sl = 0;
      for (u32 g = w; g < total && wk.live(cc); g += 3u, step3(cc)) {
        const u32 slot = g % STAGES, kt = cc.kt;
        asm volatile("cp.async.wait_group %0;" ::"n"(WS_AHEAD - 1) : "memory");  // stage g's copies landed
        if (g >= STAGES) mbar_wait(S.empty0 + 8 * slot, ((g / STAGES) - 1u) & 1u);
        bool wide = false;
        const u32 sb_stage = srow_b(wk.yb(cc));
#pragma unroll 4
        for (u32 i = 0; i < 8; ++i) {
          const u32 r = lane + 32u * i;
          const bool is_a = r < 128u;
          const u32 row = is_a ? wk.ya(cc) + r : wk.yb(cc) + r - 128u;
          const bool in = row < (is_a ? wk.a_end(cc) : wk.b_end(cc));
          const u32* sw = stage_w + (sl * 256u + r) * WS_WORDS;
          u32 bytes;
          if ((is_a ? SLA : SLB) == MXRT_SCALE_LAYOUT_NONE) {
            const u32 srow = is_a || !SCALE_F32 ? row : sb_stage;
            const u32 o = srow * (is_a ? wk.sa_stride() : wk.sb_stride()) + kt * WS_SROW_STEP;
            const u32 hi = (o >> 2) + 1u < (is_a ? words_a : words_b) ? sw[1] : 0u;
            if (SCALE_F32 == 2)  // the stage's byte inside the aligned word copied around it
              bytes = !in ? 0u : (sw[0] >> (8u * (o & 3u))) & 255u;
            else
              bytes = !in ? 0u : (is_a ? word_a : word_b) ? sw[0] : __funnelshift_r(sw[0], hi, 8u * (o & 3u));
          } else {
            bytes = !in ? 0u : is_a ? lay_a.bytes(sw, row, kt) : lay_b.bytes(sw, row, kt);
          }
          float* dst = is_a ? S.sa_s + r
                            : S.sb_s + (((r - 128u) >> 1) & 3u) * SB_T + 2u * ((r - 128u) >> 3) + (r & 1u);
          const u32 step = is_a ? BM : 4u * SB_T;
#if SCALE_F32 == 1
          // the stage's one float32 factor (its word: byte offset row * stride + 4 kt); the consumers read j = 0
          dst[slot * KSTEPS * step] = in ? __uint_as_float(bytes) : 0.0f;
#elif SCALE_F32 == 2
          // the stage's one E8M0 factor (byte row * stride + kt); a byte outside the fast window makes the stage wide
          dst[slot * KSTEPS * step] = in ? e8m0_f32(bytes) : 0.0f;
          wide |= in && e8m0_wide(bytes);
#else
#pragma unroll
          for (u32 j = 0; j < KSTEPS; ++j) {
            const bool ok = in && kt * KSTEPS + j < kbs;  // a block outside the matrix: factor 0
            const u32 b = (bytes >> (8 * j)) & 255u;
            dst[(slot * KSTEPS + j) * step] = ok ? e8m0_f32(b) : 0.0f;
            wide |= ok && e8m0_wide(b);
          }
#endif
        }
        if (wide) atomicMax(S.wide_s + slot, g + 1u);  // stages only grow: no reset
        mbar_arrive(S.full0 + 8 * slot);  // each lane after its own factor stores
        issue(g + 3u * WS_AHEAD, sl);  // into the staging slot just read
        sl = sl + 1u == WS_AHEAD ? 0u : sl + 1u;
      }
    }
  } else {
    // ---------------- consumer warpgroups 0, 1: rows 64 cw .. 64 cw + 63 of the tile, all 128 columns ----------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(WS_CONSUMER_REGS));
#if SPLIT == 1
    // column split: warpgroup cw owns columns 64 cw .. 64 cw + 63 of all 128 rows, as two m64n64 blocks (rows
    // 0..63 into p0 / acc0, rows 64..127 into p1 / acc1) that share the 16 column factors of a k32 step. The
    // promotion of one block overlaps the other block's wgmma inside a stage (across the stage's fast / wide
    // branch, wgmmas in flight made ptxas serialise them: C7517 / C7514).
    const u32 cw = tid / 128u, lane = tid % 32u, tq = lane & 3u;
    const u32 lrow = 16u * ((tid / 32u) % 4u) + (lane >> 2), lcol = 64u * cw + 2u * tq;
    const u32 a_base = smem_addr(S.tile_a), b_base = smem_addr(S.tile_b) + cw * 64u * BK;
    const int m = (int)wk.m, n = (int)wk.n;  // the dense walk only (SPLIT 1: a development build)
    const u32 nkt = wk.nkt;
    const bool even_n = (n & 1) == 0;
    float acc0[32], acc1[32], p0[32], p1[32];
    u32 f = 0;
    for (typename Walk::Item it = wk.first(); wk.more(it); wk.step(it)) {
      const typename Walk::Tile T = wk.tile(it);
      const u32 m0 = T.m0, n0 = T.n0;
#pragma unroll
      for (int i = 0; i < 32; ++i) acc0[i] = acc1[i] = 0.0f;
      // block blk of k32 step J of the stage in slot SL
#define WS_ISSUE2(P, SL, J, BLK)                                                                 \
  do {                                                                                           \
    wg_fence();                                                                                  \
    wgmma_n64_k32(P, make_desc(a_base + (SL) * TILE_A + (BLK) * 64u * BK + 32u * (J)),           \
                  make_desc(b_base + (SL) * TILE_B + 32u * (J)));                                \
    wg_commit();                                                                                 \
  } while (0)
      for (u32 kt = 0; kt < nkt; ++kt, ++f) {
        const u32 slot = f % STAGES;
        mbar_wait(S.full0 + 8 * slot, (f / STAGES) & 1u);
        const bool wide_stage = S.wide_s[slot] == f + 1u;
        const float* sak = S.sa_s + slot * KSTEPS * BM + lrow;
        const float* sbk = S.sb_s + slot * KSTEPS * 4 * SB_T + tq * SB_T + 16u * cw;
        auto stage = [&](auto wide_c) {
          constexpr bool W = decltype(wide_c)::value;
          WS_ISSUE2(p0, slot, 0u, 0u);
          WS_ISSUE2(p1, slot, 0u, 1u);
#pragma unroll
          for (u32 j = 0; j < KSTEPS; ++j) {
            float fb[16];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const f32x4 b = *reinterpret_cast<const f32x4*>(sbk + j * 4 * SB_T + 4 * q);
              fb[4 * q] = b.x;
              fb[4 * q + 1] = b.y;
              fb[4 * q + 2] = b.z;
              fb[4 * q + 3] = b.w;
            }
            const float* sa_j = sak + j * BM;
            const float fa0 = sa_j[0], fa1 = sa_j[8], fa2 = sa_j[64], fa3 = sa_j[72];
            wg_wait<1>();  // block 0 of step j done (block 1 may still run)
            fence32(p0);
            promote32<W>(acc0, p0, fa0, fa1, fb);
            if (j + 1 < KSTEPS) {
              WS_ISSUE2(p0, slot, j + 1, 0u);
              wg_wait<1>();  // block 1 of step j done (block 0 of step j + 1 may run)
            } else {
              wg_wait<0>();
            }
            fence32(p1);
            promote32<W>(acc1, p1, fa2, fa3, fb);
            if (j + 1 < KSTEPS) WS_ISSUE2(p1, slot, j + 1, 1u);
          }
        };
        if (!wide_stage) {
          stage(mxrt_bool<false>{});
        } else {
          stage(mxrt_bool<true>{});
        }
        mbar_arrive(S.empty0 + 8 * slot);  // this thread's wgmmas of the stage done, its factors read
      }
#undef WS_ISSUE2
      store_acc<32>(out, acc0, m0 + lrow, n0 + lcol, m, n, even_n, sm90_keep_all{});
      store_acc<32>(out, acc1, m0 + 64u + lrow, n0 + lcol, m, n, even_n, sm90_keep_all{});
    }
#else
    const u32 cw = tid / 128u, lane = tid % 32u, tq = lane & 3u;
    const u32 lrow = 64u * cw + 16u * ((tid / 32u) % 4u) + (lane >> 2), lcol = 2u * tq;
    const u32 a_base = smem_addr(S.tile_a) + cw * 64u * BK, b_base = smem_addr(S.tile_b);
    float acc[64], p0[64];
#if DIAG == 0 && !SCALE_F32
    float p1[64];
#endif
    u32 f = 0;
    for (typename Walk::Item it = wk.first(); wk.more(it); wk.step(it)) {
      const typename Walk::Tile T = wk.tile(it);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      const u32 nst = wk.stages(T);  // 0: a tile without work (the grouped lens walk's tail rows: zeros stored)
      for (u32 kt = 0; kt < nst; ++kt, ++f) {
        const u32 slot = f % STAGES;
        mbar_wait(S.full0 + 8 * slot, (f / STAGES) & 1u);
        const bool wide_stage = S.wide_s[slot] == f + 1u;
        const u32 ab = a_base + slot * TILE_A, bb = b_base + slot * TILE_B;
        const float* sak = S.sa_s + slot * KSTEPS * BM + lrow;
        const float* sbk = S.sb_s + slot * KSTEPS * 4 * SB_T + tq * SB_T;
        // the stage's math, instantiated fast / wide behind one CTA-uniform branch per stage
        auto stage = [&](auto wide_c) {
          constexpr bool W = decltype(wide_c)::value;
#if DIAG == 1 || SCALE_F32
          // one 128-K partial: the stage's four k32 steps accumulate in the tensor core, one promotion (the DIAG
          // timing skeleton; the per-128 builds: DeepGEMM's recipe and its precision, one factor a stage, float32
          // never wide, E8M0 wide where a byte leaves the fast window)
#if WS_MODE <= 2
          wg_fence();
          wgmma_k32(p0, make_desc(ab), make_desc(bb));
#pragma unroll
          for (u32 j = 1; j < KSTEPS; ++j) wgmma_k32_acc(p0, make_desc(ab + 32u * j), make_desc(bb + 32u * j));
          wg_commit();
          wg_wait<0>();
          fence_regs(p0);
#endif
#if WS_MODE == 0
          promote(acc, p0, sak[0], sak[8], sbk, SCALE_F32 == 1 ? false : W);
#else
          (void)sak;
          (void)sbk;
#endif
#else
#define WS_ISSUE(P, J)                                                    \
  do {                                                                    \
    wg_fence();                                                           \
    wgmma_k32(P, make_desc(ab + 32u * (J)), make_desc(bb + 32u * (J)));   \
    wg_commit();                                                          \
  } while (0)
#define WS_PROMOTE(P, J)                                                                          \
  do {                                                                                            \
    fence_regs(P);                                                                                \
    promote(acc, P, sak[(J) * BM], sak[(J) * BM + 8], sbk + (J) * 4 * SB_T, W);                   \
  } while (0)
          // two partials in flight: the promotion of step j overlaps the wgmma of step j + 1
          WS_ISSUE(p0, 0u);
          WS_ISSUE(p1, 1u);
          wg_wait<1>();
          WS_PROMOTE(p0, 0u);
          WS_ISSUE(p0, 2u);
          wg_wait<1>();
          WS_PROMOTE(p1, 1u);
          WS_ISSUE(p1, 3u);
          wg_wait<1>();
          WS_PROMOTE(p0, 2u);
          wg_wait<0>();
          WS_PROMOTE(p1, 3u);
#undef WS_ISSUE
#undef WS_PROMOTE
#endif
        };
        if (!wide_stage) {
          stage(mxrt_bool<false>{});
        } else {
          stage(mxrt_bool<true>{});
        }
        mbar_arrive(S.empty0 + 8 * slot);  // this thread's reads of the stage done
      }
      // epilogue straight from the registers (masked at the M / N edges); the producer fills the next tile's
      // stages meanwhile
      wk.store(out, acc, T, lrow, lcol);
    }
#endif  // SPLIT
  }
}

#endif  // MXRT_CUDA
