// kernel   moe_align_block_size                                                               (extern "C")
// computes vLLM moe_align_block_size in one CTA (the small-numel path of mxrt/ops/moe.py): with flat = topk_ids
//          and cnt[e] = #{i < numel: flat[i] == e}, cum = exclusive scan of ceil(cnt/bs)*bs:
//          sorted[cum[e] + rank] = i (ascending i), other positions numel; expert_ids[b] = map(e) for the blocks of
//          e, map(0) after cum[E]; post[0] = cum[E]. ids >= E (unsigned) are skipped.
// args     const void* ids [numel] (ID_BYTES each) | i32* sorted [cap] | i32* expert_ids [ceil(cap/bs)] |
//          i32* post [1] | const void* emap [E] (emap_bytes 4 or 8; 0: no map) | int numel, int E, int bs, int cap,
//          int emap_bytes
// grid     (1,1,1)   block (THREADS,1,1)   smem (3E+1)*4 bytes dynamic + 2*THREADS*4 static
// defines  THREADS, ID_BYTES (4 or 8)           set by mxrt/ops/moe.py (variants: mxrt/ops/moe_kernels.py)
// requires cap = numel + E*(bs-1) (or rounded up to bs) <= 2^31-1; (3E+1)*4 bytes of shared memory fit
//                                                                                        checked by mxrt/ops/moe.py
#include "moe_align.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_block_size(const void* __restrict__ ids, i32* __restrict__ sorted, i32* __restrict__ expert_ids,
                         i32* __restrict__ post, const void* __restrict__ emap, i32 numel, i32 E, i32 bs, i32 cap,
                         i32 emap_bytes) {
  __shared__ i32 part[THREADS];
  __shared__ u32 key[THREADS];
  i32* cnt = moe_smem;         // [E]
  i32* cum = moe_smem + E;     // [E + 1]
  i32* off = cum + E + 1;      // [E]
  const u32 t = MXRT_TID_X;
  for (u32 e = t; e < (u32)E; e += THREADS) cnt[e] = 0;
  mxrt_sync();
  moe_count_range(ids, 0, (u32)numel, (u32)E, cnt);
  mxrt_sync();
  const u32 total = moe_scan_padded(cnt, cum, (u32)E, (u32)bs, part);
  for (u32 e = t; e < (u32)E; e += THREADS) off[e] = cum[e];
  if (t == 0) post[0] = (i32)total;
  mxrt_sync();
  moe_scatter_range(ids, 0, (u32)numel, (u32)E, off, key, sorted);
  moe_fill(sorted, expert_ids, emap, emap_bytes, cnt, cum, (u32)E, (u32)bs, (u32)cap, (u32)numel, t, THREADS);
}
