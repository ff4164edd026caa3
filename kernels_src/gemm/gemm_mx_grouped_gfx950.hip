// kernel   gemm_mx_grouped_gfx950                                                  (extern "C")
// computes grouped MX GEMMs on gfx950 with v_mfma_scale_f32_16x16x128_f8f6f4 (the dense gemm_mx_gfx950.hip's main loop):
//          MODE 0 out[rows of group g] = a_g @ b_g.T (forward / dgrad by group_lens), MODE 3 out[g] (+)= a_g @ b_g.T
//          over group g's column range (variable-K wgrad); groups read on the device only (gemm_grouped_amd.h)
// args     const u8* a | const u8* sa [m, ceil(k/32)] | const u8* b | const u8* sb [G*n or n, ceil(kb/32)] |
//          void* out | const void* groups (int32, or int64 when lens_i64) | u32 m, n, k, kb, num_groups, extra
//          (mode 3: align) | u32 flags (MXRT_GEMM_FLAG_VEC_A/_B) | u32 lens_i64   (gemm_mx_grouped_generic's)
// grid     mode 0: (ceil(n/128), ceil(m/128)+G+1, 1); 3: (ceil(n/128), ceil(m/128), G)   block (256,1,1)
//          smem 0 (static LDS, compile check: 84,000 B mode 0 / 79,888 mode 3;
//          51,232 / 47,120 for e2m1 x e2m1)
// defines  A_FMT, B_FMT (MXRT_FMT_*), MODE (0, 3), OUT_DTYPE (MXRT_OUT_*), ACCUM (mode 3), THREADS = 256
//                                                                  set by mxrt/ops/grouped_gemm_amd.py
// requires gfx950; G <= MXRT_MAX_GROUPS; grid y, z <= 65535; a's and one group's b's codes < 2^31 bytes (32-bit
//          buffer offsets); flags VEC_* only for 16-byte aligned code rows       checked by mxrt/ops/grouped_gemm_amd.py
#include "gemm_gfx950_tile.h"

#ifndef THREADS
#error "THREADS must be defined by the launcher"
#endif
#if THREADS != 256
#error "gemm_mx_grouped_gfx950: THREADS must be 256 (4 waves of 64)"
#endif
// row-major scales, every stage masked (a group's rows end anywhere)
#define MXRT_GROUPED_MAINLOOP(oa, ob, t, lds, acc) \
  g950_mainloop<MXRT_LOAD_MASKED, false>(oa, ob, t, MXRT_SCALE_LAYOUT_NONE, MXRT_SCALE_LAYOUT_NONE, lds, acc)
#include "gemm_grouped_amd.h"

MXRT_GEMM_OCCUPANCY_BEGIN
extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mx_grouped_gfx950(const u8* a, const u8* sa, const u8* b, const u8* sb, void* out, const void* groups, u32 m,
                            u32 n, u32 k, u32 kb, u32 num_groups, u32 extra, u32 flags, u32 lens_i64) {
  __shared__ mxrt_u32x4 lds_words[2 * G950_STAGE / 16];
  __shared__ i64 part[THREADS];
  __shared__ i32 starts[MXRT_MAX_GROUPS + 2];
  __shared__ i32 tiles[MXRT_MAX_GROUPS + 2];
  const MxrtGroupedLds sh = {part, starts, tiles};
  mxrt_grouped_amd(a, sa, b, sb, out, groups, m, n, k, kb, num_groups, extra, flags, lens_i64, sh, (u8*)lds_words);
}
MXRT_GEMM_OCCUPANCY_END
