// gemm_tile_raster.h: the tile order of the persistent Hopper GEMMs (gemm_sm90_ws_engine.h's dense walk,
// gemm_grouped_ws_walk.h's grouped walk, gemm_mx_sm90_bf16.hip): GROUP_M row tiles sweep the column tiles together
// (L2 reuse of B), and a cursor over a CTA's (tile, k-stage) sequence. Plain integer math, also built on the host (tests/support/simt_grouped_walk_host.cpp). The includer defines BM, BN and
// GROUP_M (gemm_sm90_tile.h on the device).
#pragma once
#include "../common/prelude.h"

#if !defined(BM) || !defined(BN) || !defined(GROUP_M)
#error "gemm_tile_raster.h: BM, BN and GROUP_M must be defined first"
#endif

// tile t of the persistent walk -> its first row / column (GROUP_M row tiles sweep the column tiles together)
MXRT_DEVICE void ws_tile(u32 t, u32 tiles_m, u32 tiles_n, u32& m0, u32& n0) {
  const u32 per_group = GROUP_M * tiles_n, first_m = (t / per_group) * GROUP_M;
  const u32 gsize = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
  m0 = (first_m + (t % per_group) % gsize) * BM;
  n0 = ((t % per_group) / gsize) * BN;
}

// a walk over this CTA's (tile, k-stage) sequence without a division per stage
struct WsCursor {
  u32 tile, kt, m0, n0;
};
MXRT_DEVICE WsCursor ws_start(u32 bid, u32 tiles_m, u32 tiles_n) {
  WsCursor c{bid, 0u, 0u, 0u};
  ws_tile(bid, tiles_m, tiles_n, c.m0, c.n0);
  return c;
}
MXRT_DEVICE void ws_next(WsCursor& c, u32 nkt, u32 grid, u32 ntiles, u32 tiles_m, u32 tiles_n) {
  if (++c.kt == nkt) {
    c.kt = 0u;
    c.tile += grid;
    if (c.tile < ntiles) ws_tile(c.tile, tiles_m, tiles_n, c.m0, c.n0);
  }
}
