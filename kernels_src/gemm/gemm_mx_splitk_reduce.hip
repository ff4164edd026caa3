// kernel   gemm_mx_splitk_reduce                                                      (extern "C")
// computes out[i] = convert(ws[0, i] + ws[1, i] + ... + ws[split_k-1, i]), summed in split order in fp32, so the
//          result is bitwise identical across runs (deterministic split-K); convert = fp32 copy or RNE to bf16/fp16
// args     const float* ws [split_k, mn] | void* out [mn] of OUT_DTYPE | u64 mn | u32 split_k
// grid     (min(ceil(mn/THREADS), 65535*8),1,1)   block (THREADS,1,1)   smem 0   (grid-stride loop)
// defines  THREADS, OUT_DTYPE (MXRT_OUT_*)            set by mxrt/ops/gemm_splitk.py (specs: mxrt/ops/gemm_kernels.py)
// requires split_k >= 1; ws and out hold split_k*mn and mn elements                checked by gemm_splitk.py
#include "../common/mx_gemm.h"

#if !defined(THREADS) || !defined(OUT_DTYPE)
#error "THREADS and OUT_DTYPE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mx_splitk_reduce(const float* __restrict__ ws, void* __restrict__ out, u64 mn, u32 split_k) {
#if defined(MXRT_CUDA)
  const u64 stride = (u64)gridDim.x * THREADS;
#else
  const u64 stride = (u64)__builtin_amdgcn_grid_size_x();
#endif
  for (u64 i = (u64)MXRT_BID_X * THREADS + MXRT_TID_X; i < mn; i += stride) {
    float s = ws[i];
    for (u32 z = 1; z < split_k; ++z) s += ws[(u64)z * mn + i];
#if OUT_DTYPE == MXRT_OUT_F32
    ((float*)out)[i] = s;
#else
    ((u16*)out)[i] = (u16)mxrt_f32_to_16_bits<OUT_DTYPE>(s);
#endif
  }
}
