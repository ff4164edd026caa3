// scale_layouts.h: where an E8M0 scale S[r, c] of a scale matrix [rows, cols] lands in each preshuffled layout
// of mxrt.layouts, as a byte offset in the layout's storage: exactly mxrt.layouts.scale_index (the numpy
// twin is mxrt.layouts.preshuffle_scales). The storage is the padded matrix (sm, sn) = scale_layout_shape,
// sm * sn bytes; every padding byte is written by the kernel (127 = scale 1.0), so the buffer is fully defined.
//
//   layout (MXRT_SCALE_LAYOUT_*)  pads to    offset of S[r, c]
//   0 none                 -          r * cols + c
//   1 aiter32x8            256 x 8    (r/32)*(sn/8)*256 + (c/8)*256 + (c%4)*64 + (r%16)*4 + ((c/4)%2)*2 + (r/16)%2
//   2 turbo16x4            16 x 4     (r/16)*16*sn + (c/4)*64 + (c%4)*16 + r%16
//   3 cublas128x4          128 x 4    ((r/128)*(sn/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4
//   4 deepgemm_ue8m0       4 x 4      4*((c/4)*sm + r) + c%4  (int32 words, 4 scales along c each, MN-major)
#pragma once
#include "prelude.h"
// the layout codes MXRT_SCALE_LAYOUT_* (mxrt/codes.py SCALE_LAYOUT_CODES)
#include "mx_codes.h"

#define MXRT_SCALE_PAD 127u

// The index maps, on the padded matrix [sm, sn] (sm, sn multiples of the layout's tile; every value fits 32 bits
// because the launchers require sm * sn < 2^31). Forward: byte offset of S[r, c] in the storage (an element
// offset for the zero-extended uint32 form of turbo16x4); inverse: (r, c) of offset o. Both are bijections of
// [0, sm) x [0, sn) onto [0, sm * sn); tests/test_scale_maps_host.py builds them for the host and checks them
// against mxrt.layouts.scale_index. L: a preshuffled layout code 1..4.
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

template <int L> struct MxrtScaleTile;
template <> struct MxrtScaleTile<MXRT_SCALE_LAYOUT_NONE> { static constexpr u32 ROWS = 1, COLS = 1; };
template <> struct MxrtScaleTile<MXRT_SCALE_LAYOUT_AITER32X8> { static constexpr u32 ROWS = 256, COLS = 8; };
template <> struct MxrtScaleTile<MXRT_SCALE_LAYOUT_TURBO16X4> { static constexpr u32 ROWS = 16, COLS = 4; };
template <> struct MxrtScaleTile<MXRT_SCALE_LAYOUT_CUBLAS128X4> { static constexpr u32 ROWS = 128, COLS = 4; };
template <> struct MxrtScaleTile<MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0> { static constexpr u32 ROWS = 4, COLS = 4; };

// One scale matrix [rows, cols] stored in layout L: padded shape (sm, sn), offsets, padding positions.
template <int L>
struct MxrtScaleLayout {
  u32 rows, cols, sm, sn;

  MXRT_DEVICE MxrtScaleLayout(u32 rows_, u32 cols_) : rows(rows_), cols(cols_) {
    constexpr u32 TR = MxrtScaleTile<L>::ROWS, TC = MxrtScaleTile<L>::COLS;
    sm = (rows + TR - 1) / TR * TR;
    sn = (cols + TC - 1) / TC * TC;
  }

  MXRT_DEVICE u32 offset(u32 r, u32 c) const {
    if constexpr (L == MXRT_SCALE_LAYOUT_NONE)
      return r * cols + c;
    else
      return mxrt_scale_offset<L>(r, c, sm, sn);
  }

  // Padding positions: [0, rows) x [cols, sn), then [rows, sm) x [0, sn).
  MXRT_DEVICE u32 padding() const { return sm * sn - rows * cols; }

  MXRT_DEVICE u32 padding_offset(u32 p) const {
    const u32 right = rows * (sn - cols);
    if (p < right) return offset(p / (sn - cols), cols + p % (sn - cols));
    p -= right;
    return offset(rows + p / sn, p % sn);
  }

  // Threads gt = 0, stride, 2*stride, ... of the grid write every padding byte once.
  MXRT_DEVICE void write_padding(u8* s, u32 gt, u32 stride) const {
    if (L == MXRT_SCALE_LAYOUT_NONE) return;
    const u32 n = padding();
    for (u32 p = gt; p < n; p += stride) s[padding_offset(p)] = (u8)MXRT_SCALE_PAD;
  }
};
