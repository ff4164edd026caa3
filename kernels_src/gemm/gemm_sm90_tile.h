// gemm_sm90_tile.h: the CTA tile of the Hopper MX GEMM kernels (gemm_mx_sm90.hip dense, gemm_mx_grouped_sm90.hip
// grouped): per MX block one fp8 wgmma m64n128k32 into P, acc = fma(P * 2^(sb-127), 2^(sa-127), acc) where a
// stage's scales lie in [64, 190], else promote_wide (exact for any pair, NaN for 255), a per-stage CTA flag; TMA
// code tiles (128-byte swizzle, zero fill past the maps) and plain scale loads in a STAGES-deep mbarrier ring. The
// including file computes its tile (Sm90Job) and calls sm90_smem / sm90_init / sm90_mainloop / sm90_store.
// defines  A_FMT, B_FMT, OUT_DTYPE, ATOMIC, BM, BN, STAGES, DBUF, DIAG (see gemm_mx_sm90.hip's header); SLA, SLB
//          (default 0; the grouped kernel leaves them unset): the scale layout of A / B (MXRT_SCALE_LAYOUT_*, 5 = turbo16x4 as uint32 words),
//          read in place; with a layout, Sm90Job's sa / sb are the storage bases, sa_stride / sb_stride the scale
//          columns ceil(k/32), ya + rows_a / yb + rows_b the matrix rows (the dense kernel only)
#pragma once
#include "../common/mx_gemm.h"
#include "../common/scale_layouts.h"

#ifndef SLA
#define SLA MXRT_SCALE_LAYOUT_NONE
#endif
#ifndef SLB
#define SLB MXRT_SCALE_LAYOUT_NONE
#endif
MXRT_STATIC_ASSERT(SLA >= MXRT_SCALE_LAYOUT_NONE && SLA <= MXRT_SCALE_LAYOUT_TURBO16X4_U32 &&
                       SLB >= MXRT_SCALE_LAYOUT_NONE && SLB <= MXRT_SCALE_LAYOUT_TURBO16X4_U32,
                   "SLA / SLB: a scale layout code 0..5");

#if !defined(A_FMT) || !defined(B_FMT) || !defined(OUT_DTYPE) || !defined(STAGES) || !defined(DBUF) || \
    !defined(BM) || !defined(BN) || !defined(DIAG) || !defined(ATOMIC)
#error "A_FMT, B_FMT, OUT_DTYPE, ATOMIC, STAGES, DBUF, BM, BN and DIAG must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(BM == 64 || BM == 128 || BM == 192 || (BM == 256 && BN == 128 && DBUF == 0 && DIAG == 0),
                   "BM: 64 / 128 / 192 (1 / 2 / 3 warpgroups of 64 rows), or 256 (2 of 128 rows: two m64 row "
                   "halves sharing one load of the B factors; BN 128, DBUF 0)");
MXRT_STATIC_ASSERT(ATOMIC == 0 || ATOMIC == 1, "ATOMIC: 0 (stores) or 1 (atomic adds)");
MXRT_STATIC_ASSERT(BN == 128 || (BN == 256 && BM == 128 && DBUF == 0 && DIAG == 0),
                   "BN: 128, or 256 (two m64n128k32 halves per k32, one partial in flight: BM 128, DBUF 0)");
MXRT_STATIC_ASSERT(DIAG >= 0 && DIAG <= 2, "DIAG: 0 exact; 1, 2 timing diagnostics (inexact)");
MXRT_STATIC_ASSERT(STAGES * (BM * 128 + BN * 128 + 4 * BM * 4 + 4 * 4 * (BN / 4 + 4) * 4) + 20 * STAGES + 1024 <=
                       232448,
                   "STAGES x stage bytes beyond the 227 KB of shared memory of a block");
MXRT_STATIC_ASSERT(A_FMT == MXRT_FMT_E4M3 || A_FMT == MXRT_FMT_E5M2,
                   "A_FMT: e4m3 or e5m2; e2m1 is expanded to e4m3 first");
MXRT_STATIC_ASSERT(B_FMT == MXRT_FMT_E4M3 || B_FMT == MXRT_FMT_E5M2,
                   "B_FMT: e4m3 or e5m2; e2m1 is expanded to e4m3 first");
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_F32 || OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16,
                   "OUT_DTYPE: MXRT_OUT_F32, _BF16 or _F16");
MXRT_STATIC_ASSERT(STAGES >= 3 && STAGES <= 6, "STAGES: 3..6 (stage kt + STAGES - 2 is filled in iteration kt)");

#if defined(MXRT_CUDA)

#define RPW (BM == 256 ? 128 : 64)  // tile rows per warpgroup: one or two m64 row halves
#define THREADS (128 * (BM / RPW))  // consumer warpgroups only, no producer warps
#define NH (BN / 128)   // m64n128k32 wgmmas per warpgroup per k32 step (column halves of the tile)
#define BK 128          // K elements (bytes) per stage: one 128-byte swizzle row, four k32 steps
#define KSTEPS 4
#define SB_T (BN / 4 + 4)  // floats per t-group of the B-scale stage buffer (BN / 4 used; + 4 spreads the 4
                           // t-groups over distinct banks for the 16-byte reads)
#define SA_BYTES (KSTEPS * BM * 4)
#define SB_BYTES (KSTEPS * 4 * SB_T * 4)
#define TILE_A (BM * BK)    // 16 or 24 KB
#define TILE_B (BN * BK)    // 16 or 32 KB
#define GROUP_M 8       // tile rasterization: 8 row tiles sweep the column tiles together (L2 reuse of B)

// Byte offset of scale S[r, c] of a [rows, cols] scale matrix stored in layout L (scale_layouts.h; code 5: the
// turbo16x4 order with one uint32 word per scale).
template <int L>
MXRT_DEVICE u64 sm90_scale_offset(u32 r, u32 c, u32 rows, u32 cols) {
  if constexpr (L == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
    return (u64)MxrtScaleLayout<MXRT_SCALE_LAYOUT_TURBO16X4>(rows, cols).offset(r, c) << 2;
  else if constexpr (L == MXRT_SCALE_LAYOUT_NONE)
    return (u64)r * cols + c;
  else
    return MxrtScaleLayout<L>(rows, cols).offset(r, c);
}

#if A_FMT == MXRT_FMT_E4M3
#define WG_ATYPE "e4m3"
#else
#define WG_ATYPE "e5m2"
#endif
#if B_FMT == MXRT_FMT_E4M3
#define WG_BTYPE "e4m3"
#else
#define WG_BTYPE "e5m2"
#endif

// f32x4 / f32x2, mxrt_tmap, smem_addr, the mbarrier / TMA / wgmma wrappers and make_desc
#include "sm90_async.h"

// Registers of an asynchronous wgmma: keep the compiler from moving their reads across the wait.
MXRT_DEVICE void fence_regs(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d = A(64x32) * B(32x128)^T from zero (scale-d = 0): the exact-per-k32 partial of one MX block.
MXRT_DEVICE void wgmma_k32(float (&d)[64], u64 da, u64 db) {
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n128k32.f32." WG_ATYPE "." WG_BTYPE
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 0, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db)
      : "memory");
}

#if DIAG == 1 || (defined(SCALE_F32) && SCALE_F32)
// d += A(64x32) * B(32x128)^T (scale-d = 1): only the DIAG = 1 timing diagnostic and the engine's float32-scale
// build (one 128-K block a stage, DeepGEMM's recipe) accumulate across k32.
MXRT_DEVICE void wgmma_k32_acc(float (&d)[64], u64 da, u64 db) {
  asm volatile(
      "{\nwgmma.mma_async.sync.aligned.m64n128k32.f32." WG_ATYPE "." WG_BTYPE
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db)
      : "memory");
}

#endif

// E8M0 byte -> 2^(s-127) as float: 0 -> 2^-127 (subnormal), 255 -> NaN. Its bits >> 23 give back s.
MXRT_DEVICE float e8m0_f32(u32 s) {
  const u32 bits = s == 0u ? 0x00400000u : (s == 255u ? 0x7FC00000u : s << 23);
  return __uint_as_float(bits);
}

template <bool B>
struct mxrt_bool {
  static constexpr bool value = B;
};

// A stage whose scales all lie in [64, 190] (SAFE_LO, SAFE_HI) promotes with acc = fma(P * fb, fa, acc): both
// factors and their product are normal there and |P| * fb stays inside fp32, so the FMA rounds once, exactly as
// the float64 reference would. Any other byte (0..63, 191..254, NaN 255) marks the stage wide.
#define SAFE_LO 64u
#define SAFE_HI 190u
MXRT_DEVICE bool e8m0_wide(u32 s) { return s - SAFE_LO > SAFE_HI - SAFE_LO; }

// acc += P * 2^(sa+sb-254) exactly for every pair (wide stages): the exponent e split into e1 in [-126, 127] and
// e2 = e - e1 >= -126 (both factors normal; P * 2^e1 overflows or underflows only where the result does), NaN where
// either byte is 255. Pairs below 2^-252 are taken at 2^-252: their products are < 2^-215, zero in every output.
// fa, fb: the stage's factors (e8m0_f32; a block outside the matrix holds 0.0f, read as s = 0, where P = 0).
MXRT_DEVICE float promote_wide(float acc, float p, float fa, float fb) {
  const int sa = (int)(__float_as_uint(fa) >> 23), sb = (int)(__float_as_uint(fb) >> 23);
  const int e = sa + sb - 254;
  const int e1 = e < -126 ? -126 : (e > 127 ? 127 : e);
  const int e2 = e - e1 < -126 ? -126 : e - e1;
  float f1 = __int_as_float((e1 + 127) << 23);
  const float f2 = __int_as_float((e2 + 127) << 23);
  if (sa == 255 || sb == 255) f1 = __int_as_float(0x7FC00000);
  return fmaf(p * f1, f2, acc);
}

// acc += P * 2^(sb[col]-127) * 2^(sa[row]-127) for this thread's 2 rows x 32 columns; the B factor is exact
// (power of two), the FMA rounds once. sb_t: this thread's 32 column factors (cols 8j + 2t + e at [2j + e]).
// wide: CTA-uniform (the stage's flag).
MXRT_DEVICE void promote(float (&acc)[64], float (&p)[64], float fa0, float fa1, const float* sb_t, bool wide) {
  if (!wide) {
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
      const f32x4 b = *reinterpret_cast<const f32x4*>(sb_t + 2 * j);
      acc[4 * j + 0] = fmaf(p[4 * j + 0] * b.x, fa0, acc[4 * j + 0]);
      acc[4 * j + 1] = fmaf(p[4 * j + 1] * b.y, fa0, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(p[4 * j + 2] * b.x, fa1, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(p[4 * j + 3] * b.y, fa1, acc[4 * j + 3]);
      acc[4 * j + 4] = fmaf(p[4 * j + 4] * b.z, fa0, acc[4 * j + 4]);
      acc[4 * j + 5] = fmaf(p[4 * j + 5] * b.w, fa0, acc[4 * j + 5]);
      acc[4 * j + 6] = fmaf(p[4 * j + 6] * b.z, fa1, acc[4 * j + 6]);
      acc[4 * j + 7] = fmaf(p[4 * j + 7] * b.w, fa1, acc[4 * j + 7]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float b0 = sb_t[2 * j], b1 = sb_t[2 * j + 1];
      acc[4 * j + 0] = promote_wide(acc[4 * j + 0], p[4 * j + 0], fa0, b0);
      acc[4 * j + 1] = promote_wide(acc[4 * j + 1], p[4 * j + 1], fa0, b1);
      acc[4 * j + 2] = promote_wide(acc[4 * j + 2], p[4 * j + 2], fa1, b0);
      acc[4 * j + 3] = promote_wide(acc[4 * j + 3], p[4 * j + 3], fa1, b1);
    }
  }
}

// promote() with this thread's 32 B-column factors already in registers (shared by two row halves, BM = 256; fast
// stages only: a wide stage re-reads the factors from shared memory through promote)
MXRT_DEVICE void promote_regs(float (&acc)[64], float (&p)[64], float fa0, float fa1, const float (&fb)[32]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    acc[4 * j + 0] = fmaf(p[4 * j + 0] * fb[2 * j], fa0, acc[4 * j + 0]);
    acc[4 * j + 1] = fmaf(p[4 * j + 1] * fb[2 * j + 1], fa0, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(p[4 * j + 2] * fb[2 * j], fa1, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(p[4 * j + 3] * fb[2 * j + 1], fa1, acc[4 * j + 3]);
  }
}

MXRT_DEVICE void store_pair(void* out, u64 idx, float v0, float v1, bool pair, bool second) {
#if ATOMIC && OUT_DTYPE == MXRT_OUT_F32
  float* o = reinterpret_cast<float*>(out) + idx;
  mxrt_atomic_add_f32(o, v0);
  if (second) mxrt_atomic_add_f32(o + 1, v1);
#elif ATOMIC
  // pair: 4-byte aligned (out 4-byte aligned, n even, col even), one packed atomic; else each element through
  // its aligned word with -0 in the partner half (mx_gemm.h; the op keeps every such word inside out)
  u16* o = reinterpret_cast<u16*>(out) + idx;
  if (pair) {
    mxrt_atomic_add_pk16<OUT_DTYPE>(reinterpret_cast<u32*>(o), v0, v1);
  } else {
    mxrt_atomic_add_16<OUT_DTYPE>(o, v0);
    if (second) mxrt_atomic_add_16<OUT_DTYPE>(o + 1, v1);
  }
#elif OUT_DTYPE == MXRT_OUT_F32
  float* o = reinterpret_cast<float*>(out) + idx;
  if (pair) {
    f32x2 v;
    v.x = v0;
    v.y = v1;
    *reinterpret_cast<f32x2*>(o) = v;
  } else {
    o[0] = v0;
    if (second) o[1] = v1;
  }
#else
  u16* o = reinterpret_cast<u16*>(out) + idx;
  if (pair) {
    u32 packed;
#if OUT_DTYPE == MXRT_OUT_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(v1), "f"(v0));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(v1), "f"(v0));
#endif
    *reinterpret_cast<u32*>(o) = packed;
  } else {
    u16 h0, h1;
#if OUT_DTYPE == MXRT_OUT_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h0) : "f"(v0));
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h1) : "f"(v1));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h0) : "f"(v0));
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h1) : "f"(v1));
#endif
    o[0] = h0;
    if (second) o[1] = h1;
  }
#endif
}

// rows kept by every store of the dense kernel (the grouped kernel's ids mode passes its own predicate)
struct sm90_keep_all {
  MXRT_DEVICE bool operator()(u32) const { return true; }
};

// One 64 x (R / 2) accumulator block (R = 64: m64n128, R = 32: m64n64): this thread's rows row0, row0 + 8 and
// columns col0 + 8j + {0, 1}; rows < m (and keep(row)), columns < n. even_n: pairs may be stored as one 4- / 8-byte
// word (n even, out aligned to a pair).
template <int R, class Keep>
MXRT_DEVICE void store_acc(void* out, const float (&acc)[R], u32 row0, u32 col0, int m, int n, bool even_n,
                           const Keep& keep) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const u32 col = col0 + 8u * j;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u32 row = row0 + 8u * h;
      if (row < (u32)m && col < (u32)n && keep(row)) {
        const bool second = col + 1u < (u32)n;
        store_pair(out, (u64)row * (u32)n + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], second && even_n,
                   second);
      }
    }
  }
}
template <class Keep>
MXRT_DEVICE void store_half(void* out, const float (&acc)[64], u32 row0, u32 col0, int m, int n, bool even_n,
                            const Keep& keep) {
  store_acc<64>(out, acc, row0, col0, m, n, even_n, keep);
}


// ---- the factored CTA tile (gemm_mx_sm90.hip, gemm_mx_grouped_sm90.hip) ------------------------------------------

// The dynamic shared memory of the pipeline: STAGES slots of A / B code tiles and fp32 scale factors, then the full
// and empty mbarriers and the per-slot wide flags (1024-byte aligned start: the swizzled tiles).
struct Sm90Smem {
  u8* tile_a;
  u8* tile_b;
  float* sa_s;
  float* sb_s;
  u32 full0, empty0;
  u32* wide_s;
};

MXRT_DEVICE Sm90Smem sm90_smem(u8* smem_raw) {
  Sm90Smem S;
  u8* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  S.tile_a = smem;
  S.tile_b = smem + STAGES * TILE_A;
  S.sa_s = reinterpret_cast<float*>(S.tile_b + STAGES * TILE_B);
  S.sb_s = reinterpret_cast<float*>(S.tile_b + STAGES * TILE_B + STAGES * SA_BYTES);
  u64* bars = reinterpret_cast<u64*>(S.tile_b + STAGES * TILE_B + STAGES * (SA_BYTES + SB_BYTES));
  S.full0 = smem_addr(bars);
  S.empty0 = smem_addr(bars + STAGES);
  // wide[slot] == f + 1: stage f (in that slot) holds a scale outside [SAFE_LO, SAFE_HI] (atomicMax by the fill
  // threads before their full-barrier arrive; stages only grow, so no reset)
  S.wide_s = reinterpret_cast<u32*>(bars + 2 * STAGES);
  return S;
}

// Barriers and wide flags initialised, tensor maps prefetched. Every thread calls it (one block barrier inside).
// again: the CTA ran a tile through the ring before (every stage consumed, every thread's arrivals made and a
// block barrier since): the barriers are invalidated and made afresh, so the next tile starts from stage 0.
MXRT_DEVICE void sm90_init(const Sm90Smem& S, const void* ta, const void* tb, bool again = false) {
  if (MXRT_TID_X == 0) {
    for (u32 s = 0; s < STAGES; ++s) {
      if (again) {
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(S.full0 + 8 * s) : "memory");
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(S.empty0 + 8 * s) : "memory");
      }
      mbar_init(S.full0 + 8 * s, THREADS);   // every thread arrives after its scale row, thread 0 with the TMA bytes
      mbar_init(S.empty0 + 8 * s, THREADS);  // every thread arrives after its last read of the stage
      S.wide_s[s] = 0u;
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(ta) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(tb) : "memory");
  }
  __syncthreads();
}

// One output tile's operands: its first A / B rows as TMA row coordinates and as E8M0 scale rows, how many of its
// rows hold data (scale factor 0 past them: those rows / columns are computed from whatever TMA brings and never
// stored), and the MX blocks [kb0, kb1) it reduces over.
struct Sm90Job {
  const u8* sa;  // scale row of the tile's first A row
  const u8* sb;  // scale row of the tile's first B row
  u32 sa_stride, sb_stride;  // scale bytes per row of A / B
  u32 rows_a, rows_b;        // rows with data from the first (> 0)
  i32 ya, yb;                // TMA row coordinates of the first rows
  u32 kb0, kb1;              // scale blocks of K reduced here
};

// This thread's first tile row (warpgroup cw, warp w, lane group g; + 8, and + 64 / + 72 with BM = 256) and first
// column (2t, + 8j) in the accumulator layout of a m64n128 wgmma.
MXRT_DEVICE u32 sm90_lrow() {
  const u32 tid = MXRT_TID_X;
  return (tid / 128u) * RPW + 16u * ((tid / 32u) % 4u) + ((tid % 32u) >> 2);
}
MXRT_DEVICE u32 sm90_lcol() { return 2u * (MXRT_TID_X & 3u); }

// The tile's main loop: acc0 (and acc1: BN 256 columns 128..255, BM 256 rows + 64) = the exactly promoted sum over
// blocks [kb0, kb1), from freshly initialised barriers (sm90_init). Every thread calls it; it returns with every
// stage consumed. (A ring running on across tiles, with a stage base and empty-barrier waits in the prologue, cost
// the dense BM = 256 build 1 KB of spills even with base = 0; the grouped ids mode re-initialises instead.)
MXRT_DEVICE void sm90_mainloop(const Sm90Smem& S, const Sm90Job& J, const void* ta, const void* tb, float (&acc0)[64],
                               float (&acc1)[64]) {
  const u32 tid = MXRT_TID_X;
  u8* tile_a = S.tile_a;
  u8* tile_b = S.tile_b;
  float* sa_s = S.sa_s;
  float* sb_s = S.sb_s;
  const u32 full0 = S.full0, empty0 = S.empty0;
  u32* wide_s = S.wide_s;
  const u32 kb0 = J.kb0, kb1 = J.kb1;
  const u32 nkb = kb1 - kb0, nkt = (nkb + KSTEPS - 1) / KSTEPS;

  // ---- fill: stage f's scales (thread tid: A row tid if tid < BM, B row tid if tid < BN) and, by thread 0, its
  // two TMA code tiles. Loads are issued one stage ahead of their stores (fill_load / fill_store).
  const bool has_a = tid < (u32)BM, has_b = tid < (u32)BN;
  const bool in_a = has_a && tid < J.rows_a, in_b = has_b && tid < J.rows_b;
#if SLA == MXRT_SCALE_LAYOUT_NONE
  const u8* srow_a = J.sa + (u64)tid * J.sa_stride;
#define SM90_SCALE_A(kb) srow_a[kb]
#else  // J.sa: the storage base; this thread's matrix row ya + tid of ya + rows_a, sa_stride scale columns
  const u32 srow_a = (u32)J.ya + tid, srows_a = (u32)J.ya + J.rows_a;
#define SM90_SCALE_A(kb) J.sa[sm90_scale_offset<SLA>(srow_a, kb, srows_a, J.sa_stride)]
#endif
#if SLB == MXRT_SCALE_LAYOUT_NONE
  const u8* srow_b = J.sb + (u64)tid * J.sb_stride;
#define SM90_SCALE_B(kb) srow_b[kb]
#else
  const u32 srow_b = (u32)J.yb + tid, srows_b = (u32)J.yb + J.rows_b;
#define SM90_SCALE_B(kb) J.sb[sm90_scale_offset<SLB>(srow_b, kb, srows_b, J.sb_stride)]
#endif
  // B-scale slot of tile column tid: cols 8j + 2t + e live at [t * SB_T + 2j + e] (see promote)
  float* sdst_a = sa_s + tid;
  float* sdst_b = sb_s + ((tid >> 1) & 3u) * SB_T + 2u * (tid >> 3) + (tid & 1u);
  // a stage's scale bytes, packed (registers are scarce): v[0] the 4 A bytes, v[1] the 4 B bytes, v[2] bit j /
  // bit 4 + j set when A / B block j lies outside the matrix (factor 0 there)
  auto fill_load = [&](u32 f, u32 (&v)[3]) {
    v[0] = v[1] = v[2] = 0;
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) {
      const u32 kb = kb0 + f * KSTEPS + j;
      const bool ok_a = in_a && kb < kb1, ok_b = in_b && kb < kb1;
      v[0] |= (ok_a ? (u32)SM90_SCALE_A(kb) : 0u) << (8 * j);
      v[1] |= (ok_b ? (u32)SM90_SCALE_B(kb) : 0u) << (8 * j);
      v[2] |= (ok_a ? 0u : 1u << j) | (ok_b ? 0u : 16u << j);  // outside: factor 0
    }
  };
  auto fill_store = [&](u32 f, const u32 (&v)[3]) {
    const u32 slot_s = f % STAGES;
    bool wide = false;
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) {
      const bool out_a = (v[2] >> j) & 1u, out_b = (v[2] >> (4 + j)) & 1u;
      const u32 ba = (v[0] >> (8 * j)) & 255u, bb = (v[1] >> (8 * j)) & 255u;
      if (has_a) sdst_a[(slot_s * KSTEPS + j) * BM] = out_a ? 0.0f : e8m0_f32(ba);
      if (has_b) sdst_b[(slot_s * KSTEPS + j) * 4 * SB_T] = out_b ? 0.0f : e8m0_f32(bb);
      wide |= (has_a && !out_a && e8m0_wide(ba)) || (has_b && !out_b && e8m0_wide(bb));
    }
    if (wide) atomicMax(wide_s + slot_s, f + 1u);
    if (tid == 0) {
      mbar_arrive_tx(full0 + 8 * slot_s, TILE_A + TILE_B);
      const i32 kc = (i32)(kb0 * 32u + f * BK);
      tma_load_2d(smem_addr(tile_a + slot_s * TILE_A), ta, full0 + 8 * slot_s, kc, J.ya);
      tma_load_2d(smem_addr(tile_b + slot_s * TILE_B), tb, full0 + 8 * slot_s, kc, J.yb);
    } else {
      mbar_arrive(full0 + 8 * slot_s);
    }
  };
  // stage kt + AHEAD is filled during iteration kt, into the slot stage kt + AHEAD - STAGES left: two
  // stages of slack, so a warpgroup rarely waits for the other one to release a slot.
  const u32 AHEAD = STAGES - 2;
  for (u32 f = 0; f < AHEAD && f < nkt; ++f) {
    u32 v[3];
    fill_load(f, v);
    fill_store(f, v);
  }

  // ---- consumers: warpgroup cw owns rows 64cw .. 64cw+63 of the tile
  const u32 cw = tid / 128u, lane = tid % 32u, t = lane & 3u;
  const u32 lrow = sm90_lrow();  // this thread's rows lrow and lrow + 8 (and + 64, + 72: BM = 256)
  const u32 a_base = smem_addr(tile_a) + cw * RPW * BK, b_base = smem_addr(tile_b);
  float p0[64];
#if DBUF && DIAG == 0
  float p1[64];
#endif
#pragma unroll
  for (int v = 0; v < 64; ++v) acc0[v] = 0.0f;
#if NH == 2 || RPW == 128
#pragma unroll
  for (int v = 0; v < 64; ++v) acc1[v] = 0.0f;
#endif
#if DIAG == 2
#pragma unroll
  for (int v = 0; v < 64; ++v) p0[v] = 1.0f;
#endif

// column half H of k32 step J of stage S: B rows 128H .. 128H + 127 (16 KB further), their factors 32H further
#define MX_ISSUE_H(P, S, J, H)                                                                       \
  do {                                                                                               \
    wg_fence();                                                                                      \
    wgmma_k32(P, make_desc(a_base + (S) * TILE_A + 32u * (J)),                                       \
              make_desc(b_base + (S) * TILE_B + (H) * 128u * BK + 32u * (J)));                       \
    wg_commit();                                                                                     \
  } while (0)
#define MX_PROMOTE_H(ACC, P, S, J, H)                                                                \
  do {                                                                                               \
    fence_regs(P);                                                                                   \
    const float* sa_k = sa_s + ((S) * KSTEPS + (J)) * BM + lrow;                                     \
    promote(ACC, P, sa_k[0], sa_k[8], sb_s + ((S) * KSTEPS + (J)) * 4 * SB_T + t * SB_T + 32u * (H), \
            wide);                                                                                   \
  } while (0)
#define MX_ISSUE(P, S, J) MX_ISSUE_H(P, S, J, 0u)
#define MX_PROMOTE(P, S, J) MX_PROMOTE_H(acc0, P, S, J, 0u)

  for (u32 kt = 0; kt < nkt; ++kt) {
    const u32 s = kt % STAGES, f = kt + AHEAD;
    u32 fv[3];
    if (f < nkt) fill_load(f, fv);  // global loads in flight during this stage's math
    mbar_wait(full0 + 8 * s, (kt / STAGES) & 1u);
    const bool wide_stage = wide_s[s] == kt + 1u;  // CTA-uniform: this stage takes the exact wide promotion
    // k32 steps of this stage inside the split (< KSTEPS only in a split's last stage): the steps past kb1 hold
    // codes of the next split (or TMA zeros past k) and are skipped, not masked (0 x NaN codes would be NaN)
    const u32 jn = nkb - kt * KSTEPS < KSTEPS ? nkb - kt * KSTEPS : KSTEPS;
    // the stage's math, instantiated twice (fast / wide) so the fast body is scheduled as one straight run
    auto stage = [&](auto wide_c) {
      constexpr bool wide = decltype(wide_c)::value;
#if DIAG == 1
    // timing diagnostic, inexact: one promotion per stage (4 k32 accumulated in the tensor core, DeepGEMM-style)
    wg_fence();
    wgmma_k32(p0, make_desc(a_base + s * TILE_A), make_desc(b_base + s * TILE_B));
#pragma unroll
    for (u32 j = 1; j < KSTEPS; ++j)
      wgmma_k32_acc(p0, make_desc(a_base + s * TILE_A + 32u * j), make_desc(b_base + s * TILE_B + 32u * j));
    wg_commit();
    wg_wait<0>();
    MX_PROMOTE(p0, s, 0u);
#elif DIAG == 2
    // timing diagnostic, inexact: the promotions alone, no wgmma
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) MX_PROMOTE(p0, s, j);
#elif RPW == 128
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) {
      if (j >= jn) break;
      // row half 0, then row half 1 with the same B columns: the 32 B factors are loaded once for both
      wg_fence();
      wgmma_k32(p0, make_desc(a_base + s * TILE_A + 32u * j), make_desc(b_base + s * TILE_B + 32u * j));
      wg_commit();
      const float* sb_k = sb_s + (s * KSTEPS + j) * 4 * SB_T + t * SB_T;
      const float* sa_k = sa_s + (s * KSTEPS + j) * BM + lrow;
      if constexpr (wide) {  // the exact split: column factors re-read from shared memory (no 32 registers)
        wg_wait<0>();
        fence_regs(p0);
        promote(acc0, p0, sa_k[0], sa_k[8], sb_k, true);
        wg_fence();
        wgmma_k32(p0, make_desc(a_base + 64u * BK + s * TILE_A + 32u * j), make_desc(b_base + s * TILE_B + 32u * j));
        wg_commit();
        wg_wait<0>();
        fence_regs(p0);
        promote(acc1, p0, sa_k[64], sa_k[72], sb_k, true);
      } else {
        float fb[32];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const f32x4 b = *reinterpret_cast<const f32x4*>(sb_k + 4 * q);
          fb[4 * q] = b.x;
          fb[4 * q + 1] = b.y;
          fb[4 * q + 2] = b.z;
          fb[4 * q + 3] = b.w;
        }
        wg_wait<0>();
        fence_regs(p0);
        promote_regs(acc0, p0, sa_k[0], sa_k[8], fb);
        wg_fence();
        wgmma_k32(p0, make_desc(a_base + 64u * BK + s * TILE_A + 32u * j), make_desc(b_base + s * TILE_B + 32u * j));
        wg_commit();
        wg_wait<0>();
        fence_regs(p0);
        promote_regs(acc1, p0, sa_k[64], sa_k[72], fb);
      }
    }
#elif NH == 2
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) {
      if (j >= jn) break;
      MX_ISSUE_H(p0, s, j, 0u);
      wg_wait<0>();
      MX_PROMOTE_H(acc0, p0, s, j, 0u);
      MX_ISSUE_H(p0, s, j, 1u);
      wg_wait<0>();
      MX_PROMOTE_H(acc1, p0, s, j, 1u);
    }
#elif DBUF
    if (jn < KSTEPS) {  // a split's short last stage: one partial at a time
      for (u32 j = 0; j < jn; ++j) {
        MX_ISSUE(p0, s, j);
        wg_wait<0>();
        MX_PROMOTE(p0, s, j);
      }
    } else {
    MX_ISSUE(p0, s, 0u);
    MX_ISSUE(p1, s, 1u);
    wg_wait<1>();
    MX_PROMOTE(p0, s, 0u);
    MX_ISSUE(p0, s, 2u);
    wg_wait<1>();
    MX_PROMOTE(p1, s, 1u);
    MX_ISSUE(p1, s, 3u);
    wg_wait<1>();
    MX_PROMOTE(p0, s, 2u);
    wg_wait<0>();
    MX_PROMOTE(p1, s, 3u);
    }
#else
#pragma unroll
    for (u32 j = 0; j < KSTEPS; ++j) {
      if (j >= jn) break;
      MX_ISSUE(p0, s, j);
      wg_wait<0>();
      MX_PROMOTE(p0, s, j);
    }
#endif
    };
    if (!wide_stage) {
      stage(mxrt_bool<false>{});
    } else {
      stage(mxrt_bool<true>{});
    }
    // every thread releases its own reads of the stage's scale factors (racecheck tracks mbarrier arrive/wait
    // per thread, not a warp's reads ordered by __syncwarp before one lane's arrive)
    mbar_arrive(empty0 + 8 * s);
    if (f < nkt) {
      if (f >= STAGES) mbar_wait(empty0 + 8 * (f % STAGES), ((f / STAGES) - 1u) & 1u);
      fill_store(f, fv);
    }
  }
#undef SM90_SCALE_A
#undef SM90_SCALE_B
#undef MX_ISSUE
#undef MX_PROMOTE
#undef MX_ISSUE_H
#undef MX_PROMOTE_H
}

// The tile's stores from the accumulator registers: rows m0 + lrow (..) < m with keep(row), columns n0 + .. < n,
// element (row, col) at out + row * n + col.
template <class Keep>
MXRT_DEVICE void sm90_store(void* out, const float (&acc0)[64], const float (&acc1)[64], u32 m0, u32 n0, int m,
                            int n, bool even_n, const Keep& keep) {
  const u32 lrow = sm90_lrow(), lcol = sm90_lcol();
  store_half(out, acc0, m0 + lrow, n0 + lcol, m, n, even_n, keep);
#if NH == 2
  store_half(out, acc1, m0 + lrow, n0 + 128u + lcol, m, n, even_n, keep);
#elif RPW == 128
  store_half(out, acc1, m0 + lrow + 64u, n0 + lcol, m, n, even_n, keep);
#else
  (void)acc1;
#endif
}

#endif  // MXRT_CUDA
