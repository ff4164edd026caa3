// kernel   moe_align_block_size_scatter                                                       (extern "C")
// computes sorted[cum[e] + hist[b*E + e] + rank] = i for the ids of CTA b's chunk in ascending i, then (grid-
//          stride over all CTAs) the padding of sorted (numel) and every expert_ids entry (multi-CTA
//          moe_align_block_size, step 3 of 3)
// args     const void* ids [numel] (ID_BYTES each) | i32* sorted [cap] | i32* expert_ids [ceil(cap/bs)] |
//          const i32* ws (hist | cnt | cum of the scan kernel) | const void* emap [E] (emap_bytes 4 or 8; 0: no
//          map) | int numel, int E, int bs, int cap, int chunk, int num_ctas, int emap_bytes
// grid     (num_ctas,1,1)   block (THREADS,1,1)   smem E*4 bytes dynamic + THREADS*4 static
// defines  THREADS, ID_BYTES (4 or 8)           set by mxrt/ops/moe.py (variants: mxrt/ops/moe_kernels.py)
// requires the count and scan kernels ran on ws with the same num_ctas, chunk; cap <= 2^31-1
//                                                                                        checked by mxrt/ops/moe.py
#include "moe_align.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_block_size_scatter(const void* __restrict__ ids, i32* __restrict__ sorted, i32* __restrict__ expert_ids,
                                 const i32* __restrict__ ws, const void* __restrict__ emap, i32 numel, i32 E, i32 bs,
                                 i32 cap, i32 chunk, i32 num_ctas, i32 emap_bytes) {
  __shared__ u32 key[THREADS];
  i32* off = moe_smem;  // [E]
  const i32* hist = ws;
  const i32* cnt = ws + (u32)num_ctas * (u32)E;
  const i32* cum = cnt + E;
  const u32 t = MXRT_TID_X, b = MXRT_BID_X;
  for (u32 e = t; e < (u32)E; e += THREADS) off[e] = cum[e] + hist[b * (u32)E + e];
  mxrt_sync();
  const u32 begin = b * (u32)chunk;
  moe_scatter_range(ids, begin, moe_min(begin + (u32)chunk, (u32)numel), (u32)E, off, key, sorted);
  moe_fill(sorted, expert_ids, emap, emap_bytes, cnt, cum, (u32)E, (u32)bs, (u32)cap, (u32)numel, b * THREADS + t,
           (u32)num_ctas * THREADS);
}
