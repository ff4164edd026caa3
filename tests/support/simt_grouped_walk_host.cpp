// The grouped work list of gemm_mx_grouped_sm90_ws.hip (kernels_src/gemm/gemm_grouped_ws_walk.h) on the host SIMT
// emulator (simt_core.h; tests/test_grouped_ws_walk_host.py). Every CTA of a persistent grid builds the schedule from
// the group description (all 384 threads, as the kernel) and walks it as the engine's roles do
// (gemm_sm90_ws_engine.h): warp 8 the producer's stage cursor (every lane steps, lane 0 records: MODE 1 steps
// warp-collectively), warps 9-11 the scale warps' round robin (cursor w stages ahead, then 3 at a time), warps 0-7 the
// consumers' tiles and their epilogue stores through the walk's own store(). The stores land in this file's
// store_half, which writes the same elements as gemm_sm90_tile.h's (rows row0 + 8h, columns col0 + 8j + {0, 1}, inside
// m x n, keep(row)) and records, per element, how often and by which (CTA, consumer item) it was written. A consumer's
// "accumulator" holds 1 + its tile-local row * 128 + column (0 for a tile without stages), so every stored value
// names the tile row and column the kernel's math would have put there.
// Build: g++ -std=c++17 -O1 -shared -fPIC -DMODE=0|1|2 -DGROUP_M=<gemm_sm90_tile.h's>
#include "simt_core.h"

#define BM 128
#define BN 128
#define KSTEPS 4
#define THREADS 384

namespace rec {
static u16* out_base;
static u32* count;
static i32 *who_bid, *who_item;
static i32 cur_item[THREADS];
// one producer stage (warp 8 or a scale warp): CTA, role (0 TMA, 1..3 scale warp), stage g, kt, tile, group, rows
struct Stage {
  i32 bid, role, g, kt, t, grp, ya, yb, a_end, b_end;
};
// one consumer item: CTA, its index in the CTA's walk, tile, group, stages
struct Item {
  i32 bid, item, t, grp, stages;
};
static std::vector<Stage> stages;
static std::vector<Item> items;
}  // namespace rec

struct sm90_keep_all {
  bool operator()(u32) const { return true; }
};
template <class Keep>
void store_half(void* out, const float (&acc)[64], u32 row0, u32 col0, int m, int n, bool even_n, const Keep& keep) {
  (void)even_n;
  for (int j = 0; j < 16; ++j) {
    const u32 col = col0 + 8u * j;
    for (int h = 0; h < 2; ++h) {
      const u32 row = row0 + 8u * h;
      if (row < (u32)m && col < (u32)n && keep(row)) {
        for (u32 e = 0; e < 2 && col + e < (u32)n; ++e) {
          u16* o = reinterpret_cast<u16*>(out) + (u64)row * (u32)n + col + e;
          const u64 off = (u64)(o - rec::out_base);
          *o = (u16)acc[4 * j + 2 * h + e];
          rec::count[off] += 1;
          rec::who_bid[off] = (i32)MXRT_BID_X;
          rec::who_item[off] = rec::cur_item[MXRT_TID_X];
        }
      }
    }
  }
}

#include "../../kernels_src/gemm/gemm_grouped_ws_walk.h"

namespace simt {
static const void* a_groups;
static u32 a_m, a_n, a_k, a_G, a_max_m, a_flags;

static void record(const GwsWalk& wk, const GwsWalk::Cursor& c, i32 role, u32 g) {
  (void)wk;
  rec::stages.push_back({(i32)MXRT_BID_X, role, (i32)g, (i32)c.kt, (i32)c.it.t, c.it.grp, (i32)c.ya, (i32)c.yb,
                         (i32)c.a_end, (i32)c.b_end});
}

static void run_kernel() {
  static i64 part[THREADS];
  static i32 starts[MXRT_MAX_GROUPS + 2], tiles[MXRT_MAX_GROUPS + 2];
  const u32 tid = MXRT_TID_X, lane = tid % 32u;
  const u32 lens_i64 = (a_flags & GWS_FLAG_I64) ? 1u : 0u;
  gws_schedule(a_groups, lens_i64, a_G, a_m, a_max_m, starts, tiles, part);
  const GwsWalk wk(a_groups, starts, tiles, a_m, a_n, a_k, 1u, 1u, a_G, a_max_m, a_flags);
  if (tid >= 256u && tid < 288u) {  // the TMA warp (gemm_sm90_ws_engine.h's loop)
    const u32 total = wk.stages();
    if (lane == 0 || GwsWalk::kWarpSteps) {
      GwsWalk::Cursor c = wk.start();
      for (u32 g = 0; g < total && wk.live(c); ++g, wk.next(c))
        if (lane == 0) record(wk, c, 0, g);
    }
  } else if (tid >= 288u) {  // scale warp w: stages w, w + 3, ... (the engine's ci / cc cursors)
    const u32 w = (tid - 288u) / 32u, total = wk.stages();
    GwsWalk::Cursor cc = wk.start();
    for (u32 d = 0; d < w && wk.live(cc); ++d) wk.next(cc);
    auto step3 = [&](GwsWalk::Cursor& c) {
      for (u32 d = 0; d < 3; ++d)
        if (wk.live(c)) wk.next(c);
    };
    for (u32 g = w; g < total && wk.live(cc); g += 3u, step3(cc))
      if (lane == 0) record(wk, cc, 1 + (i32)w, g);
  } else {  // the consumers (gemm_sm90_ws_engine.h's SPLIT 0 loop)
    const u32 cw = tid / 128u, tq = lane & 3u;
    const u32 lrow = 64u * cw + 16u * ((tid / 32u) % 4u) + (lane >> 2), lcol = 2u * tq;
    i32 item = 0;
    for (GwsWalk::Item it = wk.first(); wk.more(it); wk.step(it), ++item) {
      const GwsWalk::Tile T = wk.tile(it);
      const u32 nst = wk.stages(T);
      float acc[64];
      for (u32 j = 0; j < 16; ++j)
        for (u32 h = 0; h < 2; ++h)
          for (u32 e = 0; e < 2; ++e)
            acc[4 * j + 2 * h + e] = nst ? (float)(1u + (lrow + 8u * h) * 128u + lcol + 8u * j + e) : 0.0f;
      rec::cur_item[tid] = item;
      if (tid == 0) rec::items.push_back({(i32)MXRT_BID_X, item, (i32)T.t, T.grp, (i32)nst});
      wk.store(rec::out_base, acc, T, lrow, lcol);
    }
  }
}

static int run_grid(u32 gx, int order) {
  failed = false;
  error[0] = 0;
  body = run_kernel;
  nbid_x = gx;
  nbid_y = 1;
  for (u32 i = 0; i < gx; ++i) {
    bid_x = order == 2 ? (i * 7u + 3u) % gx : i;  // a scrambled block order (7 coprime with gx: the test's grids)
    if (order == 2 && gx % 7u == 0) bid_x = i;
    if (!run_block(THREADS, order, bid_x * 7u)) return 1;
  }
  return 0;
}
}  // namespace simt

extern "C" const char* simt_error() { return simt::error; }

// u = {m, n, k, num_groups, max_m, flags}; out [rows, n] u16, count / who_bid / who_item: one per element
extern "C" int simt_walk(const void* groups, u16* out, u32* count, i32* who_bid, i32* who_item, const u32* u, int gx,
                         int order) {
  simt::a_groups = groups;
  simt::a_m = u[0];
  simt::a_n = u[1];
  simt::a_k = u[2];
  simt::a_G = u[3];
  simt::a_max_m = u[4];
  simt::a_flags = u[5];
  rec::out_base = out;
  rec::count = count;
  rec::who_bid = who_bid;
  rec::who_item = who_item;
  rec::stages.clear();
  rec::items.clear();
  return simt::run_grid((u32)gx, order);
}
extern "C" int simt_stage_count() { return (int)rec::stages.size(); }
extern "C" void simt_stages(i32* dst) {
  for (size_t i = 0; i < rec::stages.size(); ++i) std::memcpy(dst + 10 * i, &rec::stages[i], sizeof(rec::Stage));
}
extern "C" int simt_item_count() { return (int)rec::items.size(); }
extern "C" void simt_items(i32* dst) {
  for (size_t i = 0; i < rec::items.size(); ++i) std::memcpy(dst + 5 * i, &rec::items[i], sizeof(rec::Item));
}
