// Host build of kernels_src/common/mx_codecs.h for tests/test_device_codecs.py (compiled with -DMXRT_HOST_TEST).
#include "../../kernels_src/common/mx_block.h"

template <int FMT_ID>
static u32 scale_dispatch(int mode, u32 a) {
  return mxrt_e8m0_from_amax_bits<typename MxrtFmt<FMT_ID>::type>(a, mode);
}

extern "C" void host_scales(int fmt, int mode, const u32* amax, u8* out, long n) {
  for (long i = 0; i < n; ++i) {
    switch (fmt) {
      case 0: out[i] = (u8)scale_dispatch<0>(mode, amax[i]); break;
      case 1: out[i] = (u8)scale_dispatch<1>(mode, amax[i]); break;
      case 2: out[i] = (u8)scale_dispatch<2>(mode, amax[i]); break;
      case 3: out[i] = (u8)scale_dispatch<3>(mode, amax[i]); break;
      default: out[i] = (u8)scale_dispatch<4>(mode, amax[i]); break;
    }
  }
}

extern "C" void host_encode(int fmt, const u32* x, const int* e, u8* out, long n) {
  for (long i = 0; i < n; ++i) {
    switch (fmt) {
      case 0: out[i] = (u8)mxrt_encode_scaled<FmtE4M3>(x[i], e[i]); break;
      case 1: out[i] = (u8)mxrt_encode_scaled<FmtE5M2>(x[i], e[i]); break;
      case 2: out[i] = (u8)mxrt_encode_scaled<FmtE2M3>(x[i], e[i]); break;
      case 3: out[i] = (u8)mxrt_encode_scaled<FmtE3M2>(x[i], e[i]); break;
      default: out[i] = (u8)mxrt_encode_scaled<FmtE2M1>(x[i], e[i]); break;
    }
  }
}

extern "C" void host_f16_to_f32(const u16* h, u32* out, long n) {
  for (long i = 0; i < n; ++i) out[i] = mxrt_f16_bits_to_f32_bits(h[i]);
}
