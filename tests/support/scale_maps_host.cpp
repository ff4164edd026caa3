// Host build of kernels_src/layout/scale_maps.h for tests/test_scale_maps_host.py (compiled with -DMXRT_HOST_TEST).
#include "../../kernels_src/layout/scale_maps.h"

template <int L>
static void maps(const unsigned* r, const unsigned* c, unsigned* o, unsigned* r2, unsigned* c2, long n, unsigned sm,
                 unsigned sn) {
  for (long i = 0; i < n; ++i) {
    o[i] = mxrt_scale_offset<L>(r[i], c[i], sm, sn);
    mxrt_scale_coords<L>(o[i], sm, sn, &r2[i], &c2[i]);
  }
}

// o = forward(r, c); (r2, c2) = inverse(o)
extern "C" void host_scale_maps(int layout, const unsigned* r, const unsigned* c, unsigned* o, unsigned* r2,
                                unsigned* c2, long n, unsigned sm, unsigned sn) {
  switch (layout) {
    case 0: maps<0>(r, c, o, r2, c2, n, sm, sn); break;
    case 1: maps<1>(r, c, o, r2, c2, n, sm, sn); break;
    case 2: maps<2>(r, c, o, r2, c2, n, sm, sn); break;
    default: maps<3>(r, c, o, r2, c2, n, sm, sn); break;
  }
}
