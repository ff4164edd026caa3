// Host build of kernels_src/common/mx_gemm.h for tests/test_gemm_host.py (-DMXRT_HOST_TEST): element decode,
// fp32 -> bf16 / fp16 RNE, and the two-step scale factors, over arrays.
#include "../../kernels_src/common/mx_gemm.h"

extern "C" {
void host_decode(int fmt, const u32* c, float* out, int n) {
  for (int i = 0; i < n; ++i) {
    if (fmt == MXRT_FMT_E4M3) out[i] = mxrt_decode<MXRT_FMT_E4M3>(c[i]);
    if (fmt == MXRT_FMT_E5M2) out[i] = mxrt_decode<MXRT_FMT_E5M2>(c[i]);
    if (fmt == MXRT_FMT_E2M1) out[i] = mxrt_decode<MXRT_FMT_E2M1>(c[i]);
  }
}

void host_to_16(int out_dtype, const float* x, u16* out, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = (u16)(out_dtype == MXRT_OUT_BF16 ? mxrt_f32_to_bf16_bits(x[i]) : mxrt_f32_to_f16_bits(x[i]));
}

void host_scale_steps(const u32* sa, const u32* sb, float* f1, float* f2, int n) {
  for (int i = 0; i < n; ++i) mxrt_scale_steps(sa[i], sb[i], f1[i], f2[i]);
}
}
