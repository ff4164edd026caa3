// kernel   gemm_mx_decode_sm90_moe                                                    (extern "C")
// computes out[id, n] = (x[id / a_div] @ w[e].T)[n] (* topk_w[id]) for the slots id of block b = blockIdx.y of the
//          vLLM moe_align_block_size layout, e = expert_ids[b], with the dense decode kernel's body (gemm_decode_sm90.h:
//          swap-AB mma.sync per MX block, exact promotion, per-warp ring: expert e's 16*RT weight rows by TMA,
//          the block's token rows gathered by cp.async). Blocks at or past num_tokens_post_padded[0], experts outside
//          [0, E) and slot ids outside [0, numel) are skipped: the op zeroes out first. Token chunk blockIdx.z of
//          8*MT slots (CL 1: the CTA runs its block's chunks in turn); KW warps split K, summed in warp order.
// args     const __grid_constant__ mxrt_tmap tmw (weights [E*N, row bytes], 16*RT rows x 128 B SWIZZLE_128B / 64 B
//          SWIZZLE_64B) | const u8* x [m_act, row bytes] | sa [m_act, k/32] | sb [E*N, k/32] | void* out [numel, n] |
//          const i32* sorted_ids [cap], expert_ids [nblocks], num_tokens_post_padded [1] | const float* topk_w
//          [numel] or null | u32 n, k, e_num, numel, a_div, block_size | u64 cap
// grid     (ceil(n/(16*RT)), min(nblocks, numel), CL ? 1 : ceil(block_size/(8*MT)))   block (32*KW,1,1)   smem
// defines  A_FMT, B_FMT (MXRT_FMT_*), OUT_DTYPE, ATOMIC (0), MT, KW, STAGES, RT, CL (absent: 0)   mxrt/ops/moe_gemm.py
// requires sm_90a; k % 128 == 0; codes 16-B / scales 4-B aligned; E*N < 2^31 (TMA row coordinates); grid y, z <=
//          65535                                                                  checked by mxrt/ops/moe_gemm.py
#ifndef CL
#define CL 0
#endif
#define DEC_MOE 1  // the body's MoE-only code (token-scaled stages, DEC_TSC)
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
#if CL
  // One CTA per block (grid z 1): the block's chunks in turn, up to its last slot (blocks of more slots than 8 * MT:
  // a grid chunk per CTA left most CTAs with no slot, RESULTS.md session 24).
  __shared__ u32 last_s;
  const u32 tid = MXRT_TID_X;
  if (tid == 0) last_s = 0u;
  __syncthreads();
  for (u32 r = tid; r < block_size; r += DEC_THREADS) {
    const u64 i = (u64)MXRT_BID_Y * block_size + r;
    const i32 id = i < cap ? sorted_ids[i] : -1;
    if (id >= 0 && (u32)id < numel) atomicMax(&last_s, r + 1u);
  }
  __syncthreads();
  const u32 nch = (last_s + 8u * MT - 1u) / (8u * MT);
  for (u32 c = 0; c < nch; ++c) {
    if (c > 0) __syncthreads();  // the previous chunk's stores read ids_s and the code rings
    P.chunk = c;
    if (!dec_body<true>(P)) break;
  }
#else
  P.chunk = MXRT_BID_Z;
  dec_body<true>(P);
#endif
}
