// kernel   dequantize_mx                                                              (extern "C")
// computes out[r,j] = decode(q[r,j]) * 2^(s[r,j/32] - 127) rounded once (RNE, subnormals kept) to OUT_DTYPE for
//          j < k (NaN where the scale byte is 0xFF), 0 for k <= j < ldo (the GEMM workspaces' K padding); bitwise
//          the numpy twin mxrt.formats.dequantize_mx (NaN stays NaN; its sign and payload are unspecified). GATE=1 also sets
//          gate[0] |= 1 when a block lies outside the window where a bf16 GEMM of the result is exact (a scale byte
//          outside e4m3 / e2m1 [10, 134], e5m2 [17, 142], 255 allowed; a NaN / Inf code in a finite block)
// args     const u8* q [rows, row bytes] (fp8: k bytes; e2m1: ceil(k/2), even j in the low nibble) | const u8* s
//          (row-major [rows, kbs] or layout SL) | void* out [rows, ldo] of OUT_DTYPE | u32* gate (GATE=1) |
//          u32 rows, u32 k, u32 ldo, u32 kbs | u32 flags (DQ_VEC_IN: code rows 16-byte (fp8) / 8-byte (e2m1)
//          aligned and k % 16 == 0; DQ_VEC_OUT: out 16-byte aligned and ldo * sizeof(OUT) % 16 == 0)
// grid     (min(ceil(rows * ceil(ldo/16) / THREADS), 2^20),1,1)   block (THREADS,1,1)   smem 1 KB (decode table)
//          grid-stride loop over 16-element chunks, one thread per chunk (one scale byte, one code load)
// defines  THREADS, EFMT (MXRT_FMT_*), OUT_DTYPE (MXRT_OUT_*), SL (MXRT_SCALE_LAYOUT_* 0..5), GATE (0 / 1)
// requires ldo >= k, rows * kbs and the scale storage < 2^31; gate zeroed by the caller    checked by mxrt/ops/dequant.py
#include "../common/mx_dequant.h"
#include "../common/scale_layouts.h"

#if defined(MXRT_CUDA)
#define DQ_NBID_X ((u32)gridDim.x)
MXRT_DEVICE void dq_flag(u32* p) { atomicOr(p, 1u); }
#else
#define DQ_NBID_X ((u32)(__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()))
MXRT_DEVICE void dq_flag(u32* p) { __atomic_fetch_or(p, 1u, __ATOMIC_RELAXED); }
#endif

struct __attribute__((aligned(8))) dq_u32x2 {
  u32 x, y;
};

#if !defined(THREADS) || !defined(EFMT) || !defined(OUT_DTYPE) || !defined(SL) || !defined(GATE)
#error "THREADS, EFMT, OUT_DTYPE, SL and GATE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024 && THREADS >= 256, "THREADS: 256..1024, a multiple of 64");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");

#define DQ_VEC_IN 1u
#define DQ_VEC_OUT 2u

typedef DqFmt<EFMT> Fmt;
#if GATE
MXRT_STATIC_ASSERT(EFMT == MXRT_FMT_E4M3 || EFMT == MXRT_FMT_E5M2 || EFMT == MXRT_FMT_E2M1, "GATE: a GEMM format");
#endif

// any byte of w a NaN (e4m3: magnitude 0x7F) or Inf / NaN (e5m2: exponent 31) code
MXRT_DEVICE u32 dq_special4(u32 w) {
#if EFMT == MXRT_FMT_E4M3
  const u32 x = w & 0x7F7F7F7Fu;
  return (x + 0x01010101u) & 0x80808080u;
#elif EFMT == MXRT_FMT_E5M2
  const u32 x = w & 0x7C7C7C7Cu;
  return (x + 0x04040404u) & 0x80808080u;
#else
  return 0u * w;
#endif
}

MXRT_DEVICE u32 dq_scale(const u8* __restrict__ s, u32 r, u32 b, u32 rows, u32 kbs) {
  if constexpr (SL == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
    return s[(u64)MxrtScaleLayout<MXRT_SCALE_LAYOUT_TURBO16X4>(rows, kbs).offset(r, b) << 2];
  else
    return s[MxrtScaleLayout<SL>(rows, kbs).offset(r, b)];
}

extern "C" __global__ void __launch_bounds__(THREADS)
    dequantize_mx(const u8* __restrict__ q, const u8* __restrict__ s, void* __restrict__ out, u32* __restrict__ gate,
                  u32 rows, u32 k, u32 ldo, u32 kbs, u32 flags) {
  constexpr u32 NC = EFMT == MXRT_FMT_E2M1 ? 16u : 256u;  // fp6: bytes above 63 are not codes; their entries are defined anyway
  __shared__ float lut[256];
  for (u32 i = MXRT_TID_X; i < NC; i += THREADS) lut[i] = dq_decode_f32<EFMT>(i);
  mxrt_sync();
  const u32 cpr = (ldo + 15u) / 16u;                     // chunks per row
  const u64 total = (u64)rows * cpr;
  const u64 row_bytes = EFMT == MXRT_FMT_E2M1 ? (k + 1u) / 2u : k;
  u32 bad = 0u;
  for (u64 ci = (u64)MXRT_BID_X * THREADS + MXRT_TID_X; ci < total; ci += (u64)THREADS * DQ_NBID_X) {
    const u32 r = (u32)(ci / cpr), j0 = (u32)(ci % cpr) * 16u;
    u32 o[16];
    if (j0 < k) {
      const u32 sc = dq_scale(s, r, j0 / 32u, rows, kbs);
      // the 16 codes, zero past k
      u32 c[16], sp = 0u;
      const u8* src = q + (u64)r * row_bytes;
      if ((flags & DQ_VEC_IN) && j0 + 16u <= k) {
        if constexpr (EFMT == MXRT_FMT_E2M1) {
          const dq_u32x2 w = *reinterpret_cast<const dq_u32x2*>(src + j0 / 2u);
#pragma unroll
          for (u32 i = 0; i < 8u; ++i) c[i] = (w.x >> (4u * i)) & 15u, c[8u + i] = (w.y >> (4u * i)) & 15u;
        } else {
          const mxrt_u32x4 w = *reinterpret_cast<const mxrt_u32x4*>(src + j0);
          const u32 ww[4] = {w.x, w.y, w.z, w.w};
          if (GATE) sp = dq_special4(w.x) | dq_special4(w.y) | dq_special4(w.z) | dq_special4(w.w);
#pragma unroll
          for (u32 i = 0; i < 16u; ++i) c[i] = (ww[i / 4u] >> (8u * (i % 4u))) & 255u;
        }
      } else {
#pragma unroll
        for (u32 i = 0; i < 16u; ++i) {
          const u32 j = j0 + i;
          if constexpr (EFMT == MXRT_FMT_E2M1)
            c[i] = j < k ? (src[j / 2u] >> (4u * (j % 2u))) & 15u : 0u;
          else
            c[i] = j < k ? src[j] : 0u;
          if (GATE) sp |= dq_special4(c[i]);
        }
      }
      // a NaN block (scale 0xFF) is exact whatever its codes: NaN in, NaN out
      if (GATE) bad |= (u32)(sc != 255u && (sp != 0u || sc < Fmt::WIN_LO || sc > Fmt::WIN_HI));
      if (sc >= Fmt::FAST_LO && sc <= Fmt::FAST_HI) {
#pragma unroll
        for (u32 i = 0; i < 16u; ++i) o[i] = dq_fast<OUT_DTYPE>(lut[c[i]], sc);
      } else {
#pragma unroll
        for (u32 i = 0; i < 16u; ++i) o[i] = dq_exact<EFMT, OUT_DTYPE>(c[i], sc);
      }
#pragma unroll
      for (u32 i = 0; i < 16u; ++i)
        if (j0 + i >= k) o[i] = 0u;
    } else {
#pragma unroll
      for (u32 i = 0; i < 16u; ++i) o[i] = 0u;
    }
    // store
    if constexpr (OUT_DTYPE == MXRT_OUT_F32) {
      u32* dst = reinterpret_cast<u32*>(out) + (u64)r * ldo + j0;
      if ((flags & DQ_VEC_OUT) && j0 + 16u <= ldo) {
#pragma unroll
        for (u32 v = 0; v < 4u; ++v) {
          mxrt_u32x4 w;
          w.x = o[4u * v], w.y = o[4u * v + 1u], w.z = o[4u * v + 2u], w.w = o[4u * v + 3u];
          reinterpret_cast<mxrt_u32x4*>(dst)[v] = w;
        }
      } else {
#pragma unroll
        for (u32 i = 0; i < 16u; ++i)
          if (j0 + i < ldo) dst[i] = o[i];
      }
    } else {
      u16* dst = reinterpret_cast<u16*>(out) + (u64)r * ldo + j0;
      if ((flags & DQ_VEC_OUT) && j0 + 16u <= ldo) {
#pragma unroll
        for (u32 v = 0; v < 2u; ++v) {
          mxrt_u32x4 w;
          w.x = o[8u * v] | (o[8u * v + 1u] << 16), w.y = o[8u * v + 2u] | (o[8u * v + 3u] << 16);
          w.z = o[8u * v + 4u] | (o[8u * v + 5u] << 16), w.w = o[8u * v + 6u] | (o[8u * v + 7u] << 16);
          reinterpret_cast<mxrt_u32x4*>(dst)[v] = w;
        }
      } else {
#pragma unroll
        for (u32 i = 0; i < 16u; ++i)
          if (j0 + i < ldo) dst[i] = (u16)o[i];
      }
    }
  }
  if (GATE && bad) dq_flag(gate);
}
