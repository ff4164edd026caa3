// mx_gemm.h: device helpers shared by the MX GEMM kernels (kernels_src/gemm/): exact element decode, E8M0
// scale factors that stay fp32-normal, fp32 -> bf16/fp16 round-to-nearest-even stores, and the atomics of the
// split-K accumulation (fp32 atomicAdd; packed bf16x2 / f16x2 atomics; a 16-bit compare-and-swap add for an
// element whose pair is not 4-byte aligned).
//
// Numbers and the denormal mode: CuPy compiles with NVRTC -ftz=true, so fp32 subnormals are flushed on CUDA.
// Every value formed here is normal or zero: element values are at least 2^-16 (e5m2 subnormal) and scale factors
// are built by mxrt_pow2 on [-126, 127]. A scale pair with 2^(sa+sb-254) outside [2^-126, 2^127] is applied in two
// normal steps (mxrt_scale_steps); only a final result below 2^-126 is then flushed to zero on CUDA (AMD keeps
// subnormals), which is below every output format's normal range except fp32's subnormals.
#pragma once
#include "mx_codecs.h"

// Output dtypes (define OUT_DTYPE): MXRT_OUT_* of mx_codes.h (mxrt/codes.py GEMM_OUT_DTYPE_CODES).

MXRT_DEVICE float mxrt_f32_from_bits(u32 b) { return __builtin_bit_cast(float, b); }
MXRT_DEVICE u32 mxrt_bits_from_f32(float f) { return __builtin_bit_cast(u32, f); }

// fused multiply-add, one rounding (NVRTC has no __builtin_fmaf)
#if defined(MXRT_CUDA)
MXRT_DEVICE float mxrt_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
MXRT_DEVICE float mxrt_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
#endif

// 2^e for e in [-126, 127] (a normal fp32).
MXRT_DEVICE float mxrt_pow2(i32 e) { return mxrt_f32_from_bits((u32)(e + 127) << 23); }

// Exact value of one element code (fp8 byte, or e2m1 nibble in bits 0..3). NaN codes give NaN, e5m2 +-Inf gives
// +-Inf. Subnormal codes are m * 2^(1-bias-mbits): a small integer times a normal power of two, exact.
template <int FMT>
MXRT_DEVICE float mxrt_decode(u32 c) {
  if constexpr (FMT == MXRT_FMT_E4M3) {
    const u32 e = (c >> 3) & 15u, m = c & 7u, s = (c & 0x80u) << 24;
    if ((c & 0x7Fu) == 0x7Fu) return mxrt_f32_from_bits(0x7FC00000u | s);
    if (e == 0) return mxrt_f32_from_bits(mxrt_bits_from_f32((float)m * 0.001953125f) | s);  // m * 2^-9
    return mxrt_f32_from_bits(s | ((e + 120u) << 23) | (m << 20));
  } else if constexpr (FMT == MXRT_FMT_E5M2) {
    const u32 e = (c >> 2) & 31u, m = c & 3u, s = (c & 0x80u) << 24;
    if (e == 31u) return mxrt_f32_from_bits(s | (m ? 0x7FC00000u : 0x7F800000u));
    if (e == 0) return mxrt_f32_from_bits(mxrt_bits_from_f32((float)m * 1.52587890625e-05f) | s);  // m * 2^-16
    return mxrt_f32_from_bits(s | ((e + 112u) << 23) | (m << 21));
  } else {
    MXRT_STATIC_ASSERT(FMT == MXRT_FMT_E2M1, "mxrt_decode: e4m3, e5m2 or e2m1");
    const u32 e = (c >> 1) & 3u, m = c & 1u, s = (c & 0x8u) << 28;
    if (e == 0) return mxrt_f32_from_bits(m ? (s | 0x3F000000u) : s);  // +-0.5 or +-0
    return mxrt_f32_from_bits(s | ((e + 126u) << 23) | (m << 22));
  }
}

// The two normal factors f1 * f2 = 2^(sa + sb - 254) of a scale pair (both bytes < 0xFF): f1 = 2^clamp(e),
// f2 = 2^clamp(e - clamp(e)), clamps to [-126, 127]. Exact for e in [-252, 254]; below -252 the product of any
// MX partial sum (< 2^37) with 2^e is below fp32's smallest subnormal, so clamping f2 to 2^-126 changes nothing
// after rounding. acc += (partial * f1) * f2 is then exact in both multiplies unless the result over/underflows.
MXRT_DEVICE void mxrt_scale_steps(u32 sa, u32 sb, float& f1, float& f2) {
  const i32 e = (i32)(sa + sb) - 254;
  const i32 e1 = e < -126 ? -126 : (e > 127 ? 127 : e);
  i32 e2 = e - e1;
  e2 = e2 < -126 ? -126 : e2;
  f1 = mxrt_pow2(e1);
  f2 = mxrt_pow2(e2);
}

// fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN, overflow gives +-Inf.
MXRT_DEVICE u32 mxrt_f32_to_bf16_bits(float f) {
  const u32 x = mxrt_bits_from_f32(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return ((x >> 16) | 0x40u) & 0xFFFFu;
  return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}

// fp32 -> fp16 bits, round to nearest even (subnormals included); NaN -> quiet NaN, |x| >= 65520 -> +-Inf.
MXRT_DEVICE u32 mxrt_f32_to_f16_bits(float f) {
  const u32 x = mxrt_bits_from_f32(f);
  const u32 sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00u;
  if (ax >= 0x477FF000u) return sign | 0x7C00u;  // 65520 = 65504 + half an ulp: ties to even go up to Inf
  if (ax >= 0x38800000u) {                       // >= 2^-14: normal fp16
    const u32 r = ax - 0x38000000u;               // exponent rebias 127 -> 15
    return sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
  }
  const u32 e = ax >> 23;
  if (e < 102u) return sign;  // < 2^-25: rounds to zero (2^-25 itself is a tie, to even = 0, handled below too)
  const u32 mant = (ax & 0x7FFFFFu) | 0x800000u, shift = 126u - e;  // units of 2^-24: mant >> shift
  u32 r = mant >> shift;
  const u32 rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) r += 1u;
  return sign | r;
}

template <int OUT>
MXRT_DEVICE u32 mxrt_f32_to_16_bits(float f) {
  return OUT == MXRT_OUT_BF16 ? mxrt_f32_to_bf16_bits(f) : mxrt_f32_to_f16_bits(f);
}

template <int OUT>
MXRT_DEVICE float mxrt_16_bits_to_f32(u32 h) {
  return mxrt_f32_from_bits(OUT == MXRT_OUT_BF16 ? mxrt_bf16_bits_to_f32_bits(h) : mxrt_f16_bits_to_f32_bits(h));
}

#if !defined(MXRT_HOST_TEST)
// ---- atomics (split-K with deterministic=False) -------------------------------------------------------------

MXRT_DEVICE void mxrt_atomic_add_f32(float* p, float v) {
#if defined(MXRT_CUDA)
  atomicAdd(p, v);
#else
  __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

MXRT_DEVICE u32 mxrt_atomic_cas_u32(u32* p, u32 expected, u32 desired) {
#if defined(MXRT_CUDA)
  return atomicCAS(p, expected, desired);
#else
  __hip_atomic_compare_exchange_strong(p, &expected, desired, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                       __HIP_MEMORY_SCOPE_AGENT);
  return expected;  // the value seen: equal to the argument on success
#endif
}

// Two adjacent 16-bit outputs at a 4-byte aligned address: lo is the lower address. One packed atomic where the
// hardware has it (sm_90 bf16x2 / sm_60 f16x2 `red`; gfx942/gfx950 global_atomic_pk_add_bf16/_f16), else a CAS
// loop on the word.
#if defined(MXRT_HIP)
typedef short mxrt_short2 __attribute__((ext_vector_type(2)));
typedef _Float16 mxrt_half2 __attribute__((ext_vector_type(2)));
#endif

template <int OUT>
MXRT_DEVICE void mxrt_atomic_add_pk16(u32* p, float lo, float hi) {
  const u32 packed = mxrt_f32_to_16_bits<OUT>(lo) | (mxrt_f32_to_16_bits<OUT>(hi) << 16);
#if defined(MXRT_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (OUT == MXRT_OUT_BF16)
    asm volatile("red.global.add.noftz.bf16x2 [%0], %1;" ::"l"(p), "r"(packed) : "memory");
  else
    asm volatile("red.global.add.noftz.f16x2 [%0], %1;" ::"l"(p), "r"(packed) : "memory");
#elif defined(MXRT_HIP) && (defined(__gfx942__) || defined(__gfx950__))
  if (OUT == MXRT_OUT_BF16) {
    mxrt_short2 v;
    v.x = (short)(packed & 0xFFFFu);
    v.y = (short)(packed >> 16);
    __builtin_amdgcn_global_atomic_fadd_v2bf16((__attribute__((address_space(1))) mxrt_short2*)p, v);
  } else {
    mxrt_half2 v;
    v.x = __builtin_bit_cast(_Float16, (u16)(packed & 0xFFFFu));
    v.y = __builtin_bit_cast(_Float16, (u16)(packed >> 16));
    __builtin_amdgcn_global_atomic_fadd_v2f16((__attribute__((address_space(1))) mxrt_half2*)p, v);
  }
#else
  u32 old = *(volatile u32*)p, seen;
  do {
    seen = old;
    const float a = mxrt_16_bits_to_f32<OUT>(seen & 0xFFFFu) + mxrt_16_bits_to_f32<OUT>(packed & 0xFFFFu);
    const float b = mxrt_16_bits_to_f32<OUT>(seen >> 16) + mxrt_16_bits_to_f32<OUT>(packed >> 16);
    old = mxrt_atomic_cas_u32(p, seen, mxrt_f32_to_16_bits<OUT>(a) | (mxrt_f32_to_16_bits<OUT>(b) << 16));
  } while (old != seen);
#endif
}

// One 16-bit output whose pair partner belongs to another thread (pairs not 4-byte aligned, n odd): the packed
// atomic of its aligned word with -0.0 in the partner's half, which leaves the partner unchanged (x + -0 == x for
// every x, -0 and NaN included). The op guarantees that every such word lies inside `out` (out 4-byte aligned and
// m*n even; otherwise it accumulates in fp32 and converts, mxrt/ops/gemm_generic.py).
template <int OUT>
MXRT_DEVICE void mxrt_atomic_add_16(u16* p, float v) {
  const u64 addr = (u64)p;
  u32* w = (u32*)(addr & ~(u64)3);
  if (addr & 2u)
    mxrt_atomic_add_pk16<OUT>(w, -0.0f, v);
  else
    mxrt_atomic_add_pk16<OUT>(w, v, -0.0f);
}
#endif  // !MXRT_HOST_TEST
