// kernel   grouped_offsets                                                            (extern "C")
// computes offs[g] = starts[g + 1] for g < G, starts of gemm_grouped_tiles.h's gg_offsets: lengths clamped to
//          [0, cap], each padded to a multiple of pad, the prefix cut at total (the group ends torch._grouped_mm reads
//          in the torch route: MODE 0's rows with pad 1, MODE 3's columns with pad = align); with gate non-null also
//          gate[0] |= 2 where lens is not a split of total (an entry outside [0, cap], or a sum other than total)
// args     const void* lens [G] (int32, or int64 when lens_i64) | i32* offs [G] | u32* gate (null: no check) | u32 G
//          | u32 lens_i64 | i64 cap | i64 pad | i64 total
// grid     (1,1,1)   block (THREADS,1,1)   smem static: THREADS * 8 + (MXRT_MAX_GROUPS + 2) * 4 bytes + 4
// defines  THREADS (1024)                                          set by mxrt/ops/grouped_gemm_torch.py
// requires 1 <= G <= MXRT_MAX_GROUPS, 1 <= pad, total < 2^31        checked by mxrt/ops/grouped_gemm_torch.py
//
// One CTA, a few microseconds: it replaces a dozen framework ops (clamp, cumsum, compares) that cost ~10-15 us of
// host time each in an eager call. Every thread takes part in the scans (barriers inside gg_offsets).
#include "gemm_grouped_tiles.h"

extern "C" __global__ void __launch_bounds__(THREADS)
    grouped_offsets(const void* __restrict__ lens, i32* __restrict__ offs, u32* __restrict__ gate, u32 G,
                    u32 lens_i64, i64 cap, i64 pad, i64 total) {
  __shared__ i64 part[THREADS];
  __shared__ i32 starts[MXRT_MAX_GROUPS + 2];
  gg_offsets(lens, lens_i64, G, cap, pad, total, starts, part);
  const u32 tid = MXRT_TID_X;
  for (u32 g = tid; g < G; g += THREADS) offs[g] = starts[g + 1];
  if (gate == nullptr) return;  // uniform: every thread leaves together
  // the raw lengths: any outside [0, cap], and their sum (G <= MXRT_MAX_GROUPS entries of at most cap < 2^31 each)
  i64 run = 0, outside = 0;
  for (u32 g = tid; g < G; g += THREADS) {
    const i64 v = gg_len(lens, g, lens_i64);
    outside += (v < 0 || v > cap) ? 1 : 0;
    run += (v < 0 ? 0 : (v > cap ? cap : v));
  }
  const i64 sum_before = gg_exclusive_scan(run, part);
  const i64 bad_before = gg_exclusive_scan(outside, part);
  if (tid == THREADS - 1 && (bad_before + outside != 0 || sum_before + run != total)) atomicOr(gate, 2u);
}
