// mx_codecs.h: device codecs, bit-exact with mxrt/formats/codecs.py and mxrt/formats/scales.py.
//
// Everything works on the integer bits of fp32, so the results do not depend on the compiler's denormal mode
// (hiprtc and NVRTC may flush fp32 subnormals; 2^-127 itself is an fp32 subnormal):
//   - amax is the unsigned max of (bits & 0x7FFFFFFF): for non-negative floats the integer order is the float
//     order, and every NaN pattern is above +Inf, so NaN propagates like numpy's max.
//   - x / 2^e is never formed. |x| = sig * 2^ex with sig < 2^24 an integer, so |x| / 2^e = sig * 2^(ex - e)
//     exactly, and the element code is read off that pair with one integer round-to-nearest-even.
#pragma once
#include "prelude.h"
// Every code a kernel receives (MXRT_FMT_*, MXRT_SCALE_* scale rules, MXRT_IN_*, MXRT_OUT_*, MXRT_SCALE_LAYOUT_*,
// MXRT_FLAG_*, ...), generated from mxrt/codes.py. The scale rule is a run-time value, not a define: it is read
// once per block, and it divides the number of builds by four. The flags bits say the Python launcher checked
// 16-byte alignment of the input rows (VEC_IN), of the rowwise code rows (VEC_OUT), of the colwise ones (VEC_OUT_COL).
#include "mx_codes.h"

// One struct per element format. MAX_MANT * 2^(EMAX - MBITS) is the largest finite value.
//                                   bits  MBITS BIAS EMAX MAX_CODE SIGN_BIT NAN_CODE MAX_MANT LOG2_MAX_MANT
#define MXRT_DEFINE_FMT(NAME, B, MB, BI, EM, MC, SB, NC, MM, LMM) \
  struct NAME {                                                  \
    static constexpr i32 BITS = B;                               \
    static constexpr i32 MBITS = MB;                             \
    static constexpr i32 BIAS = BI;                              \
    static constexpr i32 EMAX = EM;                              \
    static constexpr u32 MAX_CODE = MC;                          \
    static constexpr u32 SIGN_BIT = SB;                          \
    static constexpr u32 NAN_CODE = NC;                          \
    static constexpr u32 MAX_MANT = MM;                          \
    static constexpr i32 LOG2_MAX_MANT = LMM;                    \
  };
MXRT_DEFINE_FMT(FmtE4M3, 8, 3, 7, 8, 0x7E, 0x80, 0x7F, 14, 3)  // 448   = 14 * 2^5,  NaN 0x7F
MXRT_DEFINE_FMT(FmtE5M2, 8, 2, 15, 15, 0x7B, 0x80, 0x7E, 7, 2)  // 57344 = 7 * 2^13,  NaN 0x7E
MXRT_DEFINE_FMT(FmtE2M3, 6, 3, 1, 2, 0x1F, 0x20, 0x00, 15, 3)  // 7.5   = 15 * 2^-1, no NaN: 0
MXRT_DEFINE_FMT(FmtE3M2, 6, 2, 3, 4, 0x1F, 0x20, 0x00, 7, 2)   // 28    = 7 * 2^2,   no NaN: 0
MXRT_DEFINE_FMT(FmtE2M1, 4, 1, 1, 2, 0x07, 0x08, 0x00, 3, 1)   // 6     = 3 * 2^1,   no NaN: 0
#undef MXRT_DEFINE_FMT

template <int FMT_ID> struct MxrtFmt;
template <> struct MxrtFmt<MXRT_FMT_E4M3> { typedef FmtE4M3 type; };
template <> struct MxrtFmt<MXRT_FMT_E5M2> { typedef FmtE5M2 type; };
template <> struct MxrtFmt<MXRT_FMT_E2M3> { typedef FmtE2M3 type; };
template <> struct MxrtFmt<MXRT_FMT_E3M2> { typedef FmtE3M2 type; };
template <> struct MxrtFmt<MXRT_FMT_E2M1> { typedef FmtE2M1 type; };

#define MXRT_E8M0_NAN 0xFFu

// ---- input loads: the exact fp32 bit pattern of a bf16 / fp16 / fp32 value --------------------------------

MXRT_DEVICE u32 mxrt_bf16_bits_to_f32_bits(u32 h) { return h << 16; }

MXRT_DEVICE u32 mxrt_f16_bits_to_f32_bits(u32 h) {
  const u32 s = (h & 0x8000u) << 16;
  const u32 e = (h >> 10) & 0x1Fu;
  const u32 m = h & 0x3FFu;
  if (e == 31) return s | 0x7F800000u | (m << 13);  // Inf, NaN (payload kept)
  if (e != 0) return s | ((e + 112u) << 23) | (m << 13);
  if (m == 0) return s;
  const i32 p = 31 - mxrt_clz(m);  // fp16 subnormal m * 2^-24 = 1.f * 2^(p - 24): an fp32 normal
  return s | ((u32)(p + 103) << 23) | ((m << (23 - p)) & 0x7FFFFFu);
}

// ---- E8M0 scale from the fp32 amax (MX_REFERENCE.md section 2; mxrt.formats.scales.compute_scales) ------

template <class F>
MXRT_DEVICE u32 mxrt_e8m0_from_amax_bits(u32 a, i32 mode) {
  if (a - 0x00800000u < 0x7F000000u) {
    // a normal amax (exponent field E in [1, 254], the common case): every rule is e = E + c + (mantissa > t),
    // the rules below with sig = 1.mantissa (24 bits): FLOOR never rounds up (t = all ones), CEIL whenever a
    // mantissa bit is set, EVEN when adding half an element ulp carries into E, RCEIL when MAX_MANT * 2^D < sig
    // (D = 23 - LOG2_MAX_MANT: MAX_MANT * 2^D has sig's bit length). c and t depend on the run-time mode only
    // (warp-uniform: ptxas selects them on the uniform datapath); per block a shift, a mask, a compare, an add and
    // the clamp.
    constexpr i32 D = 23 - F::LOG2_MAX_MANT;
    const bool rceil = mode != MXRT_SCALE_FLOOR && mode != MXRT_SCALE_CEIL && mode != MXRT_SCALE_EVEN;
    const u32 t = mode == MXRT_SCALE_FLOOR  ? 0x7FFFFFu
                  : mode == MXRT_SCALE_CEIL ? 0u
                  : mode == MXRT_SCALE_EVEN ? 0x7FFFFFu - (1u << (22 - F::MBITS))
                                            : (F::MAX_MANT << D) - 0x800000u;
    const i32 c = rceil ? D - 150 - F::EMAX + F::MBITS : -127 - F::EMAX;
    i32 e = (i32)(a >> 23) + c + (i32)((a & 0x7FFFFFu) > t);
    e = e < -127 ? -127 : (e > 127 ? 127 : e);
    return (u32)(e + 127);
  }
  if (a >= 0x7F800000u) return MXRT_E8M0_NAN;  // NaN or Inf in the block
  if (a == 0) return 0;                        // all-zero block
  i32 e;
  if (mode == MXRT_SCALE_FLOOR) {
    e = (i32)(a >> 23) - 127 - F::EMAX;
  } else if (mode == MXRT_SCALE_CEIL) {
    e = (i32)(a >> 23) - 127 + ((a & 0x7FFFFFu) != 0) - F::EMAX;
  } else if (mode == MXRT_SCALE_EVEN) {
    const u32 r = (a + (1u << (22 - F::MBITS))) & 0xFF800000u;  // no overflow: a <= 0x7F7FFFFF
    e = (i32)(r >> 23) - 127 - F::EMAX;
  } else {
    // RCEIL: smallest e with MAX_MANT * 2^(EMAX - MBITS + e) >= sig * 2^ex, i.e. e = c + ex - EMAX + MBITS
    // with c the smallest integer such that MAX_MANT * 2^c >= sig.
    const u32 E = a >> 23;
    const u32 sig = E ? ((a & 0x7FFFFFu) | 0x800000u) : a;
    const i32 ex = (i32)(E ? E : 1u) - 150;
    const i32 d = (31 - mxrt_clz(sig)) - F::LOG2_MAX_MANT;  // MAX_MANT * 2^d has sig's bit length
    const bool below = d >= 0 ? (F::MAX_MANT << d) < sig : F::MAX_MANT < (sig << -d);
    e = d + (i32)below + ex - F::EMAX + F::MBITS;
  }
  e = e < -127 ? -127 : (e > 127 ? 127 : e);
  return (u32)(e + 127);
}

// ---- element code of x / 2^e, round to nearest even, saturating (mxrt.formats.mx.encode_with_scales) ----
// xb: fp32 bits of a finite x; e: scale exponent in [-127, 127]. Returns the code with its sign bit.
template <class F>
MXRT_DEVICE u32 mxrt_encode_scaled(u32 xb, i32 e) {
  const u32 sign = (xb >> 31) ? F::SIGN_BIT : 0u;
  const u32 E = (xb >> 23) & 0xFFu;
  const u32 sig = E ? ((xb & 0x7FFFFFu) | 0x800000u) : (xb & 0x7FFFFFu);
  if (sig == 0) return sign;  // +-0 keeps its sign, as numpy's signbit does
  const i32 t = (i32)(E ? E : 1u) - 150 - e;  // |x| / 2^e = sig * 2^t, exactly
  const i32 L = 31 - mxrt_clz(sig) + t;       // floor(log2 |x / 2^e|)
  if (L > F::EMAX) return sign | F::MAX_CODE;  // >= 2^(EMAX+1) > max: saturate
  const i32 ee = L > 1 - F::BIAS ? L : 1 - F::BIAS;  // element exponent, subnormals at the minimum
  const i32 sh = t - ee + F::MBITS;                  // n = RNE(sig * 2^sh) counts quanta 2^(ee - MBITS)
  u32 n;
  if (sh >= 0) {
    n = sig << sh;  // sh <= MBITS - floor(log2 sig), so n < 2^(MBITS + 1)
  } else if (sh < -25) {
    n = 0;  // sig < 2^24 <= half a quantum
  } else {
    const i32 rs = -sh;
    const u32 q = sig >> rs;
    const u32 rem = sig & ((1u << rs) - 1u);
    const u32 half = 1u << (rs - 1);
    n = q + ((rem > half) || (rem == half && (q & 1u)));
  }
  u32 code = ((u32)(ee + F::BIAS - 1) << F::MBITS) + n;  // a mantissa carry moves into the exponent field
  if (code > F::MAX_CODE) code = F::MAX_CODE;           // RNE is monotone: rounding past max saturates
  return sign | code;
}
