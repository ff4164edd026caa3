// Host build of kernels_src/common/mx_dequant.h for tests/test_dequant_host.py (compiled with -DMXRT_HOST_TEST):
// both routes of one element's dequantisation, per format and output dtype, on given (code, scale byte) pairs.
#include "../../kernels_src/common/mx_dequant.h"

template <int F, int O>
static void run(int fast, const u32* c, const u32* s, u32* out, long n) {
  for (long i = 0; i < n; ++i) {
    const bool ok = s[i] >= DqFmt<F>::FAST_LO && s[i] <= DqFmt<F>::FAST_HI;
    if (fast == 2) {  // the bit route (float32 / bfloat16 out)
      if constexpr (O == MXRT_OUT_F16)
        out[i] = 0xDEADBEEFu;
      else
        out[i] = ok ? dq_bits<F, O>(c[i], s[i]) : 0xDEADBEEFu;
    } else if (fast) {
      out[i] = ok ? dq_fast<O>(dq_decode_f32<F>(c[i]), s[i]) : 0xDEADBEEFu;
    } else {
      out[i] = dq_exact<F, O>(c[i], s[i]);
    }
  }
}

template <int F>
static void run_fmt(int o, int fast, const u32* c, const u32* s, u32* out, long n) {
  switch (o) {
    case MXRT_OUT_F32: run<F, MXRT_OUT_F32>(fast, c, s, out, n); break;
    case MXRT_OUT_BF16: run<F, MXRT_OUT_BF16>(fast, c, s, out, n); break;
    default: run<F, MXRT_OUT_F16>(fast, c, s, out, n); break;
  }
}

extern "C" void host_dequant(int fmt, int o, int fast, const u32* c, const u32* s, u32* out, long n) {
  switch (fmt) {
    case MXRT_FMT_E4M3: run_fmt<MXRT_FMT_E4M3>(o, fast, c, s, out, n); break;
    case MXRT_FMT_E5M2: run_fmt<MXRT_FMT_E5M2>(o, fast, c, s, out, n); break;
    case MXRT_FMT_E2M3: run_fmt<MXRT_FMT_E2M3>(o, fast, c, s, out, n); break;
    case MXRT_FMT_E3M2: run_fmt<MXRT_FMT_E3M2>(o, fast, c, s, out, n); break;
    default: run_fmt<MXRT_FMT_E2M1>(o, fast, c, s, out, n); break;
  }
}
