// kernel   quantize_mx_grouped_offsets                                                (extern "C")
// computes on the device, from group_lens, the offsets of the grouped quantizers (MX_REFERENCE.md 4a):
//          S[g] = sum_{j<g} clamp(lens[j], 0, total_m); offs[g] = min(S[g], total_m)  (groups past total_m are
//          cut: rows are never read beyond x); l[g] = offs[g+1] - offs[g];
//          offs_pad_row = prefix of ceil(l/align)*align, offs_pad_col = prefix of ceil(l/col_align)*col_align
//          (exactly mxrt.pad_group_layout when lens >= 0 and sum(lens) == total_m)
// args     const void* lens [G] (int32, or int64 when lens_i64) | i64* offs [nout, G+1] (row 0 offs, row 1
//          offs_pad_row, row 2 offs_pad_col when nout == 3) | int num_groups, int total_m, int align,
//          int col_align, int lens_i64, int nout
// grid     (1,1,1)   block (THREADS,1,1)   smem 2*THREADS*8 bytes (static)
// defines  THREADS (= 256)                                                     set by mxrt/ops/grouped.py
// requires G <= MXRT_MAX_GROUPS (1024 = 4 * THREADS); align, col_align >= 1; padded totals < 2^31
//                                                                               checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS)
#error "THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS * 4 == MXG_MAX_GROUPS, "quantize_mx_grouped_offsets: 4 groups per thread");

// Inclusive scan of a[0..THREADS) in shared memory (Hillis-Steele); every thread calls it.
MXRT_DEVICE void scan2(i64* a, i64* b) {
  const u32 tid = MXRT_TID_X;
  mxrt_sync();
#pragma unroll
  for (u32 off = 1; off < THREADS; off <<= 1) {
    const i64 va = tid >= off ? a[tid - off] : 0;
    const i64 vb = tid >= off ? b[tid - off] : 0;
    mxrt_sync();
    a[tid] += va;
    b[tid] += vb;
    mxrt_sync();
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_grouped_offsets(const void* __restrict__ lens, i64* __restrict__ offs, i32 num_groups,
                                i32 total_m, i32 align, i32 col_align, i32 lens_i64, i32 nout) {
  __shared__ i64 part_a[THREADS];
  __shared__ i64 part_b[THREADS];
  const u32 tid = MXRT_TID_X;
  const u32 G = (u32)num_groups;
  const i64 T = total_m;
  const u32 stride = G + 1;

  // pass 1: clamped lens -> tight offsets, cut at total_m
  i64 l[4];
  i64 run = 0;
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    const u32 g = tid * 4 + j;
    i64 v = 0;
    if (g < G) v = lens_i64 ? ((const i64*)lens)[g] : (i64)((const i32*)lens)[g];
    v = v < 0 ? 0 : (v > T ? T : v);
    l[j] = v;
    run += v;
  }
  part_a[tid] = run;
  part_b[tid] = 0;
  scan2(part_a, part_b);
  i64 s = part_a[tid] - run;  // exclusive prefix of this thread's first group
  i64 lr[4], lc[4];
  run = 0;
  i64 run_c = 0;
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    const u32 g = tid * 4 + j;
    const i64 lo = s < T ? s : T;
    s += l[j];
    const i64 hi = s < T ? s : T;
    const i64 le = hi - lo;  // the group's rows after the cut
    if (g < G) offs[g + 1] = hi;
    lr[j] = (le + align - 1) / align * align;
    lc[j] = (le + col_align - 1) / col_align * col_align;
    run += lr[j];
    run_c += lc[j];
  }
  // pass 2: padded lens -> padded offsets
  mxrt_sync();
  part_a[tid] = run;
  part_b[tid] = run_c;
  scan2(part_a, part_b);
  i64 sr = part_a[tid] - run;
  i64 sc = part_b[tid] - run_c;
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    const u32 g = tid * 4 + j;
    sr += lr[j];
    sc += lc[j];
    if (g < G) {
      offs[stride + g + 1] = sr;
      if (nout == 3) offs[2 * stride + g + 1] = sc;
    }
  }
  if (tid == 0) {
    offs[0] = 0;
    offs[stride] = 0;
    if (nout == 3) offs[2 * stride] = 0;
  }
}
