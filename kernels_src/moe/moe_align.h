// moe_align.h: the pieces of vLLM moe_align_block_size (mxrt.layouts.moe_align_block_size) shared by the one-CTA
// kernel (moe_align_block_size.hip) and the three-kernel multi-CTA path (moe_align_block_size_{count,scan,scatter}).
//
// Order inside an expert's segment is ascending flat index i (a stable counting sort): the multi-CTA path gives
// CTA b the contiguous chunk [b*chunk, (b+1)*chunk) and starts it at cum[e] + (tokens of e in chunks < b); inside
// a chunk, tiles of THREADS indices are taken in order and a thread's rank in its tile is the number of lower
// threads holding the same expert. Counting uses shared-memory atomics (their order does not matter); the
// positions written never depend on atomic order.
#pragma once
#include "../common/prelude.h"

#if !defined(THREADS) || !defined(ID_BYTES)
#error "THREADS and ID_BYTES must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS >= 64 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                   "THREADS: a power of two in [64, 1024] (the block scan)");
MXRT_STATIC_ASSERT(ID_BYTES == 4 || ID_BYTES == 8, "ID_BYTES: 4 (int32/uint32 ids) or 8 (int64/uint64 ids)");

// Dynamic shared memory (launch shared_mem bytes), int32 words.
extern __shared__ i32 moe_smem[];

#if defined(MXRT_CUDA)
MXRT_DEVICE void moe_atomic_inc(i32* p) { atomicAdd(p, 1); }
#else
MXRT_DEVICE void moe_atomic_inc(i32* p) { __hip_atomic_fetch_add(p, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP); }
#endif

MXRT_DEVICE u32 moe_min(u32 a, u32 b) { return a < b ? a : b; }

// Expert of flat index i, or E when the id is out of range: ids are compared unsigned, so ids >= E and negative
// ids (which the host rejects for numpy inputs; a CuPy input is never read back) are skipped.
MXRT_DEVICE u32 moe_expert(const void* ids, u32 i, u32 E) {
#if ID_BYTES == 8
  const u64 v = ((const u64*)ids)[i];
#else
  const u32 v = ((const u32*)ids)[i];
#endif
  return v < (u64)E ? (u32)v : E;
}

// expert_map[e] (int32 or int64 values, as the host passes them), or e without a map (emap_bytes == 0).
MXRT_DEVICE i32 moe_map(const void* emap, i32 emap_bytes, u32 e) {
  if (emap_bytes == 4) return ((const i32*)emap)[e];
  if (emap_bytes == 8) return (i32)((const i64*)emap)[e];
  return (i32)e;
}

MXRT_DEVICE u32 moe_pad(u32 n, u32 bs) { return (n + bs - 1) / bs * bs; }  // n + bs - 1 <= capacity < 2^31

// Count the valid ids of [begin, end) into cnt[E] (shared, zeroed by the caller, synchronised after).
MXRT_DEVICE void moe_count_range(const void* ids, u32 begin, u32 end, u32 E, i32* cnt) {
  for (u32 i = begin + MXRT_TID_X; i < end; i += THREADS) {
    const u32 e = moe_expert(ids, i, E);
    if (e < E) moe_atomic_inc(&cnt[e]);
  }
}

// cum[e] = sum of padded counts of experts < e, for e in [0, E]; returns cum[E] to every thread, and ends with a
// barrier, so every thread may read all of cum afterwards. Thread t owns the contiguous experts [t*per, (t+1)*per);
// part is THREADS words of shared memory.
MXRT_DEVICE u32 moe_scan_padded(const i32* cnt, i32* cum, u32 E, u32 bs, i32* part) {
  const u32 t = MXRT_TID_X;
  const u32 per = (E + THREADS - 1) / THREADS;
  const u32 e0 = moe_min(t * per, E), e1 = moe_min(e0 + per, E);
  u32 local = 0;
  for (u32 e = e0; e < e1; ++e) local += moe_pad((u32)cnt[e], bs);
  part[t] = (i32)local;
  mxrt_sync();
  for (u32 off = 1; off < THREADS; off <<= 1) {  // Hillis-Steele inclusive scan of the THREADS partial sums
    const i32 v = t >= off ? part[t - off] : 0;
    mxrt_sync();
    part[t] += v;
    mxrt_sync();
  }
  u32 run = (u32)part[t] - local;
  for (u32 e = e0; e < e1; ++e) {
    cum[e] = (i32)run;
    run += moe_pad((u32)cnt[e], bs);
  }
  const u32 total = (u32)part[THREADS - 1];
  if (t == THREADS - 1) cum[E] = (i32)total;
  mxrt_sync();  // cum[] complete for every thread
  return total;
}

// Stable scatter of [begin, end): sorted[off[e] + rank] = i in ascending i; off (shared, E words) advances by the
// tile's count of each expert; key is THREADS words of shared memory. Every thread of the CTA calls it.
MXRT_DEVICE void moe_scatter_range(const void* ids, u32 begin, u32 end, u32 E, i32* off, u32* key, i32* sorted) {
  const u32 t = MXRT_TID_X;
  for (u32 base = begin; base < end; base += THREADS) {
    const u32 i = base + t;
    const u32 e = i < end ? moe_expert(ids, i, E) : E;
    key[t] = e;
    mxrt_sync();
    if (e < E) {
      u32 rank = 0;
      for (u32 j = 0; j < t; ++j) rank += key[j] == e ? 1u : 0u;
      sorted[(u32)off[e] + rank] = (i32)i;
    }
    mxrt_sync();  // every read of off[] for this tile is done
    if (e < E) moe_atomic_inc(&off[e]);
    mxrt_sync();  // off[] advanced, key[] free for the next tile
  }
}

// First index in [0, E] with cum[index] > x, for 0 <= x < cum[E] (so the result is in [1, E]).
MXRT_DEVICE u32 moe_upper_bound(const i32* cum, u32 E, u32 x) {
  u32 lo = 0, hi = E;
  while (lo < hi) {
    const u32 mid = (lo + hi) / 2;
    if ((u32)cum[mid] > x) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The positions the scatter does not write: padding of sorted (value numel) and every expert_ids entry.
// Thread gtid of gstride threads; positions p = cum[e] + r with r < cnt[e] are the scatter's, all others padding.
MXRT_DEVICE void moe_fill(i32* sorted, i32* expert_ids, const void* emap, i32 emap_bytes, const i32* cnt,
                          const i32* cum, u32 E, u32 bs, u32 cap, u32 numel, u32 gtid, u32 gstride) {
  const u32 total = (u32)cum[E];
  for (u32 p = gtid; p < cap; p += gstride) {
    bool pad = p >= total;
    if (!pad) {
      const u32 e = moe_upper_bound(cum, E, p) - 1;
      pad = p - (u32)cum[e] >= (u32)cnt[e];
    }
    if (pad) sorted[p] = (i32)numel;
  }
  const u32 nblocks = (cap + bs - 1) / bs;
  for (u32 b = gtid; b < nblocks; b += gstride) {
    const u32 p = b * bs;  // < cap
    const u32 e = p < total ? moe_upper_bound(cum, E, p) - 1 : 0;  // unused blocks: 0, then mapped like vLLM
    expert_ids[b] = moe_map(emap, emap_bytes, e);
  }
}
