// kernel   ep_recv_map                                                                        (extern "C")
// computes mxrt.ep.dispatch's receive maps from the received counts (numpy twins in mxrt.layouts.ep): grouped
//          row g (order: local expert e, source s, pair) <- received row j (order: s, e, pair): g2r[g] = j,
//          perm[j] = g (recv_to_grouped), j = g - gstart[e, s] + rstart[s, e] with the exclusive prefix sums of
//          counts in (e, s) and (s, e) order; and, by CTA 0, lens[e] = sum over s of counts[s, e] (group_lens)
// args     const i64* counts [W*ldc] (rows per (source s, local expert e) at s*ldc + e) | i64* g2r [R] |
//          i64* perm [R] | i64* lens [El] | i64 R, int W, int El, int ldc
// grid     (num_ctas,1,1) (grid-stride over g)   block (THREADS,1,1)   smem (2*EP_MAX_SEGS + 1 + THREADS)*4 static
// defines  THREADS, ID_BYTES (unused here; one define set for the family)
//                                               set by mxrt/ops/ep_route.py (variants: mxrt/ops/ep_kernels.py)
// requires R = the sum of counts[s, e] over s < W, e < El (R < 2^31); W * El <= EP_MAX_SEGS; counts >= 0
//                                                                                    checked by mxrt/ops/ep_route.py
#include "ep_route.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    ep_recv_map(const i64* __restrict__ counts, i64* __restrict__ g2r, i64* __restrict__ perm, i64* __restrict__ lens,
                i64 R, i32 W, i32 El, i32 ldc) {
  __shared__ i32 gs[EP_MAX_SEGS + 1];  // grouped starts, segment q = e * W + s; gs[nseg] = R
  __shared__ i32 rs[EP_MAX_SEGS];      // received starts, segment s * El + e
  __shared__ i32 part[THREADS];
  const u32 t = MXRT_TID_X, w = (u32)W, el = (u32)El, nseg = w * el;
  for (u32 q = t; q < nseg; q += THREADS) {
    const u32 s = q / el, e = q - s * el;  // q in (s, e) order: coalesced reads of each counts row
    const i32 c = (i32)counts[(u64)s * (u32)ldc + e];
    rs[q] = c;
    gs[e * w + s] = c;
  }
  mxrt_sync();
  const u32 total = ep_scan(gs, nseg, part);
  ep_scan(rs, nseg, part);
  if (t == 0) gs[nseg] = (i32)total;
  mxrt_sync();
  if (MXRT_BID_X == 0) {
    for (u32 e = t; e < el; e += THREADS) lens[e] = (i64)(gs[(e + 1u) * w] - gs[e * w]);
  }
  const u32 stride = MXRT_NBID_X * THREADS;
  for (u32 g = MXRT_BID_X * THREADS + t; g < (u32)R; g += stride) {
    u32 lo = 0, hi = nseg;  // first q in [0, nseg] with gs[q] > g (gs[nseg] = R > g): the segment is q - 1
    while (lo < hi) {
      const u32 mid = (lo + hi) / 2;
      if ((u32)gs[mid] > g) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const u32 q = lo - 1u, e = q / w, s = q - e * w;
    const u32 j = g - (u32)gs[q] + (u32)rs[s * el + e];
    g2r[g] = (i64)j;
    perm[j] = (i64)g;
  }
}
