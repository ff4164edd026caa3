// kernel   gemm_mx_sm90_ws                                                            (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k] (NT, MX block 32
//          along K), the issue-10 engine: persistent grid, TMA producer warpgroup, 2 consumer warpgroups
//          (setmaxnreg 56 / 224). DIAG=0 exact: per k32 a wgmma m64n128k32 into P, two partials in flight, promoted
//          by gemm_sm90_tile.h's promote (fast in [64,190], else promote_wide; per-stage flag). DIAG=1 inexact timing
//          diagnostic: a stage's 4 k32 accumulate in the tensor core, promoted once with its first block's factors
// args     const __grid_constant__ mxrt_tmap tma, tmb (fp8 codes A [m,k], B [n,k] uint8, boxes 128 x 128 bytes,
//          SWIZZLE_128B, zero OOB fill) | const u8* sa, sb (E8M0: row-major [m / n, ceil(k/32)], or the storage of
//          layout SLA / SLB read in place) | void* out [m,n] | int m, int n, int k
// grid     (min(#SMs, tiles),1,1) persistent (CTA b: tiles b, b + gridDim.x, ..., GROUP_M 8 raster); block (384,1,1):
//          warpgroups 0, 1 consume the 128 x 128 tile (SPLIT rows / columns), warpgroup 2 produces (thread 256 the
//          TMAs, warps 9-11 the scale factors); smem: gemm_sm90_ws.py (ring + 3 cp.async staging rings)
// defines  A_FMT, B_FMT, OUT_DTYPE, ATOMIC 0, BM BN 128, STAGES 3..6, DBUF 0, DIAG 0/1, SPLIT 0 rows/1 cols, WS_MODE,
//          SLA, SLB (MXRT_SCALE_LAYOUT_* 0..4; 5 = turbo16x4 as uint32 words)     set by mxrt/ops/gemm_sm90_ws.py
// requires sm_90a; k % 16 == 0, code bases 16-byte aligned (TMA), scale bases 4-byte aligned (word copies); m, n,
//          ceil(k/32) * max(m, n) and a layout's storage bytes < 2^31; no split-K; a scattered layout (aiter32x8,
//          turbo16x4) STAGES <= 5.   Checked by mxrt/ops/gemm_sm90_ws.py supports() (the GemmPath sm90_ws)
#include "gemm_sm90_ws_engine.h"

#if defined(MXRT_CUDA)

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
    gemm_mx_sm90_ws(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                    const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out, int m, int n,
                    int k) {
  extern __shared__ u8 smem_raw[];
  const Sm90Smem S = sm90_smem(smem_raw);
  ws_engine(S, WsDenseWalk(m, n, k), &tma, &tmb, sa, sb, out);
}

#endif  // MXRT_CUDA
