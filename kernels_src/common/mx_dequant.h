// mx_dequant.h: exact MX dequantisation of one element, decode(code) * 2^(scale - 127) rounded once (RNE, subnormals
// kept) to float32 / bfloat16 / float16 bits: bitwise the numpy twin mxrt.formats.dequantize_mx (NaN stays NaN; its
// sign and payload are unspecified). Used by kernels_src/quant/dequantize_mx.hip; built for the host by
// tests/support/dequant_host.cpp (tests/test_dequant_host.py checks every code x scale byte x output dtype).
//
// Two routes, same bits: dq_exact (integer construction, any scale byte) and dq_fast (the code's fp32 value times
// the fp32 power of two, then one RNE conversion), valid where that product is a normal fp32 for every code:
// scale bytes [DqFmt<F>::FAST_LO, FAST_HI]. The kernel takes dq_fast per block where it may.
#pragma once
#include "mx_gemm.h"

// Per element format F (MXRT_FMT_*): code sign bit, the scale bytes of the fast route, and the bf16 GEMM window
// (scale bytes whose blocks a bf16-operand GEMM with fp32 accumulation computes exactly: the sm90_bf16 route's
// window; e2m1 values are e4m3 values, so e2m1 takes e4m3's).
// EB / MB / BIAS: exponent bits, mantissa bits, exponent bias; FAST_LO = BIAS + MB (the smallest subnormal code times
// 2^(FAST_LO - 127) is 2^-126, fp32's smallest normal).
template <int F> struct DqFmt;
template <> struct DqFmt<MXRT_FMT_E4M3> { static constexpr u32 SIGN = 7, EB = 4, MB = 3, BIAS = 7, FAST_LO = 10, FAST_HI = 246, WIN_LO = 10, WIN_HI = 134; };
template <> struct DqFmt<MXRT_FMT_E5M2> { static constexpr u32 SIGN = 7, EB = 5, MB = 2, BIAS = 15, FAST_LO = 17, FAST_HI = 238, WIN_LO = 17, WIN_HI = 142; };
template <> struct DqFmt<MXRT_FMT_E2M3> { static constexpr u32 SIGN = 5, EB = 2, MB = 3, BIAS = 1, FAST_LO = 4, FAST_HI = 252, WIN_LO = 0, WIN_HI = 255; };
template <> struct DqFmt<MXRT_FMT_E3M2> { static constexpr u32 SIGN = 5, EB = 3, MB = 2, BIAS = 3, FAST_LO = 5, FAST_HI = 250, WIN_LO = 0, WIN_HI = 255; };
template <> struct DqFmt<MXRT_FMT_E2M1> { static constexpr u32 SIGN = 3, EB = 2, MB = 1, BIAS = 1, FAST_LO = 2, FAST_HI = 252, WIN_LO = 10, WIN_HI = 134; };

// Output formats: precision P (hidden bit included), smallest normal and largest exponent, bias, NaN, Inf, sign bit.
template <int O> struct DqOut;
template <> struct DqOut<MXRT_OUT_F32> { static constexpr i32 P = 24, EMIN = -126, EMAX = 127, BIAS = 127; static constexpr u32 NAN_ = 0x7FC00000u, INF = 0x7F800000u, SIGN = 31; };
template <> struct DqOut<MXRT_OUT_BF16> { static constexpr i32 P = 8, EMIN = -126, EMAX = 127, BIAS = 127; static constexpr u32 NAN_ = 0x7FC0u, INF = 0x7F80u, SIGN = 15; };
template <> struct DqOut<MXRT_OUT_F16> { static constexpr i32 P = 11, EMIN = -14, EMAX = 15, BIAS = 15; static constexpr u32 NAN_ = 0x7E00u, INF = 0x7C00u, SIGN = 15; };

// The code's magnitude as M * 2^X (M < 16 an integer): returns 0 for a finite value, 1 for NaN, 2 for Inf.
template <int F>
MXRT_DEVICE u32 dq_split(u32 c, u32& m, i32& x) {
  if constexpr (F == MXRT_FMT_E4M3) {
    const u32 e = (c >> 3) & 15u, f = c & 7u;
    if ((c & 0x7Fu) == 0x7Fu) return 1u;
    m = e ? 8u + f : f;
    x = e ? (i32)e - 10 : -9;
  } else if constexpr (F == MXRT_FMT_E5M2) {
    const u32 e = (c >> 2) & 31u, f = c & 3u;
    if (e == 31u) return f ? 1u : 2u;
    m = e ? 4u + f : f;
    x = e ? (i32)e - 17 : -16;
  } else if constexpr (F == MXRT_FMT_E2M3) {
    const u32 e = (c >> 3) & 3u, f = c & 7u;
    m = e ? 8u + f : f;
    x = e ? (i32)e - 4 : -3;
  } else if constexpr (F == MXRT_FMT_E3M2) {
    const u32 e = (c >> 2) & 7u, f = c & 3u;
    m = e ? 4u + f : f;
    x = e ? (i32)e - 5 : -4;
  } else {
    MXRT_STATIC_ASSERT(F == MXRT_FMT_E2M1, "dq_split: an MX element format");
    const u32 e = (c >> 1) & 3u, f = c & 1u;
    m = e ? 2u + f : f;
    x = e ? (i32)e - 2 : -1;
  }
  return 0u;
}

// The exact fp32 value of a code (normal, zero or special).
template <int F>
MXRT_DEVICE float dq_decode_f32(u32 c) {
  u32 m = 0;
  i32 x = 0;
  const u32 sign = ((c >> DqFmt<F>::SIGN) & 1u) << 31;
  const u32 sp = dq_split<F>(c, m, x);
  if (sp) return mxrt_f32_from_bits(sign | (sp == 1u ? 0x7FC00000u : 0x7F800000u));
  return mxrt_f32_from_bits(mxrt_bits_from_f32((float)m * mxrt_pow2(x)) | sign);
}

// Any code, any scale byte. M has at most 4 significant bits (fewer than every output's precision), so only a
// subnormal result rounds.
template <int F, int O>
MXRT_DEVICE u32 dq_exact(u32 c, u32 s) {
  typedef DqOut<O> D;
  const u32 sign = ((c >> DqFmt<F>::SIGN) & 1u) << D::SIGN;
  if (s == 255u) return D::NAN_;
  u32 m = 0;
  i32 x = 0;
  const u32 sp = dq_split<F>(c, m, x);
  if (sp == 1u) return sign | D::NAN_;
  if (sp == 2u) return sign | D::INF;
  if (m == 0u) return sign;
  const i32 t = x + (i32)s - 127;  // value = m * 2^t
  const i32 msb = 31 - mxrt_clz(m);
  const i32 e = msb + t;  // unbiased exponent of the value
  if (e > D::EMAX) return sign | D::INF;
  if (e >= D::EMIN)
    return sign | ((u32)(e + D::BIAS) << (D::P - 1)) | ((m << (D::P - 1 - msb)) & ((1u << (D::P - 1)) - 1u));
  const i32 d = (D::EMIN - (D::P - 1)) - t;  // right shift onto the subnormal grid
  if (d <= 0) return sign | (m << -d);
  if (d > 4) return sign;  // m < 16: below half the smallest subnormal
  u32 r = m >> d;
  const u32 rem = m & ((1u << d) - 1u), half = 1u << (d - 1);
  if (rem > half || (rem == half && (r & 1u))) r += 1u;
  return sign | r;  // r == 2^(P-1) is the smallest normal: the same encoding
}

// The bit route (float32 / bfloat16 out, s in [FAST_LO, FAST_HI]): a normal code's exponent and mantissa fields
// move into the output's with the scale added to the exponent (one shift, one add); a subnormal code is its small
// integer times a normal power of two (exact), then truncated to the output width (exact: at most 3 significant
// bits). The per-element work of the GPU kernel's common case, no table.
template <int F, int O>
MXRT_DEVICE u32 dq_bits(u32 c, u32 s) {
  typedef DqFmt<F> T;
  typedef DqOut<O> D;
  MXRT_STATIC_ASSERT(O == MXRT_OUT_F32 || O == MXRT_OUT_BF16, "dq_bits: float32 or bfloat16 out (fp32's exponent)");
  constexpr u32 W = (u32)D::P - 1u;
  const u32 mag = c & ((1u << (T::EB + T::MB)) - 1u);
  const u32 sign = ((c >> T::SIGN) & 1u) << D::SIGN;
  if constexpr (F == MXRT_FMT_E4M3) {
    if (mag == 0x7Fu) return sign | D::NAN_;
  } else if constexpr (F == MXRT_FMT_E5M2) {
    if ((mag >> 2) == 31u) return sign | ((mag & 3u) ? D::NAN_ : D::INF);
  }
  if (mag >> T::MB) return sign | ((mag << (W - T::MB)) + ((s - T::BIAS) << W));
  const u32 f = mxrt_bits_from_f32((float)mag * mxrt_pow2((i32)s - 126 - (i32)(T::BIAS + T::MB)));
  return sign | (f >> (23u - W));
}

// Any byte of w (4 fp8 codes of format F) a NaN (e4m3: magnitude 0x7F) or Inf / NaN (e5m2: exponent 31) code; 0 for
// the formats without specials. Shared by the dequantizer's gate and the bf16 route's window check.
template <int F>
MXRT_DEVICE u32 mxrt_fp8_special4(u32 w) {
  if constexpr (F == MXRT_FMT_E4M3) {
    const u32 x = w & 0x7F7F7F7Fu;
    return (x + 0x01010101u) & 0x80808080u;
  } else if constexpr (F == MXRT_FMT_E5M2) {
    const u32 x = w & 0x7C7C7C7Cu;
    return (x + 0x04040404u) & 0x80808080u;
  } else {
    return 0u * w;
  }
}

#if defined(MXRT_CUDA)
// 4 finite fp8 codes (bytes of w) -> the bf16x2 pairs (b0, b1) and (b2, b3), each times the bf16x2 multiplier
// `mult`: the magnitude's exponent and mantissa fields moved into bf16 position by one byte permute and a shift of SH
// (4 for e4m3, 3 for e5m2; the value read is the code's times 2^-BIAS, BIAS = 120 / 112: subnormal codes become bf16
// subnormals, which the multiply keeps), the sign byte kept, one exact `mul.rn.bf16x2` per pair by
// mult = 2^(s - 127 + BIAS) (finite for s <= 254 - BIAS). Shared by the bf16 GEMM route and the dequantizer.
template <int SH>
MXRT_DEVICE void mxrt_fp8x4_to_bf16(u32 w, u32 mult, u32& lo, u32& hi) {
  const u32 mag = w & 0x7F7F7F7Fu;
  const u32 xl = (__byte_perm(mag, 0u, 0x1404u) >> SH) | (__byte_perm(w, 0u, 0x1404u) & 0x80008000u);
  const u32 xh = (__byte_perm(mag, 0u, 0x3424u) >> SH) | (__byte_perm(w, 0u, 0x3424u) & 0x80008000u);
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(lo) : "r"(xl), "r"(mult));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(hi) : "r"(xh), "r"(mult));
}
#endif

// The fast route: v = the code's exact fp32 value (dq_decode_f32), s in [FAST_LO, FAST_HI].
template <int O>
MXRT_DEVICE u32 dq_fast(float v, u32 s) {
  const float y = v * mxrt_pow2((i32)s - 127);
  if constexpr (O == MXRT_OUT_F32)
    return mxrt_bits_from_f32(y);
  else
    return mxrt_f32_to_16_bits<O>(y);
}
