// mx_block.h: one MX block of 32 elements held by one thread: load (16-byte vectors or guarded scalars),
// amax, E8M0 scale, codes packed into 32-bit words, and the store. Shared by the quant kernels.
// Also the pieces of a block spread over several lanes (one 16-byte chunk each): raw chunk loads, chunk
// amax, the fast exact encoder (mxrt_encode_chunk) and code stores of any width.
#pragma once
#include "mx_codecs.h"
#include "mx_warp.h"

#if !defined(MXRT_CUDA)
MXRT_DEVICE u32 mxrt_f16_to_f32_bits_fast(u32 h) { return mxrt_f16_bits_to_f32_bits(h); }
#endif

// fp32 bits of a 16-bit input value (bf16 or fp16 bits in the low half of h).
template <int IN>
MXRT_DEVICE u32 mxrt_half_to_f32_bits(u32 h) {
  return IN == MXRT_IN_BF16 ? h << 16 : mxrt_f16_to_f32_bits_fast(h);
}

#if !defined(MXRT_HAS_MAX_U16X2)
// The unsigned max of each 16-bit half of a and b (mx_warp.h has the sm_90 instruction).
MXRT_DEVICE u32 mxrt_max_u16x2(u32 a, u32 b) {
  const u32 lo = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
  const u32 hi = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
  return lo | (hi << 16);
}
#endif

// |x| of both 16-bit halves of a bf16 / fp16 word: unsigned 16-bit order is the magnitude order of both formats
// (Inf above every finite value, NaN patterns above Inf), and the widening to fp32 bits is monotone, so the fp32 amax
// bits of packed values are mxrt_half_to_f32_bits of their packed max (the same bits as mxrt_amax_n on the widened
// values, NaN payloads included): a max per word instead of a mask and a max per element.
#define MXRT_ABS16X2 0x7FFF7FFFu

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
      out[2 * j] = w[j] << 16;
      out[2 * j + 1] = w[j] & 0xFFFF0000u;
    } else {
      out[2 * j] = mxrt_f16_to_f32_bits_fast(w[j] & 0xFFFFu);
      out[2 * j + 1] = mxrt_f16_to_f32_bits_fast(w[j] >> 16);
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
#if defined(MXRT_HAS_ABSMAX_F32)
  // a tree of NaN-propagating fp32 max of |x| (mxrt_absmax_bits): 31 instructions for 32 elements instead of 32
  // masks and 16 three-way integer maxima; the same bits but for a NaN's payload (any NaN gives the NaN scale)
  MXRT_STATIC_ASSERT(MXRT_BLOCK == 32, "mxrt_amax_bits: the tree below is written for 32 elements");
  u32 m[MXRT_BLOCK / 2];
#pragma unroll
  for (int i = 0; i < MXRT_BLOCK / 2; ++i) m[i] = mxrt_absmax_bits(bits[2 * i], bits[2 * i + 1]);
#pragma unroll
  for (int i = 0; i < 8; ++i) m[i] = mxrt_absmax_bits(m[i], m[i + 8]);
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = mxrt_absmax_bits(m[i], m[i + 4]);
  return mxrt_absmax_bits(mxrt_absmax_bits(m[0], m[2]), mxrt_absmax_bits(m[1], m[3]));
#else
  u32 a = 0;
#pragma unroll
  for (int i = 0; i < MXRT_BLOCK; ++i) {
    const u32 v = bits[i] & 0x7FFFFFFFu;
    a = v > a ? v : a;
  }
  return a;
#endif
}

// ---- fast exact encoding --------------------------------------------------------------------------------
// For a block whose scale exponent e = sb - 127 lies in [BIAS + MBITS - 126, 126], the codes are read off
// y = x * 2^-e computed in fp32:
//   - 2^-e is an fp32 normal, and y is exact whenever it is an fp32 normal (a product by a power of two);
//   - y is below the fp32 normals only when |y| < 2^-126 <= 2^(-BIAS-MBITS), under half the format's smallest
//     subnormal: its code is a signed zero, whatever y's low bits are. So an inexact or flushed (FTZ) y, and a
//     flushed subnormal x (|x| < 2^-126 gives |y| < 2^(-126-e) <= 2^(-BIAS-MBITS)), still give the exact code.
// Blocks outside the range (all-zero blocks, tiny or huge amax) take the integer path mxrt_encode_scaled.
template <class F>
MXRT_DEVICE bool mxrt_fast_scale(u32 sb) {
  const i32 e = (i32)sb - 127;
  return e >= F::BIAS + F::MBITS - 126 && e <= 126;  // also excludes the NaN byte 0xFF (e = 128)
}

// Code of an exactly scaled fp32 y (finite, |y| < 2^(EMAX + 2)): RNE, saturating, sign kept (also for zero).
template <class F>
MXRT_DEVICE u32 mxrt_code_of_f32(u32 yb) {
  const u32 a = yb & 0x7FFFFFFFu;
  const u32 sign = (yb >> 31) ? F::SIGN_BIT : 0u;
  u32 code;
  if (a < ((u32)(128 - F::BIAS) << 23)) {
    // below the format's smallest normal 2^(1-BIAS): count quanta 2^(1-BIAS-MBITS). a * 2^(MBITS+BIAS-1) is
    // exact inside the fma and below 2^MBITS + 1, and adding 2^23 rounds it to an integer, to nearest even.
    const float t = mxrt_fma(mxrt_as_f32(a), (float)(1u << (F::MBITS + F::BIAS - 1)), 8388608.0f);
    code = mxrt_as_u32(t) - 0x4B000000u;  // 2^MBITS (a carry into the exponent) is the smallest normal's code
  } else {
    // normal: round the fp32 mantissa to MBITS bits, to nearest even, then rebias the exponent field
    const u32 r = a + ((1u << (22 - F::MBITS)) - 1u) + ((a >> (23 - F::MBITS)) & 1u);
    code = (r >> (23 - F::MBITS)) - ((u32)(127 - F::BIAS) << F::MBITS);
    code = code < F::MAX_CODE ? code : F::MAX_CODE;  // RNE is monotone: rounding past max saturates
  }
  return sign | code;
}

// Codes of the N elements bits[0..N) of one block under scale byte sb, packed little-endian as
// mxrt_encode_block packs them: one code per byte (N/4 words), e2m1 two per byte with the even element in the
// low nibble (N/8 words; N = 4 fills the low 16 bits of words[0]). Bit-exact with mxrt_encode_scaled.
template <class F, int N>
MXRT_DEVICE void mxrt_encode_chunk(const u32* bits, u32 sb, u32* words) {
  constexpr i32 PER_WORD = F::BITS == 4 ? 8 : 4;
  constexpr i32 SHIFT = F::BITS == 4 ? 4 : 8;
  constexpr i32 NW = (N + PER_WORD - 1) / PER_WORD;
#pragma unroll
  for (int w = 0; w < NW; ++w) words[w] = 0;
  if (mxrt_fast_scale<F>(sb)) {
    const float inv = mxrt_as_f32((254u - sb) << 23);  // 2^-e, e = sb - 127
#if defined(MXRT_HAS_CVT_FP8)
    constexpr bool HW = F::BITS == 8;  // e4m3, e5m2: the hardware conversion, two elements per instruction
#else
    constexpr bool HW = false;
#endif
    if constexpr (HW) {
#if defined(MXRT_HAS_CVT_FP8)
#pragma unroll
      for (int i = 0; i < N; i += 2) {
        const float y0 = mxrt_fmul(mxrt_as_f32(bits[i]), inv);
        const float y1 = mxrt_fmul(mxrt_as_f32(bits[i + 1]), inv);
        const u32 p = F::MBITS == 3 ? mxrt_cvt_e4m3x2(y0, y1) : mxrt_cvt_e5m2x2(y0, y1);
        words[i / 4] |= p << (8 * (i % 4));
      }
#endif
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const u32 c = mxrt_code_of_f32<F>(mxrt_as_u32(mxrt_fmul(mxrt_as_f32(bits[i]), inv)));
        words[i / PER_WORD] |= c << (SHIFT * (i % PER_WORD));
      }
    }
  } else if (sb == MXRT_E8M0_NAN) {
#pragma unroll
    for (int i = 0; i < N; ++i) words[i / PER_WORD] |= F::NAN_CODE << (SHIFT * (i % PER_WORD));
  } else {
    const i32 e = (i32)sb - 127;
#pragma unroll
    for (int i = 0; i < N; ++i) words[i / PER_WORD] |= mxrt_encode_scaled<F>(bits[i], e) << (SHIFT * (i % PER_WORD));
  }
}

// Codes of the block under scale byte sb, packed little-endian into words: 8 words of 4 codes, or for
// 4-bit formats 4 words of 8 nibbles (even element in the low nibble, MX_REFERENCE.md 1.2).
template <class F>
MXRT_DEVICE void mxrt_encode_block(const u32* bits, u32 sb, u32* words) {
  mxrt_encode_chunk<F, MXRT_BLOCK>(bits, sb, words);
}

// fp32 amax bits of N values (the unsigned max of |bits|, NaN propagates; see mxrt_amax_bits).
template <int N>
MXRT_DEVICE u32 mxrt_amax_n(const u32* bits) {
  u32 a = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const u32 v = bits[i] & 0x7FFFFFFFu;
    a = v > a ? v : a;
  }
  return a;
}

// The raw 16 bytes (16 / sizeof(IN) elements) of x from element i, zeros past `valid` elements.
// vec: x + i is 16-byte aligned and valid covers the chunk: one 16-byte load.
template <int IN>
MXRT_DEVICE mxrt_u32x4 mxrt_load_raw16(const void* x, u32 i, u32 valid, bool vec) {
  constexpr u32 PER = 16 / MxrtIn<IN>::SIZE;
  if (vec && valid >= PER) return *(const mxrt_u32x4*)((const u8*)x + (u64)i * MxrtIn<IN>::SIZE);
  u32 w[4] = {0, 0, 0, 0};
#pragma unroll
  for (u32 e = 0; e < PER; ++e) {
    if (e < valid) {
      if (IN == MXRT_IN_F32) w[e] = ((const u32*)x)[i + e];
      else w[e / 2] |= (u32)((const u16*)x)[i + e] << (16 * (e % 2));
    }
  }
  mxrt_u32x4 v;
  v.x = w[0];
  v.y = w[1];
  v.z = w[2];
  v.w = w[3];
  return v;
}

// 16 staged bytes (shared memory, 16-byte aligned) to dst: one vector store when vec and all 16 are valid, else the
// first `valid` bytes one by one (the staged tile stores of the dual quantizers).
MXRT_DEVICE void mxrt_put16(u8* dst, const u8* src, u32 valid, bool vec) {
  if (vec && valid >= 16u) {
    *(mxrt_u32x4*)dst = *(const mxrt_u32x4*)src;
  } else {
    for (u32 i = 0; i < valid && i < 16u; ++i) dst[i] = src[i];
  }
}

// Store BYTES bytes of packed codes: one vector store when `full` (dst aligned to BYTES), else the first
// nbytes bytes one by one.
template <int BYTES>
MXRT_DEVICE void mxrt_store_codes(u8* dst, const u32* words, u32 nbytes, bool full) {
  if (full) {
    if (BYTES == 16) {
      mxrt_u32x4 o;
      o.x = words[0];
      o.y = words[1 % ((BYTES + 3) / 4)];
      o.z = words[2 % ((BYTES + 3) / 4)];
      o.w = words[3 % ((BYTES + 3) / 4)];
      *(mxrt_u32x4*)dst = o;
    } else if (BYTES == 8) {
      mxrt_u32x2 o;
      o.x = words[0];
      o.y = words[1 % ((BYTES + 3) / 4)];
      *(mxrt_u32x2*)dst = o;
    } else if (BYTES == 4) {
      *(u32*)dst = words[0];
    } else if (BYTES == 2) {
      *(u16*)dst = (u16)words[0];
    } else {
      dst[0] = (u8)words[0];
    }
  } else {
#pragma unroll
    for (int i = 0; i < BYTES; ++i)
      if ((u32)i < nbytes) dst[i] = (u8)(words[i / 4] >> (8 * (i % 4)));
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
