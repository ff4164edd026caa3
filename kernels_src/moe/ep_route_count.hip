// kernel   ep_route_count                                                                     (extern "C")
// computes hist[b*(E+1) + e] = #{i in [b*chunk, min(numel, (b+1)*chunk)): bin(i) == e} for CTA b and every bin e
//          in [0, E] (bin E: ids outside [0, E)); step 1 of mxrt.ep.dispatch's send layout (ep_route.h)
// args     const void* ids [numel] (ID_BYTES each) | i32* hist [num_ctas*(E+1)] | int numel, int E, int chunk
// grid     (num_ctas,1,1)   block (THREADS,1,1)   smem EP_MAX_BINS*4 bytes static
// defines  THREADS, ID_BYTES (4 or 8)           set by mxrt/ops/ep_route.py (variants: mxrt/ops/ep_kernels.py)
// requires num_ctas*chunk >= numel, num_ctas >= 1; numel + chunk < 2^31; E + 1 <= EP_MAX_BINS
//                                                                                    checked by mxrt/ops/ep_route.py
#include "ep_route.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    ep_route_count(const void* __restrict__ ids, i32* __restrict__ hist, i32 numel, i32 E, i32 chunk) {
  __shared__ i32 cnt[EP_MAX_BINS];
  const u32 t = MXRT_TID_X, b = MXRT_BID_X, nb = (u32)E + 1u;
  for (u32 e = t; e < nb; e += THREADS) cnt[e] = 0;
  mxrt_sync();
  const u32 begin = ep_min(b * (u32)chunk, (u32)numel), end = ep_min(begin + (u32)chunk, (u32)numel);
  for (u32 i = begin + t; i < end; i += THREADS) ep_atomic_inc(&cnt[ep_bin(ids, i, (u32)E)]);
  mxrt_sync();
  for (u32 e = t; e < nb; e += THREADS) hist[b * nb + e] = cnt[e];
}
