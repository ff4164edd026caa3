// Host build of kernels_src/gemm/gemm_decode_sm90_scales.h for tests/test_decode_scales_host.py (-DMXRT_HOST_TEST):
// what the sm_90a decode kernel stages for each (row, group of 4 MX blocks) of a preshuffled scale storage (the
// words DecScales::word names, copied here by memcpy where the kernel uses a 4-byte cp.async) and the 4 scale
// bytes DecScales::bytes gathers from them.
#include <cstring>

// PTX prmt.b32 in its default mode (what NVRTC emits for __byte_perm): byte i of the result is byte (s >> 4i) & 7
// of the 8 bytes y:x (x = bytes 0..3), or that byte's sign replicated when bit 3 of the nibble is set.
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned sel = (s >> (4 * i)) & 15u;
    unsigned b = (unsigned)(v >> (8 * (sel & 7u))) & 255u;
    if (sel & 8u) b = (b & 128u) ? 255u : 0u;
    r |= b << (8 * i);
  }
  return r;
}

#include "../../kernels_src/gemm/gemm_decode_sm90_scales.h"

// out[r * cols/4 + gi]: the group's 4 bytes as the kernel reads them, for every row r < rows and group gi < cols/4
// (cols % 4 == 0, as k % 128 == 0). Returns 0, or 1 when a staged word is unaligned or outside the storage.
template <int L>
static int gather(const u8* storage, long bytes, u32 rows, u32 cols, u32* out) {
  const DecScales<L> lay(storage, rows, cols);
  alignas(16) u8 staged[16];
  for (u32 r = 0; r < rows; ++r)
    for (u32 gi = 0; gi < cols / 4u; ++gi) {
      for (u32 j = 0; j < DecScales<L>::WORDS; ++j) {
        const u8* w = reinterpret_cast<const u8*>(lay.word(r, gi, j));
        const long o = (long)(w - storage);
        if (o < 0 || o + 4 > bytes || o % 4) return 1;
        std::memcpy(staged + 4 * j, w, 4);
      }
      out[(unsigned long)r * (cols / 4u) + gi] = lay.bytes(staged, r, gi);
    }
  return 0;
}

extern "C" int host_decode_scales(int layout, const u8* storage, long bytes, unsigned rows, unsigned cols,
                                  unsigned* out) {
  switch (layout) {
    case MXRT_SCALE_LAYOUT_NONE: return gather<MXRT_SCALE_LAYOUT_NONE>(storage, bytes, rows, cols, out);
    case MXRT_SCALE_LAYOUT_AITER32X8: return gather<MXRT_SCALE_LAYOUT_AITER32X8>(storage, bytes, rows, cols, out);
    case MXRT_SCALE_LAYOUT_TURBO16X4: return gather<MXRT_SCALE_LAYOUT_TURBO16X4>(storage, bytes, rows, cols, out);
    case MXRT_SCALE_LAYOUT_CUBLAS128X4: return gather<MXRT_SCALE_LAYOUT_CUBLAS128X4>(storage, bytes, rows, cols, out);
    case MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0:
      return gather<MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0>(storage, bytes, rows, cols, out);
    case MXRT_SCALE_LAYOUT_TURBO16X4_U32:
      return gather<MXRT_SCALE_LAYOUT_TURBO16X4_U32>(storage, bytes, rows, cols, out);
    default: return 2;
  }
}

// DEC_SWORDS(layout): staged words per row and stage (mxrt.ops.gemm_decode_kernels.scale_words mirrors it)
extern "C" int host_decode_words(int layout) { return (int)DEC_SWORDS(layout); }
