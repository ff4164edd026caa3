// gemm_tile_raster.h: the tile order of the persistent Hopper GEMMs (gemm_sm90_ws_engine.h's dense walk,
// gemm_grouped_ws_walk.h's grouped walk): GROUP_M row tiles sweep the column tiles together (L2 reuse of B). Plain
// integer math, also built on the host (tests/support/simt_grouped_walk_host.cpp). The includer defines BM, BN and
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
