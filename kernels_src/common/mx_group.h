// mx_group.h: helpers of the grouped quantizers (kernels_src/quant/quantize_mx_grouped*.hip,
// quantize_mx_dual_grouped.hip): group lookup in shared memory, a 4-lane max, and element encoders with an
// exact hardware fast path for fp8 on sm_89+. Bit-exact with mxrt.formats.mx (same contract as mx_codecs.h).
#pragma once
#include "mx_block.h"

// Most groups a launch may have (the offsets live in static shared memory): MXRT_MAX_GROUPS of mx_codes.h
// (mxrt/codes.py GROUPED_MAX_GROUPS, which mxrt/ops/grouped.py checks).
#define MXG_MAX_GROUPS MXRT_MAX_GROUPS
// Scale byte of a block holding only padding (Primus-Turbo grouped convention, MX_REFERENCE.md 2.3).
#define MXG_PAD_SCALE 127u

// 8 bytes, stored as one vector access.
struct __attribute__((aligned(8))) mxg_u32x2 {
  u32 x, y;
};

// ---- group lookup -----------------------------------------------------------------------------------------
// offs: non-decreasing [G+1] with offs[0] == 0 <= r. Returns the largest g in [0, G] with offs[g] <= r, i.e. the
// group that owns row r (empty groups are skipped: their successor has the same start), or G past the end.
MXRT_DEVICE i32 mxg_find_group(const i32* offs, i32 num_groups, i32 r) {
  i32 lo = 0, hi = num_groups;
  while (lo < hi) {
    const i32 mid = (lo + hi + 1) >> 1;
    if (offs[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Copy rows of the int64 offsets buffer written by quantize_mx_grouped_offsets into shared int32 arrays
// (every value is <= the host upper bound, which the launcher checked to fit int32). NT: threads per block.
template <u32 NT>
MXRT_DEVICE void mxg_load_offsets(const i64* offs, i32 num_groups, i32 row, i32* dst) {
  for (u32 i = MXRT_TID_X; i <= (u32)num_groups; i += NT) dst[i] = (i32)offs[(u32)row * (u32)(num_groups + 1) + i];
}

// ---- max over the 4 lanes of a quad (lanes 4j..4j+3 of a warp / wave) --------------------------------------
// Every lane of the warp must call it (no lane may have exited).
MXRT_DEVICE u32 mxg_quad_max(u32 v) {
#if defined(MXRT_CUDA)
  u32 o;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=r"(o) : "r"(v));
  v = o > v ? o : v;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=r"(o) : "r"(v));
  return o > v ? o : v;
#else
  // ds_swizzle bit mode: and_mask 0x1F, xor_mask in bits 14:10 (lanes within groups of 32)
  u32 o = (u32)__builtin_amdgcn_ds_swizzle((i32)v, 0x041F);
  v = o > v ? o : v;
  o = (u32)__builtin_amdgcn_ds_swizzle((i32)v, 0x081F);
  return o > v ? o : v;
#endif
}

// ---- element encoders -------------------------------------------------------------------------------------
// Fast path (NVIDIA sm_89+, e4m3/e5m2): y = x / 2^e is formed exactly by subtracting e from the fp32 exponent
// field, then cvt.rn.satfinite.{e4m3,e5m2}x2.f32 rounds it to nearest even with saturation, which is the
// reference's RNE(saturate(y)) because RNE is monotone. It is taken only when e >= BIAS + MBITS - 126: then
// every fp32 subnormal x (and every x whose y would be an fp32 subnormal, E <= e) has |y| below half the
// smallest element subnormal, so its code is the signed zero that the bit trick gives. The scale rules keep
// E - e <= 127 + EMAX (no exponent overflow); blocks with scale 0xFF never get here.
#if defined(MXRT_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define MXG_HW_FP8 1
#else
#define MXG_HW_FP8 0
#endif

template <class F>
MXRT_DEVICE bool mxg_fast_ok(i32 e) {
  return MXG_HW_FP8 && F::BITS == 8 && e >= F::BIAS + F::MBITS - 126;
}

// fp32 bits of x / 2^e (fast-path precondition), or the signed zero when the result rounds to zero anyway.
MXRT_DEVICE u32 mxg_scaled_bits(u32 xb, i32 e, u32 emin) {
  const u32 E = (xb >> 23) & 0xFFu;
  return E > emin ? xb - ((u32)e << 23) : (xb & 0x80000000u);
}

// Two codes (a in the high byte, b in the low byte) of the scaled fp32 values a, b.
template <class F>
MXRT_DEVICE u32 mxg_cvt2(u32 a, u32 b) {
#if MXG_HW_FP8
  unsigned short r;
  if (F::MBITS == 3) {
    asm("{.reg .f32 fa, fb;\n mov.b32 fa, %1;\n mov.b32 fb, %2;\n cvt.rn.satfinite.e4m3x2.f32 %0, fa, fb;}"
        : "=h"(r)
        : "r"(a), "r"(b));
  } else {
    asm("{.reg .f32 fa, fb;\n mov.b32 fa, %1;\n mov.b32 fb, %2;\n cvt.rn.satfinite.e5m2x2.f32 %0, fa, fb;}"
        : "=h"(r)
        : "r"(a), "r"(b));
  }
  return (u32)r;
#else
  return 0u * a * b;  // never called: mxg_fast_ok is false
#endif
}

// Codes of N elements (N a multiple of 8) under scale byte sb, packed little-endian into words: 4 codes per
// word, or 8 nibbles per word for 4-bit formats (even element in the low nibble). Same result as
// mxrt_encode_block of mx_block.h.
template <class F, int N>
MXRT_DEVICE void mxg_encode(const u32* bits, u32 sb, u32* words) {
  constexpr i32 PER_WORD = F::BITS == 4 ? 8 : 4;
  constexpr i32 SHIFT = F::BITS == 4 ? 4 : 8;
  const i32 e = (i32)sb - 127;
  if (sb == MXRT_E8M0_NAN) {
    u32 w = 0;
#pragma unroll
    for (int j = 0; j < PER_WORD; ++j) w |= F::NAN_CODE << (SHIFT * j);
#pragma unroll
    for (int i = 0; i < N / PER_WORD; ++i) words[i] = w;
    return;
  }
  if (mxg_fast_ok<F>(e)) {
    const u32 emin = e > 0 ? (u32)e : 0u;
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const u32 lo = mxg_cvt2<F>(mxg_scaled_bits(bits[4 * i + 1], e, emin), mxg_scaled_bits(bits[4 * i], e, emin));
      const u32 hi =
          mxg_cvt2<F>(mxg_scaled_bits(bits[4 * i + 3], e, emin), mxg_scaled_bits(bits[4 * i + 2], e, emin));
      words[i] = lo | (hi << 16);
    }
    return;
  }
#pragma unroll
  for (int w = 0; w < N / PER_WORD; ++w) {
    u32 acc = 0;
#pragma unroll
    for (int j = 0; j < PER_WORD; ++j) acc |= mxrt_encode_scaled<F>(bits[w * PER_WORD + j], e) << (SHIFT * j);
    words[w] = acc;
  }
}
