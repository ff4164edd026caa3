// gemm_grouped_ws_walk.h: the grouped work list of gemm_mx_grouped_sm90_ws.hip as a tile walk of the issue-10 engine
// (gemm_sm90_ws_engine.h's walk interface): the schedule built on the device from the group description
// (gws_schedule, gemm_grouped_tiles.h's prefix sums) and GwsWalk, from which every role of the engine (the TMA warp,
// the scale warps, the consumers) derives the same sequence of (tile, group, k-stage). Also built on the host
// (tests/support/simt_grouped_walk_host.cpp: the walk of every CTA checked against the group description).
// The includer defines MODE (0 lens, 1 indices, 2 masked), BM, BN, GROUP_M, KSTEPS and THREADS (the block size:
// every thread takes part in the schedule's scans), and provides store_half / sm90_keep_all (gemm_sm90_tile.h).
#pragma once
#include "gemm_grouped_tiles.h"
#include "gemm_tile_raster.h"

#if !defined(MODE) || !defined(KSTEPS)
#error "gemm_grouped_ws_walk.h: MODE and KSTEPS must be defined first"
#endif

#define GWS_FLAG_PAIRS 1u
#define GWS_FLAG_I64 2u
// the schedule's shared memory: part[THREADS] (the scans' scratch), starts[G + 2], tiles[G + 2], 8-byte aligned
// (mxrt/ops/grouped_gemm_sm90_ws.py SCHED_BYTES mirrors it, 8 bytes of alignment included)
#define GWS_SCHED_BYTES (8 + THREADS * 8 + 2 * (MXRT_MAX_GROUPS + 2) * 4)

#if defined(MXRT_CUDA)
#define GWS_GRID_X ((u32)gridDim.x)
// the minimum over the warp's 32 lanes (every lane calls it)
MXRT_DEVICE i32 gws_warp_min(i32 v) { return __reduce_min_sync(0xFFFFFFFFu, v); }
#else  // the host SIMT emulator (tests/support/simt_core.h)
#define GWS_GRID_X MXRT_NBID_X
inline i32 gws_warp_min(i32 v) {
  for (u32 o = 16; o > 0; o >>= 1) {
    const i32 w = (i32)mxrt_host_shfl((u32)v, (MXRT_TID_X % 32u) ^ o);
    v = w < v ? w : v;
  }
  return v;
}
#endif

// The schedule of MODE 0 / 2 in shared memory (part: THREADS entries; starts, tiles: MXRT_MAX_GROUPS + 2 each);
// MODE 1 needs none. Every thread calls it (barriers inside).
MXRT_DEVICE void gws_schedule(const void* groups, u32 lens_i64, u32 G, u32 m, u32 max_m, i32* starts, i32* tiles,
                              i64* part) {
#if MODE == 0
  (void)max_m;
  gg_lens_tiles(groups, lens_i64, G, m, BM, starts, tiles, part);
#elif MODE == 2
  (void)m;
  (void)starts;
  gg_masked_tiles(groups, lens_i64, G, max_m, BM, tiles, part);
#else
  (void)groups;
  (void)lens_i64;
  (void)G;
  (void)m;
  (void)max_m;
  (void)starts;
  (void)tiles;
  (void)part;
#endif
}

// MODE 1's store predicate: a thread's two accumulator rows r0 (k0) and r0 + 8 (k1), kept where their id is the round's
struct gws_keep2 {
  u32 r0;
  bool k0, k1;
  MXRT_DEVICE bool operator()(u32 row) const { return row == r0 ? k0 : k1; }
};

// The grouped tile walk (the engine's walk interface, gemm_sm90_ws_engine.h): tiles t = bid, bid + grid, ... of the
// list in the GROUP_M raster; an Item is a tile and its group (MODE 1: one item per round), a Cursor an item's stage
// with its operand rows.
struct GwsWalk {
  enum { kWarpSteps = MODE == 1 };
  const void* groups;
  const i32* starts;  // MODE 0: row offsets of the G groups and the tail group (shared memory)
  const i32* tiles;   // MODE 0 / 2: prefix of the row-tile counts (shared memory)
  u32 m, n, G, max_m, lens_i64, kbs, nkt, sa_s, sb_s, tiles_m, tiles_n, ntiles;
  bool even_n;
  struct Item {
    u32 t;    // the tile of the list
    i32 grp;  // its group (MODE 0: G = the tail rows; MODE 1: the round's id; -1: none)
  };
  using Tile = Item;
  struct Cursor {
    Item it;
    u32 kt, ya, yb, a_end, b_end;
  };

  MXRT_DEVICE GwsWalk(const void* groups_, const i32* starts_, const i32* tiles_, u32 m_, u32 n_, u32 k_,
                      u32 sa_stride_, u32 sb_stride_, u32 G_, u32 max_m_, u32 flags) {
    groups = groups_;
    starts = starts_;
    tiles = tiles_;
    m = m_;
    n = n_;
    G = G_;
    max_m = max_m_;
    lens_i64 = (flags & GWS_FLAG_I64) ? 1u : 0u;
    even_n = (flags & GWS_FLAG_PAIRS) != 0u;
    kbs = (k_ + 31u) / 32u;
    nkt = (kbs + KSTEPS - 1) / KSTEPS;
    sa_s = sa_stride_;
    sb_s = sb_stride_;
#if MODE == 0
    tiles_m = (u32)tiles[G + 1];  // the groups' row tiles and the tail's
#elif MODE == 2
    tiles_m = (u32)tiles[G];
#else
    tiles_m = (m + BM - 1) / BM;
#endif
    tiles_n = (n + BN - 1) / BN;
    ntiles = tiles_m * tiles_n;
  }
  MXRT_DEVICE u32 a_rows() const { return m; }
  MXRT_DEVICE u32 b_rows() const { return G * n; }
  MXRT_DEVICE u32 sa_stride() const { return sa_s; }
  MXRT_DEVICE u32 sb_stride() const { return sb_s; }
  // the CTA's place in the persistent grid, read where used (as WsDenseWalk)
  MXRT_DEVICE static u32 bid() { return MXRT_BID_X; }
  MXRT_DEVICE static u32 grid() { return GWS_GRID_X; }

  // the row tile y and first column n0 of tile t
  MXRT_DEVICE void place(u32 t, u32& y, u32& n0) const {
    u32 m0;
    ws_tile(t, tiles_m, tiles_n, m0, n0);
    y = m0 / BM;
  }
#if MODE == 1
  // the smallest group id above prev among the rows of tile t (-1: none); warp-collective (a reduction)
  MXRT_DEVICE i32 next_id(u32 t, i32 prev) const {
    u32 y, n0;
    place(t, y, n0);
    const u32 lane = MXRT_TID_X % 32u;
    i32 best = 0x7FFFFFFF;
#pragma unroll
    for (u32 i = 0; i < BM / 32u; ++i) {
      const u32 row = y * BM + lane + 32u * i;
      const i32 v = row < m ? reinterpret_cast<const i32*>(groups)[row] : -1;
      if (v > prev && v < (i32)G) best = v < best ? v : best;  // v > prev >= -1: a group
    }
    best = gws_warp_min(best);
    return best == 0x7FFFFFFF ? -1 : best;
  }
  // from tile t on, the first tile holding a group and its first round (uniform over the warp)
  MXRT_DEVICE void settle(Item& it) const {
    while (it.t < ntiles && (it.grp = next_id(it.t, -1)) < 0) it.t += grid();
  }
#else
  MXRT_DEVICE i32 group_of(u32 t) const {
    u32 y, n0;
    place(t, y, n0);
    return gg_find(tiles, MODE == 0 ? (i32)G + 1 : (i32)G, (i32)y);
  }
#endif

  // ---- consumers: every item (MODE 0's tail tiles too) ----
  MXRT_DEVICE Item first() const {
    Item it{bid(), 0};
#if MODE == 1
    settle(it);
#else
    if (it.t < ntiles) it.grp = group_of(it.t);
#endif
    return it;
  }
  MXRT_DEVICE bool more(const Item& it) const { return it.t < ntiles; }
  MXRT_DEVICE void step(Item& it) const {
#if MODE == 1
    it.grp = next_id(it.t, it.grp);  // the tile's next round
    if (it.grp < 0) {
      it.t += grid();
      settle(it);
    }
#else
    it.t += grid();
    if (it.t < ntiles) it.grp = group_of(it.t);
#endif
  }
  MXRT_DEVICE Tile tile(const Item& it) const { return it; }
  MXRT_DEVICE u32 stages(const Tile& T) const { return MODE == 0 && T.grp == (i32)G ? 0u : nkt; }

  // the group's rows [row0, row0 + rows) and the tile's first row inside them (MODE 0 / 2)
  MXRT_DEVICE void rows_of(const Item& it, u32 y, u32& row0, u32& rows, u32& m0) const {
#if MODE == 0
    row0 = (u32)starts[it.grp];
    rows = (u32)starts[it.grp + 1] - row0;
#elif MODE == 2
    const i64 mm = gg_len(groups, (u32)it.grp, lens_i64);
    row0 = (u32)it.grp * max_m;
    rows = (u32)(mm < 0 ? 0 : (mm > (i64)max_m ? (i64)max_m : mm));
#endif
#if MODE != 1
    m0 = (y - (u32)tiles[it.grp]) * BM;
#else
    row0 = 0u;
    rows = m;
    m0 = y * BM;
#endif
  }

  MXRT_DEVICE void store(void* out, const float (&acc)[64], const Tile& T, u32 lrow, u32 lcol) const {
    u32 y, n0, row0, rows, m0;
    place(T.t, y, n0);
    rows_of(T, y, row0, rows, m0);
#if MODE == 1
    // the round's rows of this thread (lrow, lrow + 8): kept where their id is the round's group
    const u32 r0 = m0 + lrow;
    const i32* ids = reinterpret_cast<const i32*>(groups);
    const bool k0 = r0 < m && ids[r0] == T.grp, k1 = r0 + 8u < m && ids[r0 + 8u] == T.grp;
    store_half(out, acc, r0, n0 + lcol, (int)m, (int)n, even_n, gws_keep2{r0, k0, k1});
#else
    void* out_g = reinterpret_cast<u8*>(out) + (u64)row0 * n * 2u;  // the group's first row (16-bit out)
    store_half(out_g, acc, m0 + lrow, n0 + lcol, (int)rows, (int)n, even_n, sm90_keep_all{});
#endif
  }

  // ---- producers: the items with stages, one cursor step per stage ----
  MXRT_DEVICE void skip_empty(Item& it) const {
    while (more(it) && stages(it) == 0u) step(it);
  }
  MXRT_DEVICE void aim(Cursor& c) const {  // the stage's operand rows (the cursor's item has stages)
    u32 y, n0, row0, rows, m0;
    place(c.it.t, y, n0);
    rows_of(c.it, y, row0, rows, m0);
    c.ya = row0 + m0;
    c.a_end = row0 + rows;
    c.yb = (u32)c.it.grp * n + n0;
    c.b_end = (u32)c.it.grp * n + n;
  }
  MXRT_DEVICE u32 stages() const { return 0xFFFFFFFFu; }  // unknown up front: the cursor ends the walk
  MXRT_DEVICE Cursor start() const {
    Cursor c{first(), 0u, 0u, 0u, 0u, 0u};
    skip_empty(c.it);
    if (more(c.it)) aim(c);
    return c;
  }
  MXRT_DEVICE void next(Cursor& c) const {
    if (++c.kt == nkt) {
      c.kt = 0u;
      step(c.it);
      skip_empty(c.it);
      if (more(c.it)) aim(c);
    }
  }
  MXRT_DEVICE bool live(const Cursor& c) const { return more(c.it); }
  MXRT_DEVICE u32 ya(const Cursor& c) const { return c.ya; }
  MXRT_DEVICE u32 yb(const Cursor& c) const { return c.yb; }
  MXRT_DEVICE u32 a_end(const Cursor& c) const { return c.a_end; }
  MXRT_DEVICE u32 b_end(const Cursor& c) const { return c.b_end; }
};
