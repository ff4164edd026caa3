// kernel   gemm_mx_decode_gfx950                                              (extern "C")
// computes out[t,j] = sum_k dequant(a)[t,k] * dequant(b)[j,k] for a few tokens t < m <= 16*MT (decode): weights b
//          [n,k] streamed once from global memory into the operands of v_mfma_scale_f32_16x16x128_f8f6f4 (the
//          instruction applies both per-32 scales), 64 weight rows per CTA, 4 waves splitting the CTA's K steps
//          of 128, summed in wave order (body and layout: gemm_decode_amd.h)
// args     const u8* a [m,k|ceil(k/2)] (tokens) | const u8* b (weights: [n,k|ceil(k/2)] row-major, or WLB's layout)
//          | const u8* sa | const u8* sb (scale layouts a_layout / b_layout, MXRT_SCALE_LAYOUT_*) | void* out |
//          int m, n, k, split_k, a_layout, b_layout, out_dtype (MXRT_OUT_*), mode (MXRT_GEMM_MODE_STORE: element
//          (z*m+t)*n+j of out in out_dtype; _ATOMIC: fp32 add into out [m,n]); codes from mx_codes.h
// grid     (ceil(n/64), 1, split_k)   block (256,1,1)   smem 0 (static LDS: 12,288 * MT bytes)
// defines  A_FMT, B_FMT (MXRT_FMT_*: e4m3, e5m2, e2m1), MT (1, 2, 4), THREADS = 256; WLB (optional; absent or 0:
//          row-major b; 1: b = mxrt.preshuffle_weight's aiter16x16 [ceil(n/16)*16, kk], kk = ceil(row bytes/32)*32)
//          set by mxrt/ops/gemm_decode_amd.py (variants: mxrt/ops/gemm_decode_amd_kernels.py)
// requires gfx950; 1 <= m <= 16*MT; n, k >= 1; split_k <= ceil(k/32); code buffers < 2^31 bytes (WLB = 1: the
//          padded ceil(n/16)*16*kk bytes); 16-byte aligned code bases and rows (k % 16 == 0, k % 32 for e2m1);
//          MODE_ATOMIC with out_dtype f32   checked by the Python side
#include "gemm_decode_gfx950.h"

#ifndef THREADS
#error "THREADS must be defined by the launcher"
#endif
#if THREADS != 256
#error "gemm_mx_decode_gfx950: THREADS must be 256 (4 waves of 64)"
#endif
#ifndef WLB
#define WLB 0
#endif
#if WLB != 0 && WLB != 1
#error "gemm_mx_decode_gfx950: WLB (weight code layout) must be 0 (row-major) or 1 (aiter16x16)"
#endif

MXRT_GEMM_OCCUPANCY_BEGIN
extern "C" __global__ void __launch_bounds__(THREADS) gemm_mx_decode_gfx950(const u8* a, const u8* b, const u8* sa,
                                                                            const u8* sb, void* out, i32 m, i32 n,
                                                                            i32 k, i32 split_k, i32 a_layout,
                                                                            i32 b_layout, i32 out_dtype, i32 mode) {
  __shared__ float red[DEC_RED_FLOATS];
  DEC_OPERANDS(A_FMT == MXRT_FMT_E2M1, B_FMT == MXRT_FMT_E2M1);
  mxrt_v4f acc[MT][4];
  d950_mainloop<D950_KIND(A_FMT), D950_KIND(B_FMT), WLB>(ox, ow, t, DecRowsDense{}, acc);
  dec_epilogue(g, t, acc, red);
}
MXRT_GEMM_OCCUPANCY_END
