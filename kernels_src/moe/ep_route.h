// ep_route.h: the pieces of mxrt.ep.dispatch's device layout shared by ep_route_count, ep_route_scatter and
// ep_recv_map (numpy twins: mxrt.layouts.ep.route and mxrt.layouts.ep.grouped_to_recv / recv_to_grouped).
//
// Send side: a stable counting sort of the flat pair indices i = t * topk + j by bin, where the bin of a pair is
// its expert id e in [0, E), or E for an id outside [0, E) (the bad ids: the dispatch raises on them after its one
// host sync, so their place only has to keep `order` a permutation). Rank r owns experts [r * E_l, (r + 1) * E_l),
// so sorting by bin sorts by destination rank, then local expert, then i. CTA b of ep_route_count /
// ep_route_scatter owns the contiguous chunk [b * chunk, (b + 1) * chunk); inside a chunk, tiles of THREADS
// indices are taken in order and a thread's rank in its tile is the number of lower threads holding the same
// bin (moe_align.h's scheme). Counting uses shared-memory atomics; no position depends on their order.
#pragma once
#include "../common/mx_warp.h"

#if !defined(THREADS) || !defined(ID_BYTES)
#error "THREADS and ID_BYTES must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS >= 64 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                   "THREADS: a power of two in [64, 1024] (the block scan)");
MXRT_STATIC_ASSERT(ID_BYTES == 4 || ID_BYTES == 8, "ID_BYTES: 4 (int32 ids) or 8 (int64 ids)");

// Most bins (E + 1: experts and the bad bin) and most (rank, local expert) segments the kernels hold in shared
// memory (mxrt/ops/ep_kernels.py mirrors both).
#define EP_MAX_BINS 4097
#define EP_MAX_SEGS 4096

#if defined(MXRT_CUDA)
MXRT_DEVICE void ep_atomic_inc(i32* p) { atomicAdd(p, 1); }
#elif defined(MXRT_HIP)
MXRT_DEVICE void ep_atomic_inc(i32* p) { __hip_atomic_fetch_add(p, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP); }
#else  // the host SIMT emulator: fibers switch only at barriers, so a plain increment is atomic among them
inline void ep_atomic_inc(i32* p) { *p += 1; }
#endif

MXRT_DEVICE u32 ep_min(u32 a, u32 b) { return a < b ? a : b; }

// Bin of flat index i: the id when it lies in [0, E), else E (negative and too large ids alike, compared signed).
MXRT_DEVICE u32 ep_bin(const void* ids, u32 i, u32 E) {
#if ID_BYTES == 8
  const i64 v = ((const i64*)ids)[i];
#else
  const i64 v = (i64)((const i32*)ids)[i];
#endif
  return (v >= 0 && v < (i64)E) ? (u32)v : E;
}

// Exclusive scan of n values in place over shared memory v[0, n) (n < 2^31 in total); returns the total to every
// thread and ends with a barrier. Thread t owns the contiguous values [t * per, (t + 1) * per); part is THREADS
// words of shared memory.
MXRT_DEVICE u32 ep_scan(i32* v, u32 n, i32* part) {
  const u32 t = MXRT_TID_X;
  const u32 per = (n + THREADS - 1) / THREADS;
  const u32 e0 = ep_min(t * per, n), e1 = ep_min(e0 + per, n);
  u32 local = 0;
  for (u32 e = e0; e < e1; ++e) local += (u32)v[e];
  part[t] = (i32)local;
  mxrt_sync();
  for (u32 off = 1; off < THREADS; off <<= 1) {  // Hillis-Steele inclusive scan of the THREADS partial sums
    const i32 x = t >= off ? part[t - off] : 0;
    mxrt_sync();
    part[t] += x;
    mxrt_sync();
  }
  u32 run = (u32)part[t] - local;
  for (u32 e = e0; e < e1; ++e) {
    const u32 c = (u32)v[e];
    v[e] = (i32)run;
    run += c;
  }
  const u32 total = (u32)part[THREADS - 1];
  mxrt_sync();  // every scanned value and part[] read before anyone reuses them
  return total;
}
