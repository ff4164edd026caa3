// mx_warp.h: lane-level helpers of the quant kernels, one spelling per target.
//   - "warp" means 32 lanes on every target. On wave64 AMD it is half a wave; the shuffles here never cross
//     a 32-lane group (xor masks < 32, source lanes < 32), so the kernels' lane maps hold on both.
//   - fp32 bit casts, a correctly rounded fp32 multiply and fma (FTZ or not: the callers are exact under both,
//     see mx_block.h), the grid size, 8-byte vectors, and the hardware fp8 conversions where a target has them.
// Host builds: MXRT_HOST_TEST gives the casts and arithmetic (tests/support/codecs_host.cpp); MXRT_HOST_SIMT
// adds the shuffles and the grid size, supplied by the emulator in tests/support/simt_host.cpp.
#pragma once
#include "prelude.h"

// 8 bytes, stored as one vector access.
struct __attribute__((aligned(8))) mxrt_u32x2 {
  u32 x, y;
};

#if defined(MXRT_CUDA)
MXRT_DEVICE u32 mxrt_shfl_xor(u32 v, i32 mask) { return __shfl_xor_sync(0xFFFFFFFFu, v, mask); }
MXRT_DEVICE u32 mxrt_shfl(u32 v, u32 src) { return __shfl_sync(0xFFFFFFFFu, v, (int)src); }
MXRT_DEVICE float mxrt_as_f32(u32 b) { return __uint_as_float(b); }
MXRT_DEVICE u32 mxrt_as_u32(float f) { return __float_as_uint(f); }
MXRT_DEVICE float mxrt_fmul(float a, float b) { return __fmul_rn(a, b); }  // never contracted into an fma
MXRT_DEVICE float mxrt_fadd(float a, float b) { return __fadd_rn(a, b); }  // never contracted into an fma
MXRT_DEVICE float mxrt_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#define MXRT_NBID_X ((u32)gridDim.x)
#define MXRT_NBID_Y ((u32)gridDim.y)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// max(|a|, |b|) of two fp32 bit patterns, NaN-propagating (max.NaN, sm_80+: the canonical NaN 0x7FFFFFFF), never
// flushed (no .ftz). For non-negative floats the float order is the bit order, so a block's amax bits equal the
// integer form's (mx_block.h) except for a NaN's payload; ptxas folds the abs into FMNMX's operands.
#define MXRT_HAS_ABSMAX_F32 1
MXRT_DEVICE u32 mxrt_absmax_bits(u32 a, u32 b) {
  u32 r;
  asm("{\n.reg .f32 x, y;\nabs.f32 x, %1;\nabs.f32 y, %2;\nmax.NaN.f32 %0, x, y;\n}" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The unsigned max of each 16-bit half of a and b (max.u16x2, sm_90+; ptxas pairs them into VIMNMX3.U16x2).
#define MXRT_HAS_MAX_U16X2 1
MXRT_DEVICE u32 mxrt_max_u16x2(u32 a, u32 b) {
  u32 r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
#endif
// fp16 bits -> fp32 bits: the hardware conversion is exact for every finite value and subnormal (no .ftz).
MXRT_DEVICE u32 mxrt_f16_to_f32_bits_fast(u32 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)h));
  return __float_as_uint(f);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// cvt.rn.satfinite.{e4m3,e5m2}x2.f32 d, a, b: a -> the high byte, b -> the low byte; round to nearest even,
// finite values beyond the format clamp to +-max (NaN never reaches it: NaN blocks take the NaN code).
#define MXRT_HAS_CVT_FP8 1
MXRT_DEVICE u32 mxrt_cvt_e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
MXRT_DEVICE u32 mxrt_cvt_e5m2x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
#endif

#elif defined(MXRT_HIP)
MXRT_DEVICE u32 mxrt_lane64() { return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
MXRT_DEVICE u32 mxrt_shfl_xor(u32 v, i32 mask) {
  return (u32)__builtin_amdgcn_ds_bpermute((i32)((mxrt_lane64() ^ (u32)mask) << 2), (i32)v);
}
MXRT_DEVICE u32 mxrt_shfl(u32 v, u32 src) {
  return (u32)__builtin_amdgcn_ds_bpermute((i32)(((mxrt_lane64() & ~31u) | src) << 2), (i32)v);
}
MXRT_DEVICE float mxrt_as_f32(u32 b) { return __builtin_bit_cast(float, b); }
MXRT_DEVICE u32 mxrt_as_u32(float f) { return __builtin_bit_cast(u32, f); }
MXRT_DEVICE float mxrt_fmul(float a, float b) { return a * b; }
MXRT_DEVICE float mxrt_fadd(float a, float b) {
#pragma clang fp contract(off)  // an add without the contract flag: never fused with the product feeding it
  return a + b;
}
MXRT_DEVICE float mxrt_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
#define MXRT_NBID_X ((u32)(__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()))
#define MXRT_NBID_Y ((u32)(__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()))

#else  // MXRT_HOST_TEST
inline float mxrt_as_f32(u32 b) { return __builtin_bit_cast(float, b); }
inline u32 mxrt_as_u32(float f) { return __builtin_bit_cast(u32, f); }
#if defined(MXRT_HOST_FTZ)
// Emulate NVRTC's -ftz=true: subnormal inputs and results become zeros of the same sign.
inline float mxrt_ftz(float v) {
  const u32 b = mxrt_as_u32(v);
  return (b & 0x7F800000u) ? v : mxrt_as_f32(b & 0x80000000u);
}
inline float mxrt_fmul(float a, float b) { return mxrt_ftz(mxrt_ftz(a) * mxrt_ftz(b)); }
inline float mxrt_fadd(float a, float b) { return mxrt_ftz(mxrt_ftz(a) + mxrt_ftz(b)); }
inline float mxrt_fma(float a, float b, float c) { return mxrt_ftz(__builtin_fmaf(mxrt_ftz(a), mxrt_ftz(b), mxrt_ftz(c))); }
#else
inline float mxrt_fmul(float a, float b) { return a * b; }
inline float mxrt_fadd(float a, float b) { return a + b; }
inline float mxrt_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
#endif
#if defined(MXRT_HOST_SIMT)
u32 mxrt_host_shfl(u32 v, u32 src_lane);  // lane src_lane's v, within the caller's 32-lane warp
inline u32 mxrt_shfl(u32 v, u32 src) { return mxrt_host_shfl(v, src); }
inline u32 mxrt_shfl_xor(u32 v, i32 mask) { return mxrt_host_shfl(v, (MXRT_TID_X % 32u) ^ (u32)mask); }
#endif
#endif
