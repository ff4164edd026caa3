// kernel   gemm_mx_decode_sm90_moe                                                    (extern "C")
// computes out[id, n] = (x[id / a_div] @ w[e].T)[n] (* topk_w[id]) for the slots id of block b = blockIdx.y of the
//          vLLM moe_align_block_size layout, e = expert_ids[b], with the dense decode kernel's body (gemm_decode_sm90.h:
//          swap-AB mma.sync per MX block, exact promotion, per-warp ring: expert e's 16*RT weight rows by TMA,
//          the block's token rows gathered by cp.async). Blocks at or past num_tokens_post_padded[0], experts outside
//          [0, E) and slot ids outside [0, numel) are skipped: the op zeroes out first. Token chunk blockIdx.z of
//          8*MT slots; KW warps split K, summed in warp order (deterministic, no atomics).
// args     const __grid_constant__ mxrt_tmap tmw (weights [E*N, row bytes], 16*RT rows x 128 B SWIZZLE_128B / 64 B
//          SWIZZLE_64B) | const u8* x [m_act, row bytes] | sa [m_act, k/32] | sb [E*N, k/32] | void* out [numel, n] |
//          const i32* sorted_ids [cap], expert_ids [nblocks], num_tokens_post_padded [1] | const float* topk_w
//          [numel] or null | u32 n, k, e_num, numel, a_div, block_size | u64 cap
// grid     (ceil(n/(16*RT)), min(nblocks, numel), ceil(block_size/(8*MT)))   block (32*KW,1,1)   smem (moe_gemm.py)
// defines  A_FMT, B_FMT (MXRT_FMT_*), OUT_DTYPE, ATOMIC (0), MT, KW, STAGES, RT             set by mxrt/ops/moe_gemm.py
// requires sm_90a; k % 128 == 0; codes 16-B / scales 4-B aligned; E*N < 2^31 (TMA row coordinates); grid y, z <=
//          65535                                                                  checked by mxrt/ops/moe_gemm.py
#include "gemm_decode_sm90.h"
// RT > 1: a CTA owns 16*RT rows of one expert; a last tile past the expert's n rows loads the next expert's rows
// (or TMA's zeros past E*N), which are computed and never stored.

extern "C" __global__ void __launch_bounds__(DEC_THREADS, 1)
    gemm_mx_decode_sm90_moe(const __grid_constant__ mxrt_tmap tmw, const u8* __restrict__ x,
                            const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out,
                            const i32* __restrict__ sorted_ids, const i32* __restrict__ expert_ids,
                            const i32* __restrict__ num_tokens_post_padded, const float* __restrict__ topk_w, u32 n,
                            u32 k, u32 e_num, u32 numel, u32 a_div, u32 block_size, u64 cap) {
  DecArgs P{};
  P.tmw = &tmw;
  P.x = x;
  P.sa = sa;
  P.sb = sb;
  P.out = out;
  P.m = 0;
  P.n = n;
  P.k = k;
  P.split_k = 1;
  P.sorted_ids = sorted_ids;
  P.expert_ids = expert_ids;
  P.num_tokens_post_padded = num_tokens_post_padded;
  P.topk_w = topk_w;
  P.e_num = e_num;
  P.numel = numel;
  P.a_div = a_div;
  P.block_size = block_size;
  P.cap = cap;
  dec_body<true>(P);
}
