// kernel   gemm_mx_gfx950                                                     (extern "C")
// computes out[i,j] = sum_k dequant(a)[i,k] * dequant(b)[j,k] (NT MX GEMM, one E8M0 scale per 32 along K) with
//          v_mfma_scale_f32_16x16x128_f8f6f4: the instruction applies both per-32 scales itself
// args     const u8* a [m,k|ceil(k/2)] | const u8* b [n,k|ceil(k/2)] | const u8* sa | const u8* sb (scale layouts:
//          a_layout / b_layout, mx_codes.h MXRT_SCALE_LAYOUT_*) | void* out [m,n] out_dtype | float* ws [split_k,m,n] |
//          u32* counters [tiles] | int m, n, k, split_k, a_layout, b_layout, out_dtype (MXRT_OUT_*), mode
//          (MXRT_GEMM_MODE_*), flags (MXRT_GEMM_FLAG_VEC_A / _VEC_B); every code from mx_codes.h
// grid     (ceil(n/128), ceil(m/128), split_k)   block (256,1,1)   smem 0 (static LDS: 73,732 B; 40,964 for e2m1 x e2m1)
// defines  A_FMT, B_FMT (MXRT_FMT_*), EDGE (0: interior-only shapes), THREADS = 256   set by mxrt/ops/gemm_amd.py
//          (variants: mxrt/ops/gemm_amd_kernels.py)
// requires gfx950; m, n, k >= 1; split_k <= ceil(k/32); flags VEC_* only for 16-byte aligned code rows;
//          MODE_ATOMIC on 16-bit outputs: n even, out 4-byte aligned (checked by the Python side)
//
// The main loop (operand registers, the mixed-format widening, scale VGPRs): gemm_gfx950_tile.h.
#include "gemm_gfx950_tile.h"

#ifndef THREADS
#error "THREADS must be defined by the launcher"
#endif
#ifndef EDGE
#error "EDGE must be defined by the launcher"
#endif
// EDGE=0: the launcher guarantees m, n multiples of 128, every split's K range a multiple of the stage and 16-byte
// aligned code rows, so the loads carry no masking code; EDGE=1 handles every shape.
#define GFX950_LOAD (EDGE ? MXRT_LOAD_MASKED : MXRT_LOAD_INTERIOR)
#if THREADS != 256
#error "gemm_mx_gfx950: THREADS must be 256 (4 waves of 64)"
#endif

MXRT_GEMM_OCCUPANCY_BEGIN
extern "C" __global__ void __launch_bounds__(THREADS) gemm_mx_gfx950(const u8* a, const u8* b, const u8* sa,
                                                                     const u8* sb, void* out, float* ws, u32* counters,
                                                                     i32 m, i32 n, i32 k, i32 split_k, i32 a_layout,
                                                                     i32 b_layout, i32 out_dtype, i32 mode,
                                                                     i32 flags) {
  __shared__ mxrt_u32x4 lds_words[2 * G950_STAGE / 16];
  __shared__ u32 last_flag;
  u8* lds = (u8*)lds_words;
  const MxrtGemmArgs g = {a, b, sa, sb, out, ws, counters, (u32)m, (u32)n, (u32)k, (u32)split_k,
                          a_layout, b_layout, out_dtype, mode, flags};
  const MxrtGemmTile t = mxrt_gemm_tile(g);
  const u32 kb_total = (g.k + 31u) / 32u;
  constexpr bool A4 = A_FMT == MXRT_FMT_E2M1, B4 = B_FMT == MXRT_FMT_E2M1;
  const MxrtOperand oa = {a, sa, g.m, A4 ? (g.k + 1u) / 2u : g.k, kb_total, t.m0,
                          (flags & MXRT_GEMM_FLAG_VEC_A) != 0, A4, mxrt_gemm_scale_addr(a_layout, kb_total)};
  const MxrtOperand ob = {b, sb, g.n, B4 ? (g.k + 1u) / 2u : g.k, kb_total, t.n0,
                          (flags & MXRT_GEMM_FLAG_VEC_B) != 0, B4, mxrt_gemm_scale_addr(b_layout, kb_total)};
  mxrt_v4f acc[4][4];
  g950_mainloop<GFX950_LOAD, EDGE == 0>(oa, ob, t, a_layout, b_layout, lds, acc);
  const u32 wave = MXRT_TID_X / 64u, wm = wave / 2u, wn = wave % 2u;
  mxrt_gemm_epilogue(g, t, acc, t.m0 + 64u * wm, t.n0 + 64u * wn, &last_flag);
}
MXRT_GEMM_OCCUPANCY_END
