// mx_block.h: one MX block of 32 elements held by one thread: load (16-byte vectors or guarded scalars),
// amax, E8M0 scale, codes packed into 32-bit words, and the store. Shared by the quant kernels.
#pragma once
#include "mx_codecs.h"

#define MXRT_BLOCK 32

// Elements of IN_DTYPE per 16-byte vector.
template <int IN> struct MxrtIn;
template <> struct MxrtIn<MXRT_IN_F32> { static constexpr i32 SIZE = 4; };
template <> struct MxrtIn<MXRT_IN_BF16> { static constexpr i32 SIZE = 2; };
template <> struct MxrtIn<MXRT_IN_F16> { static constexpr i32 SIZE = 2; };

// fp32 bits of element i of x (guard-free: the caller checks bounds).
template <int IN>
MXRT_DEVICE u32 mxrt_load_elem(const void* x, u32 i) {
  if (IN == MXRT_IN_F32) return ((const u32*)x)[i];
  if (IN == MXRT_IN_BF16) return mxrt_bf16_bits_to_f32_bits(((const u16*)x)[i]);
  return mxrt_f16_bits_to_f32_bits(((const u16*)x)[i]);
}

// Unpack one 16-byte vector into fp32 bits: 4 (f32) or 8 (bf16/f16) values, low half first (little-endian).
template <int IN>
MXRT_DEVICE void mxrt_unpack16(const mxrt_u32x4 v, u32* out) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (IN == MXRT_IN_F32) {
      out[j] = w[j];
    } else if (IN == MXRT_IN_BF16) {
      out[2 * j] = mxrt_bf16_bits_to_f32_bits(w[j] & 0xFFFFu);
      out[2 * j + 1] = mxrt_bf16_bits_to_f32_bits(w[j] >> 16);
    } else {
      out[2 * j] = mxrt_f16_bits_to_f32_bits(w[j] & 0xFFFFu);
      out[2 * j + 1] = mxrt_f16_bits_to_f32_bits(w[j] >> 16);
    }
  }
}

// bits[0..32) = x[base + 0..32), zero past `valid` (the zero padding of a partial block).
// vec: base is a multiple of 16 bytes from a 16-byte aligned x, so full blocks load as 16-byte vectors.
template <int IN>
MXRT_DEVICE void mxrt_load_block(const void* x, u32 base, u32 valid, bool vec, u32* bits) {
  constexpr i32 PER = 16 / MxrtIn<IN>::SIZE;  // elements per vector
  if (vec && valid >= MXRT_BLOCK) {
    const mxrt_u32x4* p = (const mxrt_u32x4*)((const u8*)x + (u64)base * MxrtIn<IN>::SIZE);
    mxrt_u32x4 v[MXRT_BLOCK / PER];
#pragma unroll
    for (int c = 0; c < MXRT_BLOCK / PER; ++c) v[c] = p[c];  // all loads in flight before the first use
#pragma unroll
    for (int c = 0; c < MXRT_BLOCK / PER; ++c) mxrt_unpack16<IN>(v[c], bits + c * PER);
  } else {
#pragma unroll
    for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = (u32)i < valid ? mxrt_load_elem<IN>(x, base + i) : 0u;
  }
}

// fp32 amax bits: unsigned max of |bits| (NaN patterns sort above +Inf, so NaN propagates).
MXRT_DEVICE u32 mxrt_amax_bits(const u32* bits) {
  u32 a = 0;
#pragma unroll
  for (int i = 0; i < MXRT_BLOCK; ++i) {
    const u32 v = bits[i] & 0x7FFFFFFFu;
    a = v > a ? v : a;
  }
  return a;
}

// Codes of the block under scale byte sb, packed little-endian into words: 8 words of 4 codes, or for
// 4-bit formats 4 words of 8 nibbles (even element in the low nibble, MX_REFERENCE.md 1.2).
template <class F>
MXRT_DEVICE void mxrt_encode_block(const u32* bits, u32 sb, u32* words) {
  constexpr i32 PER_WORD = F::BITS == 4 ? 8 : 4;
  constexpr i32 SHIFT = F::BITS == 4 ? 4 : 8;
  const i32 e = (i32)sb - 127;
#pragma unroll
  for (int w = 0; w < MXRT_BLOCK / PER_WORD; ++w) {
    u32 acc = 0;
#pragma unroll
    for (int j = 0; j < PER_WORD; ++j) {
      const u32 c = sb == MXRT_E8M0_NAN ? F::NAN_CODE : mxrt_encode_scaled<F>(bits[w * PER_WORD + j], e);
      acc |= c << (SHIFT * j);
    }
    words[w] = acc;
  }
}

// Store the packed codes of a block whose first element is `valid` elements from the row's end (at most 32).
// vec: dst is 16-byte aligned; a full block is stored as 16-byte vectors, a partial one byte by byte.
template <class F>
MXRT_DEVICE void mxrt_store_block(u8* dst, const u32* words, u32 valid, bool vec) {
  constexpr i32 NWORDS = F::BITS == 4 ? 4 : 8;
  if (vec && valid >= MXRT_BLOCK) {
#pragma unroll
    for (int v = 0; v < NWORDS / 4; ++v) {
      mxrt_u32x4 o;
      o.x = words[4 * v];
      o.y = words[4 * v + 1];
      o.z = words[4 * v + 2];
      o.w = words[4 * v + 3];
      ((mxrt_u32x4*)dst)[v] = o;
    }
  } else {
    const u32 nbytes = F::BITS == 4 ? (valid + 1) / 2 : valid;
#pragma unroll
    for (int i = 0; i < NWORDS * 4; ++i)
      if ((u32)i < nbytes) dst[i] = (u8)(words[i / 4] >> (8 * (i % 4)));
  }
}
