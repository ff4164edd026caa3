// Host build of kernels_src/common/scale_layouts.h for tests/test_scale_maps_host.py (compiled with -DMXRT_HOST_TEST).
#include "../../kernels_src/common/scale_layouts.h"

template <int L>
static void maps(const unsigned* r, const unsigned* c, unsigned* o, unsigned* r2, unsigned* c2, long n, unsigned sm,
                 unsigned sn) {
  for (long i = 0; i < n; ++i) {
    o[i] = mxrt_scale_offset<L>(r[i], c[i], sm, sn);
    mxrt_scale_coords<L>(o[i], sm, sn, &r2[i], &c2[i]);
  }
}

// o = forward(r, c); (r2, c2) = inverse(o); layout: an MXRT_SCALE_LAYOUT_* code 1..4 (mxrt/codes.py)
extern "C" void host_scale_maps(int layout, const unsigned* r, const unsigned* c, unsigned* o, unsigned* r2,
                                unsigned* c2, long n, unsigned sm, unsigned sn) {
  switch (layout) {
    case MXRT_SCALE_LAYOUT_AITER32X8: maps<MXRT_SCALE_LAYOUT_AITER32X8>(r, c, o, r2, c2, n, sm, sn); break;
    case MXRT_SCALE_LAYOUT_TURBO16X4: maps<MXRT_SCALE_LAYOUT_TURBO16X4>(r, c, o, r2, c2, n, sm, sn); break;
    case MXRT_SCALE_LAYOUT_CUBLAS128X4: maps<MXRT_SCALE_LAYOUT_CUBLAS128X4>(r, c, o, r2, c2, n, sm, sn); break;
    default: maps<MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0>(r, c, o, r2, c2, n, sm, sn); break;
  }
}
