// kernel   gemm_mx_decode_sm90                                                        (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k], m <= 8*MT. Swap-AB:
//          16 weight rows x 8 tokens per mma.sync m16n8k32 per MX block (RT row tiles share a token fragment), from
//          zero, promoted as acc = fma(P * 2^(sb-127), 2^(sa-127), acc) when a stage's scales lie in [64, 190], else by
//          the exact two-step factors (mxrt_scale_steps; NaN for 0xFF). Each warp streams its 16*RT rows x K range
//          through a private ring of STAGES stages of 4 blocks: code tiles by TMA (mbarrier per slot, zero fill past
//          n, m), scale words by cp.async; e2m1 tokens -> e4m3, weights -> f16 (2 HMMAs). KW warps split a CTA's groups
//          of 4 blocks, summed in warp order; split z: groups [z*G/split_k, (z+1)*G/split_k), G = k/128. ATOMIC=0
//          stores slice z (fp32 [split_k,m,n] if split_k > 1, else [m,n] OUT_DTYPE); ATOMIC=1 adds (fp32/bf16x2/f16x2)
// args     const __grid_constant__ mxrt_tmap tmx, tmw (A [m,row B], B [n,row B] u8; boxes 8*MT / 16*RT rows x 128 B
//          SWIZZLE_128B fp8 | 64 B SWIZZLE_64B e2m1; WLB 1: 3-D (256, kk/16, np/16) over aiter16x16 [np,kk], box (256,
//          8|4, RT), no swizzle) | const u8* sa, sb (E8M0 [rows,k/32], or SLA / SLB) | void* out | u32 m, n, k, split_k
// grid     (ceil(n/(16*RT)),1,split_k)   block (32*KW,1,1)   smem gemm_decode_kernels.smem_bytes (dynamic)
// defines  A_FMT, B_FMT, OUT_DTYPE, ATOMIC, MT (1/2/4/8), KW, STAGES, RT (1/2/4; RT*MT <= 16), SLA, SLB (0..5: scale
//          layouts MXRT_SCALE_LAYOUT_*, 5 = turbo16x4 u32), WLB (1: aiter16x16 weights; absent 0) ops/gemm_decode.py
// requires sm_90a; k % 128 == 0; codes 16-B / scales 4-B aligned; m <= 8*MT; sizes < 2^31; a layout's storage
//          < 2^31 elements; split_k <= 65535; ATOMIC with 16-bit out: out 4-byte aligned, m*n even
//                                                                         checked by mxrt/ops/gemm_decode.py
#if !defined(SLA) || !defined(SLB)
#error "SLA and SLB must be defined by the launcher (gemm_decode_sm90.h would default them to row-major)"
#endif
#include "gemm_decode_sm90.h"

extern "C" __global__ void __launch_bounds__(DEC_THREADS, 1)
    gemm_mx_decode_sm90(const __grid_constant__ mxrt_tmap tmx, const __grid_constant__ mxrt_tmap tmw,
                        const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out, u32 m, u32 n,
                        u32 k, u32 split_k) {
  DecArgs P{};
  P.tmx = &tmx;
  P.tmw = &tmw;
  P.sa = sa;
  P.sb = sb;
  P.out = out;
  P.m = m;
  P.n = n;
  P.k = k;
  P.split_k = split_k;
  dec_body<false>(P);
}

