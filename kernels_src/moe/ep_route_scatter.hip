// kernel   ep_route_scatter                                                                   (extern "C")
// computes the stable send order of mxrt.ep.dispatch from ep_route_count's hist (ep_route.h): order[p] = i and
//          pos[i] = p for every flat pair i, p = (pairs of lower bins) + (pairs of bin(i) before i); and, by CTA 0,
//          counts[d*(El+1) + c] = pairs for rank d's local expert c (c < El = E/W), counts[d*(El+1) + El] = the
//          number of ids outside [0, E) (the same in every row): the [W, El + 1] matrix the counts' all-to-all sends
// args     const void* ids [numel] (ID_BYTES each) | const i32* hist [num_ctas*(E+1)] | i64* order [numel] |
//          i64* pos [numel] | i64* counts [W*(E/W+1)] | int numel, int E, int W, int chunk, int num_ctas
// grid     (num_ctas,1,1)   block (THREADS,1,1)   smem (2*EP_MAX_BINS + 2*THREADS)*4 bytes static
// defines  THREADS, ID_BYTES (4 or 8)           set by mxrt/ops/ep_route.py (variants: mxrt/ops/ep_kernels.py)
// requires ep_route_count ran on hist with the same num_ctas, chunk; num_ctas*chunk >= numel; numel + chunk <
//          2^31; E + 1 <= EP_MAX_BINS; W >= 1 divides E                                checked by mxrt/ops/ep_route.py
#include "ep_route.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    ep_route_scatter(const void* __restrict__ ids, const i32* __restrict__ hist, i64* __restrict__ order,
                     i64* __restrict__ pos, i64* __restrict__ counts, i32 numel, i32 E, i32 W, i32 chunk,
                     i32 num_ctas) {
  __shared__ i32 off[EP_MAX_BINS];  // this CTA's next position per bin
  __shared__ i32 tot[EP_MAX_BINS];  // pairs per bin over all CTAs, then their exclusive scan
  __shared__ u32 key[THREADS];
  __shared__ i32 part[THREADS];
  const u32 t = MXRT_TID_X, b = MXRT_BID_X, nb = (u32)E + 1u;
  for (u32 e = t; e < nb; e += THREADS) {  // coalesced across e for every CTA row of hist
    u32 before = 0, total = 0;
#pragma unroll 8
    for (u32 c = 0; c < (u32)num_ctas; ++c) {  // independent loads, 8 in flight: L2 latency, not a chain of them
      const u32 v = (u32)hist[c * nb + e];
      before += c < b ? v : 0u;
      total += v;
    }
    off[e] = (i32)before;
    tot[e] = (i32)total;
  }
  mxrt_sync();
  if (b == 0) {
    const u32 el = (u32)E / (u32)W, ld = el + 1u;
    for (u32 q = t; q < (u32)W * ld; q += THREADS) {
      const u32 d = q / ld, c = q - d * ld;
      counts[q] = (i64)(c < el ? tot[d * el + c] : tot[E]);
    }
  }
  ep_scan(tot, nb, part);  // its first write to tot follows barriers, after every read above
  for (u32 e = t; e < nb; e += THREADS) off[e] += tot[e];
  mxrt_sync();
  const u32 begin = ep_min(b * (u32)chunk, (u32)numel), end = ep_min(begin + (u32)chunk, (u32)numel);
  for (u32 base = begin; base < end; base += THREADS) {  // the same tiles for every thread: barriers stay uniform
    const u32 i = base + t;
    const bool live = i < end;
    const u32 e = live ? ep_bin(ids, i, (u32)E) : nb;  // nb matches no live bin
    key[t] = e;
    mxrt_sync();
    if (live) {
      u32 rank = 0;
      for (u32 j = 0; j < t; ++j) rank += key[j] == e ? 1u : 0u;
      const u32 p = (u32)off[e] + rank;
      order[p] = (i64)i;
      pos[i] = (i64)p;
    }
    mxrt_sync();  // every read of off[] for this tile is done
    if (live) ep_atomic_inc(&off[e]);
    mxrt_sync();  // off[] advanced, key[] free for the next tile
  }
}
