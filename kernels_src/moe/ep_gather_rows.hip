// kernel   ep_gather_rows                                                                     (extern "C")
// computes for every row i < n and both segments g in {0, 1}: dst_g[i*ldd_g + c] = src_g[(idx[i]/div)*lds_g + c],
//          c < w_g, in units of UNIT bytes: mxrt.ep.dispatch's row moves. Send: the rows of the tokens of the
//          pairs in send order (div = topk), codes and scales packed into one row (two segments of one dst).
//          Receive: received rows to the grouped order (div = 1), one packed row split into codes and scales.
//          One warp per row (grid-stride over rows), EP_GATHER_UNROLL units per lane in flight
// args     u8* dst0 | u8* dst1 | const u8* src0 | const u8* src1 | const i64* idx [n] | i64 n, i64 div, i64 w0,
//          i64 w1, i64 ldd0, i64 ldd1, i64 lds0, i64 lds1 (widths and row strides in UNIT-byte units)
// grid     (min(ceil(n / (THREADS/32)), max_ctas),1,1)   block (THREADS,1,1)   smem 0
// defines  THREADS (a multiple of 32), UNIT (1, 2, 4, 8 or 16 bytes)
//                                               set by mxrt/ops/ep_route.py (variants: mxrt/ops/ep_kernels.py)
// requires every pointer, width and stride a multiple of UNIT bytes; 0 <= idx[i]/div < rows of src; w1 = 0 when
//          there is one segment (dst1, src1 then unread); segments do not overlap      checked by mxrt/ops/ep_route.py
#include "../common/mx_warp.h"

#if !defined(THREADS) || !defined(UNIT)
#error "THREADS and UNIT must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");
MXRT_STATIC_ASSERT(UNIT == 1 || UNIT == 2 || UNIT == 4 || UNIT == 8 || UNIT == 16, "UNIT: 1, 2, 4, 8 or 16 bytes");

#if UNIT == 16
typedef mxrt_u32x4 EpUnit;
#elif UNIT == 8
typedef mxrt_u32x2 EpUnit;
#elif UNIT == 4
typedef u32 EpUnit;
#elif UNIT == 2
typedef u16 EpUnit;
#else
typedef u8 EpUnit;
#endif

#define EP_GATHER_UNROLL 4  // units per lane loaded before any is stored

// One row segment: w units from s to d, lane l moving units l, l + 32, ... (coalesced across the warp): whole
// groups of EP_GATHER_UNROLL units per lane first (all loads, then all stores), then the tail one unit at a time.
MXRT_DEVICE void ep_copy_row(EpUnit* __restrict__ d, const EpUnit* __restrict__ s, u64 w, u32 lane) {
  u64 c = lane;
  for (; c + 32u * (EP_GATHER_UNROLL - 1) < w; c += 32u * EP_GATHER_UNROLL) {
    EpUnit v[EP_GATHER_UNROLL];
#pragma unroll
    for (u32 u = 0; u < EP_GATHER_UNROLL; ++u) v[u] = s[c + 32u * u];
#pragma unroll
    for (u32 u = 0; u < EP_GATHER_UNROLL; ++u) d[c + 32u * u] = v[u];
  }
  for (; c < w; c += 32u) d[c] = s[c];
}

extern "C" __global__ void __launch_bounds__(THREADS)
    ep_gather_rows(u8* __restrict__ dst0, u8* __restrict__ dst1, const u8* __restrict__ src0,
                   const u8* __restrict__ src1, const i64* __restrict__ idx, i64 n, i64 div, i64 w0, i64 w1,
                   i64 ldd0, i64 ldd1, i64 lds0, i64 lds1) {
  const u32 lane = MXRT_TID_X % 32u;
  const u64 warps = (u64)MXRT_NBID_X * (THREADS / 32u);
  EpUnit* d0 = (EpUnit*)dst0;
  EpUnit* d1 = (EpUnit*)dst1;
  const EpUnit* s0 = (const EpUnit*)src0;
  const EpUnit* s1 = (const EpUnit*)src1;
  for (u64 i = (u64)MXRT_BID_X * (THREADS / 32u) + MXRT_TID_X / 32u; i < (u64)n; i += warps) {
    const u64 r = (u64)idx[i] / (u64)div;
    ep_copy_row(d0 + i * (u64)ldd0, s0 + r * (u64)lds0, (u64)w0, lane);
    if (w1 > 0) ep_copy_row(d1 + i * (u64)ldd1, s1 + r * (u64)lds1, (u64)w1, lane);
  }
}
