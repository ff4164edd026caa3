// kernel   gemm_mx_decode_gfx950_moe                                              (extern "C")
// computes out[id, j] = (x[id / a_div] @ w[e].T)[j] (* topk_w[id]) for the slot ids of block b = grid y of the
//          vLLM moe_align_block_size layout, e = expert_ids[b], with the dense decode kernel's mainloop
//          (gemm_decode_gfx950.h: v_mfma_scale_f32_16x16x128_f8f6f4 with both per-32 scales):
//          64 rows of expert e per CTA, the chunk's 16*MT token rows gathered, 4 waves splitting K, summed in wave
//          order (deterministic; MoE part of gemm_decode_amd.h)
// args     const u8* x [m_act, k|k/2] | const u8* w [E*n, k|k/2] (row-major codes) | const u8* sx [m_act, k/32] |
//          const u8* sw [E*n, k/32] (row-major E8M0) | void* out [numel, n] (out_dtype) | const i32* sorted_ids [cap],
//          expert_ids [nblocks], num_tokens_post_padded [1] | const float* topk_w [numel] or null | int m_act, n, k,
//          e_num, numel, a_div, block_size, cap, out_dtype (MXRT_OUT_*); blocks at or past
//          num_tokens_post_padded[0], experts outside [0, E) and ids outside [0, numel) are skipped (the op zeroes
//          out first)
// grid     (ceil(n/64), min(nblocks, numel), ceil(block_size/(16*MT)))   block (256,1,1)   smem 0 (static LDS:
//          12,288 * MT + 256 bytes)
// defines  A_FMT, B_FMT (MXRT_FMT_*: e4m3, e5m2, e2m1), MT (1, 2, 4), THREADS = 256   set by mxrt/ops/moe_gemm_amd.py
// requires gfx950; k % 16 == 0 (k % 32 with an e2m1 operand: 16-byte aligned code rows), 16-byte aligned code bases;
//          m_act and one expert's n rows of codes < 2^31 bytes each (32-bit buffer offsets; the weight tensor may be
//          larger); numel, cap < 2^31; grid y, z <= 65535   checked by mxrt/ops/moe_gemm_amd.py
#include "gemm_decode_gfx950.h"

#ifndef THREADS
#error "THREADS must be defined by the launcher"
#endif
#if THREADS != 256
#error "gemm_mx_decode_gfx950_moe: THREADS must be 256 (4 waves of 64)"
#endif
#if defined(WLB) && WLB != 0
#error "gemm_mx_decode_gfx950_moe: the expert weights are row-major (WLB is the dense kernel's define)"
#endif

MXRT_GEMM_OCCUPANCY_BEGIN
extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mx_decode_gfx950_moe(const u8* x, const u8* w, const u8* sx, const u8* sw, void* out, const i32* sorted_ids,
                              const i32* expert_ids, const i32* num_tokens_post_padded, const float* topk_w, i32 m_act,
                              i32 n, i32 k, i32 e_num, i32 numel, i32 a_div, i32 block_size, i32 cap, i32 out_dtype) {
  __shared__ float red[DEC_RED_FLOATS];
  __shared__ i32 ids_s[64];
  DEC_MOE_OPERANDS(A_FMT == MXRT_FMT_E2M1, B_FMT == MXRT_FMT_E2M1);
  mxrt_v4f acc[MT][4];
  d950_mainloop<D950_KIND(A_FMT), D950_KIND(B_FMT), DEC_WL_ROW>(ox, ow, t, xr, acc);
  dec_moe_epilogue(g, t, acc, red, ids_s, topk_w);
}
MXRT_GEMM_OCCUPANCY_END
