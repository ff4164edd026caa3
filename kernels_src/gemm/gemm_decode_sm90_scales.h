// gemm_decode_sm90_scales.h: how the sm_90a decode kernel (gemm_decode_sm90.h) reads a preshuffled scale layout in
// place. A ring stage holds group gi (MX blocks 4 gi .. 4 gi + 3) of each row; its 4 scale bytes are staged by
// cp.async as 4-byte words and read back as one word, byte j = block 4 gi + j (the row-major form).
//
//   layout (define SLA / SLB)           words per row and stage   where the group's 4 bytes are
//   0 row-major                          1   the kernel's own word path (r * k/32 + 4 gi, aligned as k % 128 == 0)
//   3 cublas128x4, 4 deepgemm_ue8m0      1   one aligned word at offset(r, 4 gi) (c % 4 in the low 2 offset bits)
//   1 aiter32x8, 2 turbo16x4 (bytes)     4   one byte per block, 64 / 16 bytes apart, all at the same position
//   5 turbo16x4 as uint32 words          4   one word per block (the scale zero-extended), 16 words apart
//
// The index maps are those of kernels_src/common/scale_layouts.h (MxrtScaleLayout). Builds for the host too
// (tests/support/decode_scales_host.cpp, which supplies __byte_perm): tests/test_decode_scales_host.py checks every
// layout against mxrt.layouts.preshuffle_scales bitwise.
#pragma once
#include "../common/scale_layouts.h"

#define DEC_SCATTERED(L) \
  ((L) == MXRT_SCALE_LAYOUT_AITER32X8 || (L) == MXRT_SCALE_LAYOUT_TURBO16X4 || (L) == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
// staged 4-byte words per row and stage of a scale operand in layout L
#define DEC_SWORDS(L) (DEC_SCATTERED(L) ? 4u : 1u)

// One operand's scale storage (layout L: MXRT_SCALE_LAYOUT_* 0..5) as the decode kernel reads it. The launcher
// guarantees a 4-byte aligned base and a storage of fewer than 2^31 elements (32-bit offsets). L = 0 reads
// row-major storage correctly too (the host test uses it), but the kernel keeps its own 64-bit word path for it
// (the MoE weights' scales may pass 2^31 bytes).
template <int L>
struct DecScales {
  MXRT_STATIC_ASSERT(L >= MXRT_SCALE_LAYOUT_NONE && L <= MXRT_SCALE_LAYOUT_TURBO16X4_U32, "DecScales: layout code 0..5");
  static constexpr u32 WORDS = DEC_SWORDS(L);
  const u32* base;  // the storage as 32-bit words
  MxrtScaleLayout<L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? MXRT_SCALE_LAYOUT_TURBO16X4 : L> lay;  // code 5: words

  MXRT_DEVICE DecScales(const u8* s, u32 rows, u32 cols) : base(reinterpret_cast<const u32*>(s)), lay(rows, cols) {}

  // The aligned word to stage as word j (< WORDS) of (row, group gi).
  MXRT_DEVICE const u32* word(u32 row, u32 gi, u32 j) const {
    const u32 o = lay.offset(row, 4u * gi + j);
    return base + (L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? o : o >> 2);
  }

  // The group's 4 scale bytes (block 4 gi + j in byte j) from its WORDS staged words at sw (16-byte aligned when
  // WORDS is 4). The scattered layouts keep a row's 4 blocks of a group at one byte position of their words
  // (aiter32x8: (gi % 2) * 2 + (row / 16) % 2; turbo16x4: row % 4; the uint32 form: byte 0).
  MXRT_DEVICE u32 bytes(const u8* sw, u32 row, u32 gi) const {
    if constexpr (WORDS == 1u) {
      return *(const u32*)sw;
    } else {
      const mxrt_u32x4 v = *(const mxrt_u32x4*)sw;
      const u32 b = L == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? 0u : lay.offset(row, 4u * gi) & 3u;
      const u32 sel = b | ((b + 4u) << 4);  // byte b of the first word, byte b of the second
      return __byte_perm(__byte_perm(v.x, v.y, sel), __byte_perm(v.z, v.w, sel), 0x5410u);
    }
  }
};

