// kernel   moe_align_block_size_count                                                         (extern "C")
// computes hist[b*E + e] = #{i in [b*chunk, min(numel, (b+1)*chunk)): ids[i] == e} for CTA b (multi-CTA
//          moe_align_block_size, step 1 of 3); ids >= E (unsigned) are not counted
// args     const void* ids [numel] (ID_BYTES each) | i32* hist [num_ctas*E] | int numel, int E, int chunk
// grid     (num_ctas,1,1)   block (THREADS,1,1)   smem E*4 bytes dynamic
// defines  THREADS, ID_BYTES (4 or 8)           set by mxrt/ops/moe.py (variants: mxrt/ops/moe_kernels.py)
// requires num_ctas*chunk >= numel; numel + chunk < 2^32; E*4 bytes of shared memory fit
//                                                                                        checked by mxrt/ops/moe.py
#include "moe_align.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_block_size_count(const void* __restrict__ ids, i32* __restrict__ hist, i32 numel, i32 E, i32 chunk) {
  i32* cnt = moe_smem;  // [E]
  const u32 t = MXRT_TID_X, b = MXRT_BID_X;
  for (u32 e = t; e < (u32)E; e += THREADS) cnt[e] = 0;
  mxrt_sync();
  const u32 begin = b * (u32)chunk;
  moe_count_range(ids, begin, moe_min(begin + (u32)chunk, (u32)numel), (u32)E, cnt);
  mxrt_sync();
  for (u32 e = t; e < (u32)E; e += THREADS) hist[b * (u32)E + e] = cnt[e];
}
