// kernel   moe_align_block_size_scan                                                          (extern "C")
// computes per expert e: hist[b*E + e] <- sum of hist[b'*E + e] over b' < b (exclusive over CTAs), cnt[e] = the
//          total, cum[e] = exclusive scan of ceil(cnt/bs)*bs over experts, cum[E] = post[0] = the padded total
//          (multi-CTA moe_align_block_size, step 2 of 3)
// args     i32* ws (hist [num_ctas*E] | cnt [E] | cum [E+1]) | i32* post [1] | int E, int num_ctas, int bs
// grid     (1,1,1)   block (THREADS,1,1)   smem THREADS*4 bytes static
// defines  THREADS, ID_BYTES (unused here; one define set for the family)
//                                                 set by mxrt/ops/moe.py (variants: mxrt/ops/moe_kernels.py)
// requires the capacity numel + E*(bs-1) <= 2^31-1                                      checked by mxrt/ops/moe.py
#include "moe_align.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_block_size_scan(i32* __restrict__ ws, i32* __restrict__ post, i32 E, i32 num_ctas, i32 bs) {
  __shared__ i32 part[THREADS];
  i32* hist = ws;
  i32* cnt = ws + (u32)num_ctas * (u32)E;
  i32* cum = cnt + E;
  const u32 t = MXRT_TID_X;
  for (u32 e = t; e < (u32)E; e += THREADS) {  // coalesced across e for every CTA row
    i32 acc = 0;
    for (u32 b = 0; b < (u32)num_ctas; ++b) {
      const i32 v = hist[b * (u32)E + e];
      hist[b * (u32)E + e] = acc;
      acc += v;
    }
    cnt[e] = acc;
  }
  mxrt_sync();  // cnt[] (global) written by other threads of this CTA
  const u32 total = moe_scan_padded(cnt, cum, (u32)E, (u32)bs, part);
  if (t == 0) post[0] = (i32)total;
}
