// gemm_grouped_tiles.h: the device-side group schedule of the grouped MX GEMM kernels (gemm_mx_grouped_generic.hip,
// gemm_mx_grouped_gfx950.hip, gemm_mx_grouped_gfx942.hip, gemm_mx_grouped_sm90.hip, gemm_mx_grouped_sm90_ws.hip):
// group lengths read on the device (never by the host), turned into row / column offsets and row tiles by block-wide
// prefix sums in shared memory. The including file defines THREADS (the block size: every thread takes part in the
// scans); a launch has at most MXRT_MAX_GROUPS groups (mx_codes.h).
#pragma once
#include "../common/prelude.h"
#include "../common/mx_codes.h"

#ifndef THREADS
#error "gemm_grouped_tiles.h: THREADS must be defined by the launcher"
#endif

// groups per thread of the in-kernel prefix sums (G + 2 entries: the groups, mode 0's tail group, the end)
#define GG_PER ((MXRT_MAX_GROUPS + 2 + THREADS - 1) / THREADS)

// The largest g in [0, G] with starts[g] <= r (starts non-decreasing, starts[0] == 0 <= r): the group that owns
// entry r, empty groups skipped (mx_group.h's mxg_find_group, whose header pulls in the quantizers' warp helpers).
MXRT_DEVICE i32 gg_find(const i32* starts, i32 num_groups, i32 r) {
  i32 lo = 0, hi = num_groups;
  while (lo < hi) {
    const i32 mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

MXRT_DEVICE u64 gg_row_bytes(u32 bits, u32 k) { return bits == 4u ? (k + 1u) / 2u : k; }

MXRT_DEVICE i64 gg_len(const void* lens, u32 g, u32 lens_i64) {
  return lens_i64 ? ((const i64*)lens)[g] : (i64)((const i32*)lens)[g];
}

// Exclusive block-wide prefix of one i64 per thread (Hillis-Steele in shared memory); every thread calls it.
MXRT_DEVICE i64 gg_exclusive_scan(i64 v, i64* part) {
  const u32 tid = MXRT_TID_X;
  mxrt_sync();
  part[tid] = v;
  mxrt_sync();
  for (u32 off = 1; off < THREADS; off <<= 1) {
    const i64 o = tid >= off ? part[tid - off] : 0;
    mxrt_sync();
    part[tid] += o;
    mxrt_sync();
  }
  return part[tid] - v;
}

// starts[g] (g <= G) of groups whose lengths are lens[g] clamped to [0, cap], each padded to a multiple of `pad`,
// cut at `total`: starts[g] = min(sum_{j<g} pad(clamp(lens[j])), total). pad = 1, total = m: mode 0's row offsets
// (mxrt.group_offsets for valid lens); pad = align, total = k: mode 3's column ranges (pad_group_layout).
MXRT_DEVICE void gg_offsets(const void* lens, u32 lens_i64, u32 G, i64 cap, i64 pad, i64 total, i32* starts,
                            i64* part) {
  const u32 tid = MXRT_TID_X;
  i64 l[GG_PER], run = 0;
#pragma unroll
  for (u32 j = 0; j < GG_PER; ++j) {
    const u32 g = tid * GG_PER + j;
    i64 v = g < G ? gg_len(lens, g, lens_i64) : 0;
    v = v < 0 ? 0 : (v > cap ? cap : v);
    l[j] = (v + pad - 1) / pad * pad;
    run += l[j];
  }
  i64 s = gg_exclusive_scan(run, part);
#pragma unroll
  for (u32 j = 0; j < GG_PER; ++j) {
    const u32 g = tid * GG_PER + j;
    if (g <= G) starts[g] = (i32)(s < total ? s : total);
    s += l[j];
  }
  mxrt_sync();
}

// Mode "lens" (group_lens forward / dgrad): starts[g] (g <= G + 1) = the row offsets of the G groups (lengths
// clamped to [0, m], cut at m) and of group G, the tail rows [S, m) past the last group (starts[G + 1] = m);
// tiles[g] (g <= G + 1) = the prefix of their row-tile counts ceil(rows / bm). Row tile y of the launch belongs to
// group gg_find(tiles, G + 1, y) when y < tiles[G + 1]. Every thread calls it (barriers inside).
MXRT_DEVICE void gg_lens_tiles(const void* lens, u32 lens_i64, u32 G, u32 m, u32 bm, i32* starts, i32* tiles,
                               i64* part) {
  const u32 tid = MXRT_TID_X;
  gg_offsets(lens, lens_i64, G, (i64)m, 1, (i64)m, starts, part);
  if (tid == 0) starts[G + 1] = (i32)m;  // group G: the tail rows [S, m) past the last group, stored as zeros
  i64 run = 0, cnt[GG_PER];
  mxrt_sync();
#pragma unroll
  for (u32 j = 0; j < GG_PER; ++j) {
    const u32 g = tid * GG_PER + j;
    cnt[j] = g <= G ? (i64)((starts[g + 1] - starts[g] + (i32)bm - 1) / (i32)bm) : 0;
    run += cnt[j];
  }
  i64 s = gg_exclusive_scan(run, part);
#pragma unroll
  for (u32 j = 0; j < GG_PER; ++j) {
    const u32 g = tid * GG_PER + j;
    if (g <= G + 1u) tiles[g] = (i32)s;
    s += cnt[j];
  }
  mxrt_sync();
}

// Mode "masked" on a compact tile list (gemm_mx_grouped_sm90_ws.hip): tiles[g] (g <= G) = the prefix of the groups'
// row-tile counts ceil(clamp(masked_m[g], 0, max_m) / bm), so row tile y < tiles[G] of the list belongs to group
// gg_find(tiles, G, y) (empty groups own no tile). gg_offsets with pad = bm gives the prefix in rows; the sum stays
// below G * ceil(max_m / bm) * bm < 2^31 (checked by the launcher). Every thread calls it (barriers inside).
MXRT_DEVICE void gg_masked_tiles(const void* masked, u32 lens_i64, u32 G, u32 max_m, u32 bm, i32* tiles, i64* part) {
  const i64 padded = ((i64)max_m + bm - 1) / bm * bm;
  gg_offsets(masked, lens_i64, G, (i64)max_m, (i64)bm, (i64)G * padded, tiles, part);
  for (u32 g = MXRT_TID_X; g <= G; g += THREADS) tiles[g] /= (i32)bm;
  mxrt_sync();
}
