// scale_maps.h: index maps of the E8M0 scale layouts of mxrt/layouts/scales.py (MX_REFERENCE.md 3a, 3b, 3d, 3e).
// S is the padded scale matrix [sm, sn] (sm, sn multiples of the layout's tile), o a byte offset in the layout's
// storage (an element offset for the zero-extended uint32 form of turbo16x4). Forward: (r, c) -> o; inverse:
// o -> (r, c). Both are bijections of [0, sm) x [0, sn) onto [0, sm*sn); every value fits 32 bits because the
// wrappers require sm*sn < 2^31. tests/test_scale_maps_host.py builds this header for the host and checks both
// maps against mxrt.layouts.scale_index.
#pragma once
#include "../common/prelude.h"
#include "../common/mx_codes.h"

// L: a preshuffled layout code of mx_codes.h (mxrt/codes.py SCALE_LAYOUT_CODES), 1..4:
//   MXRT_SCALE_LAYOUT_AITER32X8        aiter shuffle_scale / e8m0_shuffle, tile 256 x 8
//   MXRT_SCALE_LAYOUT_TURBO16X4        Primus-Turbo preshuffle_scale_16x4, tile 16 x 4
//   MXRT_SCALE_LAYOUT_CUBLAS128X4      cuBLAS / TE / torchao to_blocked, tile 128 x 4
//   MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0   DeepGEMM packed UE8M0, MN-major int32 storage [sn/4, sm], tile 4 x 4

// Byte offset of S[r, c] in the storage.
template <int L>
MXRT_DEVICE u32 mxrt_scale_offset(u32 r, u32 c, u32 sm, u32 sn) {
  MXRT_STATIC_ASSERT(L >= MXRT_SCALE_LAYOUT_AITER32X8 && L <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0, "L: layout code 1..4");
  if (L == MXRT_SCALE_LAYOUT_AITER32X8) {
    // S viewed as [sm/32, 2, 16, sn/8, 2, 4] (i0..i5), permuted (0, 3, 5, 2, 4, 1)
    const u32 i0 = r / 32, i1 = (r / 16) % 2, i2 = r % 16;
    const u32 i3 = c / 8, i4 = (c / 4) % 2, i5 = c % 4;
    return i0 * (sn / 8) * 256 + i3 * 256 + i5 * 64 + i2 * 4 + i4 * 2 + i1;
  } else if (L == MXRT_SCALE_LAYOUT_TURBO16X4) {
    // 16 x 4 tiles, each column-major, tiles along K inside a 16-row band
    return (r / 16) * 16 * sn + (c / 4) * 64 + (c % 4) * 16 + r % 16;
  } else if (L == MXRT_SCALE_LAYOUT_CUBLAS128X4) {
    // 512-byte tiles of 128 x 4, row-block-major; inside a tile (r%32)*16 + ((r%128)/32)*4 + c%4
    return ((r / 128) * (sn / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
  } else {
    // four scales per little-endian int32 along K; int32 (r, c/4) at element (c/4)*sm + r
    return 4 * ((c / 4) * sm + r) + c % 4;
  }
}

// (r, c) of the scale stored at byte offset o.
template <int L>
MXRT_DEVICE void mxrt_scale_coords(u32 o, u32 sm, u32 sn, u32* r, u32* c) {
  MXRT_STATIC_ASSERT(L >= MXRT_SCALE_LAYOUT_AITER32X8 && L <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0, "L: layout code 1..4");
  if (L == MXRT_SCALE_LAYOUT_AITER32X8) {
    const u32 band = (sn / 8) * 256;
    const u32 i0 = o / band, t = o % band;
    const u32 i3 = t / 256, u = t % 256;
    const u32 i5 = u / 64, i2 = (u % 64) / 4, i4 = (u % 4) / 2, i1 = u % 2;
    *r = 32 * i0 + 16 * i1 + i2;
    *c = 8 * i3 + 4 * i4 + i5;
  } else if (L == MXRT_SCALE_LAYOUT_TURBO16X4) {
    const u32 rb = o / (16 * sn), t = o % (16 * sn);
    *r = 16 * rb + t % 16;
    *c = 4 * (t / 64) + (t % 64) / 16;
  } else if (L == MXRT_SCALE_LAYOUT_CUBLAS128X4) {
    const u32 tile = o / 512, w = o % 512;
    *r = 128 * (tile / (sn / 4)) + 32 * ((w % 16) / 4) + w / 16;
    *c = 4 * (tile % (sn / 4)) + w % 4;
  } else {
    const u32 word = o / 4;
    *r = word % sm;
    *c = 4 * (word / sm) + o % 4;
  }
}
