// kernel   dequantize_mx                                                              (extern "C")
// computes out[r,j] = decode(q[r,j]) * 2^(s[r,j/32] - 127) rounded once (RNE, subnormals kept) to OUT_DTYPE for
//          j < k (NaN where the scale byte is 0xFF), 0 for k <= j < ldo (the GEMM workspaces' K padding); bitwise
//          the numpy twin mxrt.formats.dequantize_mx (NaN stays NaN; its sign and payload are unspecified). GATE=1 also sets
//          gate[0] |= 1 when a block lies outside the window where a bf16 GEMM of the result is exact (a scale byte
//          outside e4m3 / e2m1 [10, 134], e5m2 [17, 142], 255 allowed; a NaN / Inf code in a finite block)
// args     const u8* q [rows, row bytes] (fp8: k bytes; e2m1: ceil(k/2), even j in the low nibble) | const u8* s
//          (row-major [rows, kbs] or layout SL) | void* out [rows, ldo] of OUT_DTYPE | u32* gate (GATE=1) |
//          u32 rows, u32 k, u32 ldo, u32 kbs | u32 flags (DQ_VEC_IN: code base 16-byte aligned, k % 16 == 0;
//          DQ_VEC_OUT: out 16-byte aligned and ldo * sizeof(OUT) % 16 == 0)
// grid     (min(ceil(rows * ceil(ldo/CH) / (THREADS * 32/CH)), 2^20),1,1)   block (THREADS,1,1)   smem 0
//          grid-stride loop over CH-element chunks, 32/CH per thread in flight (one scale byte, one code load each)
// defines  THREADS, EFMT (MXRT_FMT_*), OUT_DTYPE (MXRT_OUT_*), SL (MXRT_SCALE_LAYOUT_* 0..5), GATE (0 / 1), CH (16)
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
#if !defined(CH)
#define CH 16u  // elements per chunk
#endif
MXRT_STATIC_ASSERT(CH == 8u || CH == 16u, "CH: 8 or 16 elements per chunk");
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024 && THREADS >= 256, "THREADS: 256..1024, a multiple of 64");
MXRT_STATIC_ASSERT(OUT_DTYPE >= 0 && OUT_DTYPE <= 2, "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");

#define DQ_VEC_IN 1u
#define DQ_VEC_OUT 2u

typedef DqFmt<EFMT> Fmt;
#if GATE
MXRT_STATIC_ASSERT(EFMT == MXRT_FMT_E4M3 || EFMT == MXRT_FMT_E5M2 || EFMT == MXRT_FMT_E2M1, "GATE: a GEMM format");
#endif

MXRT_DEVICE u32 dq_scale(const u8* __restrict__ s, u32 r, u32 b, u32 rows, u32 kbs) {
  if constexpr (SL == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
    return s[(u64)MxrtScaleLayout<MXRT_SCALE_LAYOUT_TURBO16X4>(rows, kbs).offset(r, b) << 2];
  else
    return s[MxrtScaleLayout<SL>(rows, kbs).offset(r, b)];
}

// One CH-element chunk: its row, first column, scale byte and codes (fp8 / fp6 bytes, or e2m1 nibbles), packed.
#define DQ_W (EFMT == MXRT_FMT_E2M1 ? CH / 8u : CH / 4u)  // code words per chunk
#define DQ_O (OUT_DTYPE == MXRT_OUT_F32 ? CH : CH / 2u)   // output words per chunk
struct DqChunk {
  u32 r, j0, sc, w[DQ_W];
};

// The chunk's codes, zero past k: one vector load (CH code bytes, CH / 2 for e2m1) when the row is aligned and the
// chunk whole, else byte loads.
MXRT_DEVICE void dq_load(const u8* __restrict__ q, u64 row_bytes, u32 k, u32 flags, DqChunk& ch) {
  const u8* src = q + (u64)ch.r * row_bytes + (EFMT == MXRT_FMT_E2M1 ? ch.j0 / 2u : ch.j0);
  if ((flags & DQ_VEC_IN) && ch.j0 + CH <= k) {
    if constexpr (DQ_W == 4) {
      const mxrt_u32x4 v = *reinterpret_cast<const mxrt_u32x4*>(src);
      ch.w[0] = v.x, ch.w[1] = v.y, ch.w[2] = v.z, ch.w[3] = v.w;
    } else if constexpr (DQ_W == 2) {
      const dq_u32x2 v = *reinterpret_cast<const dq_u32x2*>(src);
      ch.w[0] = v.x, ch.w[1] = v.y;
    } else {
      ch.w[0] = *reinterpret_cast<const u32*>(src);
    }
    return;
  }
#pragma unroll
  for (u32 i = 0; i < DQ_W; ++i) ch.w[i] = 0u;
#pragma unroll
  for (u32 i = 0; i < CH; ++i) {
    const u32 j = ch.j0 + i;
    if constexpr (EFMT == MXRT_FMT_E2M1) {
      if (j < k) ch.w[i / 8u] |= ((src[i / 2u] >> (4u * (i % 2u))) & 15u) << (4u * (i % 8u));
    } else {
      if (j < k) ch.w[i / 4u] |= (u32)src[i] << (8u * (i % 4u));
    }
  }
}

MXRT_DEVICE u32 dq_code(const DqChunk& ch, u32 i) {
  if constexpr (EFMT == MXRT_FMT_E2M1)
    return (ch.w[i / 8u] >> (4u * (i % 8u))) & 15u;
  else
    return (ch.w[i / 4u] >> (8u * (i % 4u))) & 255u;
}

MXRT_DEVICE void dq_store(void* __restrict__ out, u32 ldo, u32 flags, const DqChunk& ch, const u32* o) {
  if constexpr (OUT_DTYPE == MXRT_OUT_F32) {
    u32* dst = reinterpret_cast<u32*>(out) + (u64)ch.r * ldo + ch.j0;
    if ((flags & DQ_VEC_OUT) && ch.j0 + CH <= ldo) {
#pragma unroll
      for (u32 v = 0; v < CH / 4u; ++v) {
        mxrt_u32x4 w;
        w.x = o[4u * v], w.y = o[4u * v + 1u], w.z = o[4u * v + 2u], w.w = o[4u * v + 3u];
        reinterpret_cast<mxrt_u32x4*>(dst)[v] = w;
      }
    } else {
#pragma unroll
      for (u32 i = 0; i < CH; ++i)
        if (ch.j0 + i < ldo) dst[i] = o[i];
    }
  } else {
    u16* dst = reinterpret_cast<u16*>(out) + (u64)ch.r * ldo + ch.j0;
    if ((flags & DQ_VEC_OUT) && ch.j0 + CH <= ldo) {
#pragma unroll
      for (u32 v = 0; v < CH / 8u; ++v) {
        mxrt_u32x4 w;
        w.x = o[4u * v], w.y = o[4u * v + 1u], w.z = o[4u * v + 2u], w.w = o[4u * v + 3u];
        reinterpret_cast<mxrt_u32x4*>(dst)[v] = w;
      }
    } else {
#pragma unroll
      for (u32 i = 0; i < CH; ++i)
        if (ch.j0 + i < ldo) dst[i] = (u16)(o[i / 2u] >> (16u * (i % 2u)));
    }
  }
}

// One element of the common case (scale byte in the fast window): the bit route for float32 / bfloat16, the fp32
// product for float16.
MXRT_DEVICE u32 dq_fast_elem(u32 c, u32 sc) {
  if constexpr (OUT_DTYPE == MXRT_OUT_F16)
    return dq_fast<OUT_DTYPE>(dq_decode_f32<EFMT>(c), sc);
  else
    return dq_bits<EFMT, OUT_DTYPE>(c, sc);
}

// The packed route (CUDA, fp8 -> bfloat16, scale byte in [FAST_LO, 254 - bias], no NaN / Inf code in the chunk; ncu,
// session 10 call 3: the per-element route was issue-bound at 81% SM throughput and 36% DRAM): four codes at a time
// through mxrt_fp8x4_to_bf16 (common/mx_dequant.h, the bf16 GEMM route's conversion: a byte permute, a shift and one
// exact bf16x2 multiply per pair by 2^(s - 127 + bias); subnormal codes included).
#if defined(MXRT_CUDA)
#define DQ_PACKED (OUT_DTYPE == MXRT_OUT_BF16 && (EFMT == MXRT_FMT_E4M3 || EFMT == MXRT_FMT_E5M2))
#else
#define DQ_PACKED 0
#endif
#define DQ_SH (EFMT == MXRT_FMT_E4M3 ? 4 : 3)          // fields into bf16 position
#define DQ_BIAS (EFMT == MXRT_FMT_E4M3 ? 120u : 112u)  // ... read as the code times 2^-bias

#define DQ_UNROLL (32u / CH)  // chunks per thread with their loads in flight together (32 elements)

extern "C" __global__ void __launch_bounds__(THREADS, 4)
    dequantize_mx(const u8* __restrict__ q, const u8* __restrict__ s, void* __restrict__ out, u32* __restrict__ gate,
                  u32 rows, u32 k, u32 ldo, u32 kbs, u32 flags) {
  const u32 cpr = (ldo + CH - 1u) / CH;  // chunks per row
  const u64 total = (u64)rows * cpr;
  const u64 row_bytes = EFMT == MXRT_FMT_E2M1 ? (k + 1u) / 2u : k;
  const u64 nth = (u64)THREADS * DQ_NBID_X;
  // (row, chunk column) of the thread's chunk, stepped by nth chunks without a division in the loop
  const u64 first = (u64)MXRT_BID_X * THREADS + MXRT_TID_X;
  u32 r = (u32)(first / cpr), cc = (u32)(first % cpr);
  const u32 dr = (u32)(nth / cpr), dc = (u32)(nth % cpr);
  u32 bad = 0u;
  for (u64 c0 = first; c0 < total; c0 += DQ_UNROLL * nth) {
    DqChunk ch[DQ_UNROLL];
#pragma unroll
    for (u32 u = 0; u < DQ_UNROLL; ++u) {  // every load of the group first
      ch[u].r = c0 + u * nth < total ? r : ~0u;
      ch[u].j0 = cc * CH;
      cc += dc, r += dr;
      if (cc >= cpr) cc -= cpr, r += 1u;
      if (ch[u].r != ~0u && ch[u].j0 < k) {
        ch[u].sc = dq_scale(s, ch[u].r, ch[u].j0 / 32u, rows, kbs);
        dq_load(q, row_bytes, k, flags, ch[u]);
      } else {
        ch[u].sc = 0u;  // K padding: zeros
#pragma unroll
        for (u32 i = 0; i < DQ_W; ++i) ch[u].w[i] = 0u;
      }
    }
#pragma unroll
    for (u32 u = 0; u < DQ_UNROLL; ++u) {
      if (ch[u].r == ~0u) continue;  // past the end (so is every later chunk of the group)
      const u32 sc = ch[u].sc;
      u32 o[DQ_O];  // output words: one per element (float32) or one per pair (16-bit)
      u32 sp = 0u;  // any NaN / Inf code in the chunk (zero codes past k)
#pragma unroll
      for (u32 i = 0; i < DQ_W; ++i) sp |= mxrt_fp8_special4<EFMT>(ch[u].w[i]);
      // a NaN block (scale 0xFF) is exact whatever its codes: NaN in, NaN out
      if (GATE && ch[u].j0 < k) bad |= (u32)(sc != 255u && (sp != 0u || sc < Fmt::WIN_LO || sc > Fmt::WIN_HI));
      // the packed route: 2^(s - 127 + bias) a finite bf16, a whole chunk, finite codes
      const bool packed = DQ_PACKED && sc >= Fmt::FAST_LO && sc <= 254u - DQ_BIAS && ch[u].j0 + CH <= k && sp == 0u;
#if DQ_PACKED
      if (packed) {
        const u32 f = (sc + DQ_BIAS) << 7, f2 = f | (f << 16);  // bf16 2^(s - 127 + bias), twice
#pragma unroll
        for (u32 i = 0; i < DQ_W; ++i) mxrt_fp8x4_to_bf16<DQ_SH>(ch[u].w[i], f2, o[2u * i], o[2u * i + 1u]);
      }
#endif
      if (!packed) {
        u32 e[CH];
        if (sc >= Fmt::FAST_LO && sc <= Fmt::FAST_HI) {
#pragma unroll
          for (u32 i = 0; i < CH; ++i) e[i] = dq_fast_elem(dq_code(ch[u], i), sc);
        } else {
#pragma unroll
          for (u32 i = 0; i < CH; ++i) e[i] = dq_exact<EFMT, OUT_DTYPE>(dq_code(ch[u], i), sc);
        }
        if (ch[u].j0 + CH > k) {
#pragma unroll
          for (u32 i = 0; i < CH; ++i)
            if (ch[u].j0 + i >= k) e[i] = 0u;
        }
        if constexpr (OUT_DTYPE == MXRT_OUT_F32) {
#pragma unroll
          for (u32 i = 0; i < CH; ++i) o[i] = e[i];
        } else {
#pragma unroll
          for (u32 i = 0; i < CH / 2u; ++i) o[i] = e[2u * i] | (e[2u * i + 1u] << 16);
        }
      }
      dq_store(out, ldo, flags, ch[u], o);
    }
  }
  if (GATE && bad) dq_flag(gate);
}
