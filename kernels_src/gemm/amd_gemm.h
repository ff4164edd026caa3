// amd_gemm.h: the parts of the AMD MFMA GEMM kernels (gemm_mx_gfx950.hip, gemm_mx_gfx942.hip) that do not depend
// on the matrix instruction: the CTA tile, global -> LDS staging with K/M/N tails, scale-byte addressing of the
// layouts the kernels read, and the epilogue (plain store, deterministic split-K through an fp32 workspace,
// atomic split-K).
//
// CTA tile BM x BN = 128 x 128, 256 threads = 4 waves of 64 in a 2 x 2 grid, each wave 64 x 64 = 4 x 4 tiles of
// 16 x 16. One K stage is KSTEP = 128 elements; two LDS stages (register-staged double buffer, one barrier per
// stage). An operand row of a stage is 128 bytes in LDS (8-bit codes) or 64 (native e2m1), padded by 16 bytes so
// the ds_read_b128 of 8 consecutive rows hit distinct banks.
//
// Tails: every global load past the split's K end, or past the last row, yields zero codes (never touches
// memory); scale bytes for blocks past the split's end read as 127 (2^0), so a NaN scale of the next split never
// meets the zero codes; M/N edges are masked on store.
//
// Host emulation (tests/support/simt_amd_host.cpp, MXRT_HOST_SIMT): the wave-wide operations (MFMA, lane permute)
// and atomics are hooks the host file implements; everything else below is the device code itself.
#pragma once
// mx_gemm.h: mx_codecs.h, bit casts, bf16/fp16 RNE conversions, the MXRT_OUT_* output codes
#include "../common/mx_gemm.h"

#define MXRT_GEMM_BM 128
#define MXRT_GEMM_BN 128
#define MXRT_GEMM_KSTEP 128
#define MXRT_GEMM_THREADS 256
#define MXRT_GEMM_LDS_PAD 16

// Run-time codes, all from mx_codes.h (mxrt/codes.py):
//   mode                  MXRT_GEMM_MODE_STORE (out = acc), _WORKSPACE (ws[split] = acc, the last CTA of a tile sums
//                         ws[0..split_k) in order), _ATOMIC (out += acc: fp32 atomics; packed bf16x2 / f16x2)
//   out_dtype             MXRT_OUT_*
//   a_layout / b_layout   MXRT_SCALE_LAYOUT_NONE ([rows, kb] bytes), _AITER32X8, _TURBO16X4 (bytes), _TURBO16X4_U32
//                         (turbo16x4 zero-extended to uint32, dtype=np.uint32)
//   flags                 MXRT_GEMM_FLAG_VEC_A / _VEC_B: 16-byte aligned rows (base and pitch) of A / B codes

#if defined(MXRT_HOST_SIMT)
typedef int mxrt_v8i __attribute__((vector_size(32)));
typedef float mxrt_v4f __attribute__((vector_size(16)));
#define MXRT_GEMM_BID_Z (simt::bid_z)
// Implemented by tests/support/simt_amd_host.cpp.
u32 mxrt_host_bpermute(u32 src_lane, u32 v);
void mxrt_host_atomic_add_f32(float* p, float v);
void mxrt_host_atomic_pk_add_16(u32* p, u32 packed, int out_dtype);
u32 mxrt_host_atomic_inc(u32* p);
mxrt_v4f mxrt_host_mfma_scale(mxrt_v8i a, mxrt_v8i b, mxrt_v4f c, int cbsz, int blgp, int opsel_a, u32 scale_a,
                              int opsel_b, u32 scale_b);
mxrt_v4f mxrt_host_mfma_fp8(u64 a, u64 b, mxrt_v4f c, int a_bf8, int b_bf8);
#else
typedef int mxrt_v8i __attribute__((ext_vector_type(8)));
typedef float mxrt_v4f __attribute__((ext_vector_type(4)));
typedef short mxrt_s16x2 __attribute__((ext_vector_type(2)));
typedef _Float16 mxrt_h16x2 __attribute__((ext_vector_type(2)));
#define MXRT_GEMM_BID_Z ((u32)__builtin_amdgcn_workgroup_id_z())
#endif

// One or two waves per SIMD: the 64 fp32 accumulators, 64 operand registers and the staged loads need more than
// the 128 VGPRs the compiler budgets for 256-thread blocks by default (it spilled to scratch without this).
// A pragma around the kernel (not an attribute in its declaration, which mxrt's extern "C" scan reads).
#if defined(MXRT_HOST_SIMT)
#define MXRT_GEMM_OCCUPANCY_BEGIN
#define MXRT_GEMM_OCCUPANCY_END
#else
// clang-format off
#define MXRT_GEMM_OCCUPANCY_BEGIN _Pragma("clang attribute push (__attribute__((amdgpu_flat_work_group_size(256, 256), amdgpu_waves_per_eu(1, 2))), apply_to = function)")
// clang-format on
#define MXRT_GEMM_OCCUPANCY_END _Pragma("clang attribute pop")
#endif

MXRT_DEVICE u32 mxrt_lane() { return MXRT_TID_X & 63u; }

// Keep the next stage's global loads ahead of this stage's MFMAs: without it the scheduler sank the loads below
// the MFMAs, so their latency was exposed every K step (the ISA notes in NOTES.md).
MXRT_DEVICE void mxrt_sched_fence() {
#if !defined(MXRT_HOST_SIMT)
  __builtin_amdgcn_sched_barrier(0);
#endif
}

// Value of lane `src` of this wave (all 64 lanes must take part).
MXRT_DEVICE u32 mxrt_wave_bpermute(u32 src, u32 v) {
#if defined(MXRT_HOST_SIMT)
  return mxrt_host_bpermute(src, v);
#else
  return (u32)__builtin_amdgcn_ds_bpermute((int)(src << 2), (int)v);
#endif
}

#if defined(MXRT_HOST_SIMT)
inline i32 min(i32 a, i32 b) { return a < b ? a : b; }
inline i32 max(i32 a, i32 b) { return a > b ? a : b; }
#else
MXRT_DEVICE i32 min(i32 a, i32 b) { return __builtin_elementwise_min(a, b); }
MXRT_DEVICE i32 max(i32 a, i32 b) { return __builtin_elementwise_max(a, b); }
#endif
// One 16-bit output conversion with the output dtype as a run-time value (the AMD kernels take it as an argument).
MXRT_DEVICE u32 mxrt_gemm_16(float f, i32 out_dtype) {
  return out_dtype == MXRT_OUT_BF16 ? mxrt_f32_to_bf16_bits(f) : mxrt_f32_to_f16_bits(f);
}

// E8M0 byte -> fp32 2^(b-127): 0 is the subnormal 2^-127 (bits 0x00400000), 0xFF is NaN.
MXRT_DEVICE float mxrt_e8m0_f32(u32 b) {
  return mxrt_f32_from_bits(b == 0u ? 0x00400000u : (b == 0xFFu ? 0x7FC00000u : (b << 23)));
}

// ---- the problem, as every thread sees it ---------------------------------------------------------------------

struct MxrtGemmArgs {
  const u8* a;   // codes [m, k] (8-bit) or [m, ceil(k/2)] (packed e2m1)
  const u8* b;   // codes [n, k] / [n, ceil(k/2)]
  const u8* sa;  // scales of a in layout a_layout
  const u8* sb;
  void* out;     // [m, n] of out_dtype
  float* ws;     // [split_k, m, n] fp32 (MODE_WORKSPACE)
  u32* counters; // [tiles] zero on entry, left zero (MODE_WORKSPACE)
  u32 m, n, k, split_k;
  i32 a_layout, b_layout, out_dtype, mode, flags;
};


// Scale addressing without a per-load layout switch: every layout the kernels read stores S[r, c] at
//   rowpart(r) + colpart(c),  rowpart = (r/32)*R32 + ((r/16)%2)*R16 + (r%16)*R1,
//                             colpart = (c/8)*C8 + ((c/4)%2)*C4 + (c%4)*C1
// (scale_layouts.h / mxrt.layouts.scale_index, regrouped in mixed radix):
//   row-major [rows, kb]   R = (32 kb, 16 kb, kb)        C = (8, 4, 1)
//   aiter32x8              R = (256 sn/8, 1, 4)          C = (256, 2, 64)      sn = align(kb, 8)
//   turbo16x4              R = (32 sn, 16 sn, 1)         C = (128, 64, 16)     sn = align(kb, 4)
//   turbo16x4 as uint32    4 x the turbo16x4 constants (a byte zero-extended per word: its low byte)
struct MxrtScaleAddr {
  u32 r32, r16, r1, c8, c4, c1;
};

MXRT_DEVICE MxrtScaleAddr mxrt_gemm_scale_addr(i32 layout, u32 kb_total) {
  MxrtScaleAddr a;
  if (layout == MXRT_SCALE_LAYOUT_AITER32X8) {
    const u32 sn = (kb_total + 7u) / 8u * 8u;
    a = {(sn / 8u) * 256u, 1u, 4u, 256u, 2u, 64u};
  } else if (layout == MXRT_SCALE_LAYOUT_TURBO16X4 || layout == MXRT_SCALE_LAYOUT_TURBO16X4_U32) {
    const u32 sn = (kb_total + 3u) / 4u * 4u, w = layout == MXRT_SCALE_LAYOUT_TURBO16X4_U32 ? 4u : 1u;
    a = {32u * sn * w, 16u * sn * w, w, 128u * w, 64u * w, 16u * w};
  } else {
    a = {32u * kb_total, 16u * kb_total, kb_total, 8u, 4u, 1u};
  }
  return a;
}

MXRT_DEVICE u32 mxrt_gemm_rowpart(const MxrtScaleAddr& a, u32 r) {
  return (r / 32u) * a.r32 + ((r / 16u) % 2u) * a.r16 + (r % 16u) * a.r1;
}
MXRT_DEVICE u32 mxrt_gemm_colpart(const MxrtScaleAddr& a, u32 c) {
  return (c / 8u) * a.c8 + ((c / 4u) % 2u) * a.c4 + (c % 4u) * a.c1;
}

// One operand of a CTA: rows [row0, row0 + 128) of an [rows, k] matrix, with the split's K range [k0, k1).
struct MxrtOperand {
  const u8* codes;
  const u8* scales;
  u32 rows, row_bytes, kb_total, row0;
  bool vec, fp4;
  MxrtScaleAddr sa;  // scale addressing of the operand's layout
};

// ---- global -> registers: one 16-byte chunk of codes (16 fp8 elements or 32 e2m1 elements) -------------------

// Buffer loads: a raw buffer resource over the operand's codes; a load at an offset past num_records returns
// zero without touching memory (that is how rows past the end and chunks past K read as zero codes, with no
// branch). Resource word 3 = 0x00020000 for gfx9 (composable_kernel CK_BUFFER_RESOURCE_3RD_DWORD).
#define MXRT_GEMM_OOB 0x80000000u  // an offset past every buffer (the Python side keeps code buffers < 2^31 B)
#if defined(MXRT_HOST_SIMT)
struct mxrt_rsrc {
  const u8* base;
  u32 num;
};
MXRT_DEVICE mxrt_rsrc mxrt_make_rsrc(const u8* p, u32 num) { return mxrt_rsrc{p, num}; }
// Host model: each byte at or past num_records reads 0 (the hardware checks per dword; the kernels never use a
// byte of a straddling dword that lies past the valid elements, those are masked).
MXRT_DEVICE u32 mxrt_buf_load8(mxrt_rsrc r, u32 off) { return off < r.num ? r.base[off] : 0u; }
MXRT_DEVICE mxrt_u32x4 mxrt_buf_load16(mxrt_rsrc r, u32 off) {
  u32 w[4] = {0u, 0u, 0u, 0u};
  for (u32 j = 0; j < 16u; ++j) w[j / 4u] |= mxrt_buf_load8(r, off + j) << (8u * (j % 4u));
  return mxrt_u32x4{w[0], w[1], w[2], w[3]};
}
MXRT_DEVICE u32 mxrt_buf_load_b32(mxrt_rsrc r, u32 off) {
  u32 w = 0u;
  for (u32 j = 0; j < 4u; ++j) w |= mxrt_buf_load8(r, off + j) << (8u * j);
  return w;
}
MXRT_DEVICE u64 mxrt_buf_load_b64(mxrt_rsrc r, u32 off) {
  return (u64)mxrt_buf_load_b32(r, off) | ((u64)mxrt_buf_load_b32(r, off + 4u) << 32);
}
#else
typedef __amdgpu_buffer_rsrc_t mxrt_rsrc;
typedef u32 mxrt_b128 __attribute__((ext_vector_type(4)));
MXRT_DEVICE mxrt_rsrc mxrt_make_rsrc(const u8* p, u32 num) {
  return __builtin_amdgcn_make_buffer_rsrc((void*)p, (short)0, (int)num, 0x00020000);
}
MXRT_DEVICE u32 mxrt_buf_load8(mxrt_rsrc r, u32 off) { return __builtin_amdgcn_raw_buffer_load_b8(r, (int)off, 0, 0); }
MXRT_DEVICE mxrt_u32x4 mxrt_buf_load16(mxrt_rsrc r, u32 off) {
  const mxrt_b128 v = __builtin_amdgcn_raw_buffer_load_b128(r, (int)off, 0, 0);
  return mxrt_u32x4{v.x, v.y, v.z, v.w};
}
MXRT_DEVICE u32 mxrt_buf_load_b32(mxrt_rsrc r, u32 off) {
  return __builtin_amdgcn_raw_buffer_load_b32(r, (int)off, 0, 0);
}
MXRT_DEVICE u64 mxrt_buf_load_b64(mxrt_rsrc r, u32 off) {
  typedef u32 mxrt_b64 __attribute__((ext_vector_type(2)));
  const mxrt_b64 v = __builtin_amdgcn_raw_buffer_load_b64(r, (int)off, 0, 0);
  return (u64)v.x | ((u64)v.y << 32);
}
#endif

// Chunk of row `r` starting at element `kel`: 16 fp8 elements or 32 e2m1 elements (16 bytes); elements at or past
// k_end and rows past the last are zero. No divergent branch: `op.vec` (16-byte aligned rows) is uniform.
// (Written with min/max and shifts instead of comparisons: on AMD every comparison result is a 64-bit lane mask in
// SGPRs, and with 8 chunks in flight those masks spilled the SGPR file.)
// Buffer offset of the `per` elements of row `r` from element `kel`, with bit 31 (past every buffer: the load
// returns zero) set when none of them is valid; `valid` = how many are (0 past the last row or past k_end).
MXRT_DEVICE u32 mxrt_gemm_chunk_off(const MxrtOperand& op, u32 r, u32 kel, u32 k_end, i32 per, i32& valid) {
  const i32 left = (i32)k_end - (i32)kel;                 // sizes < 2^31: no overflow
  const i32 row_ok = (u32)((i32)r - (i32)op.rows) >> 31;  // 1 when r < rows
  valid = min(max(left, 0), per) * row_ok;
  // OOB bit set when valid == 0 (then (valid - 1) is negative)
  return (r * op.row_bytes + (op.fp4 ? kel / 2u : kel)) | ((u32)(valid - 1) & 0x80000000u);
}

MXRT_DEVICE mxrt_u32x4 mxrt_gemm_load_chunk(const MxrtOperand& op, mxrt_rsrc rs, u32 r, u32 kel, u32 k_end) {
  const i32 per = op.fp4 ? 32 : 16, ub = op.fp4 ? 4 : 8, upd = 32 / ub;  // units (elements) per dword
  i32 valid;
  const u32 off = mxrt_gemm_chunk_off(op, r, kel, k_end, per, valid);
  mxrt_u32x4 v;
  if (op.vec) {
    v = mxrt_buf_load16(rs, off);
  } else {  // unaligned rows: byte loads; a byte past the valid ones reads at an OOB offset (zero)
    const i32 nbytes = (valid * ub + 7) / 8;
    u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (i32 j = 0; j < 16; ++j)
      w[j / 4] |= mxrt_buf_load8(rs, (off + (u32)j) | ((u32)(nbytes - 1 - j) & 0x80000000u)) << (8 * (j % 4));
    v = mxrt_u32x4{w[0], w[1], w[2], w[3]};
  }
  // keep the first `valid` elements (an odd e2m1 tail drops the high nibble of its last byte)
  u32 m[4];
#pragma unroll
  for (i32 q = 0; q < 4; ++q) {
    const i32 kq = min(max(valid - upd * q, 0), upd);
    m[q] = (u32)(((u64)1 << (ub * kq)) - 1u);
  }
  v.x &= m[0];
  v.y &= m[1];
  v.z &= m[2];
  v.w &= m[3];
  return v;
}

// v_perm_b32: byte k of the result = byte sel.byte[k] (0..7 only, here) of the 64-bit {hi, lo}, lo = bytes 0..3
// (the operand order of __builtin_amdgcn_perm as composable_kernel and llama.cpp's AMD table lookups use it).
MXRT_DEVICE u32 mxrt_perm(u32 hi, u32 lo, u32 sel) {
#if defined(MXRT_HOST_SIMT)
  const u64 v = ((u64)hi << 32) | lo;
  u32 r = 0u;
  for (u32 k = 0; k < 4u; ++k) r |= (u32)((v >> (8u * ((sel >> (8u * k)) & 7u))) & 0xFFu) << (8u * k);
  return r;
#else
  return __builtin_amdgcn_perm(hi, lo, sel);
#endif
}

// e2m1 codes (one per byte, in its low nibble) -> e4m3 bytes of the same value (every e2m1 value is exact in e4m3):
// magnitude 0 -> 0x00, 1 (0.5) -> 0x30, m >= 2 -> 0x30 + 4 m, looked up 4 at a time (v_perm_b32 on an 8-byte
// table); sign -> bit 7 where the byte is not zero (-0 becomes +0: 0x80 is NaN in e4m3 FNUZ).
MXRT_DEVICE u32 mxrt_e2m1x4_to_e4m3(u32 b) {
  const u32 code = mxrt_perm(0x4C484440u, 0x3C383000u, b & 0x07070707u);
  return code | ((b << 4) & (code + 0x7F7F7F7Fu) & 0x80808080u);
}

// 8 packed e2m1 codes (one dword, element 0 in the low nibble) -> 8 e4m3 bytes (two dwords, element order kept):
// even and odd nibbles as bytes, converted, interleaved by two more permutes (~20 VALU; the per-nibble form of
// session 5 compiled to a divergent branch per nibble).
MXRT_DEVICE void mxrt_e2m1x8_to_e4m3(u32 w, u32& lo, u32& hi) {
  const u32 ev = mxrt_e2m1x4_to_e4m3(w & 0x0F0F0F0Fu);         // elements 0, 2, 4, 6
  const u32 od = mxrt_e2m1x4_to_e4m3((w >> 4) & 0x0F0F0F0Fu);  // elements 1, 3, 5, 7
  lo = mxrt_perm(od, ev, 0x05010400u);
  hi = mxrt_perm(od, ev, 0x07030602u);
}

// OCP fp8 -> FNUZ fp8 with the same bits, four bytes at once (gfx942's fp8 MFMA reads FNUZ: e4m3fnuz bias 8,
// e5m2fnuz bias 16, so the same bits mean half the OCP value; 0x80 is NaN there, no -0, no Inf). OCP -0 (0x80)
// becomes 0x00; OCP NaN (e4m3 0x7F/0xFF) and e5m2 Inf/NaN (0x7C..0x7F, 0xFC..0xFF) become the FNUZ NaN 0x80.
MXRT_DEVICE u32 mxrt_fnuz_from_ocp(u32 w, bool e5m2) {
  const u32 low7 = w & 0x7F7F7F7Fu;
  const u32 nan = (low7 + (e5m2 ? 0x04040404u : 0x01010101u)) & 0x80808080u;  // |code| >= 0x7C (e5m2) / == 0x7F
  const u32 zero = ~(low7 + 0x7F7F7F7Fu) & 0x80808080u;                       // |code| == 0
  w &= ~zero;                                                                 // -0 -> +0
  const u32 nan_bytes = (nan >> 7) * 0xFFu;
  return (w & ~nan_bytes) | nan;
}

// Conversion of a staged chunk on its way to LDS.
#define MXRT_CONV_NONE 0        // bytes as loaded
#define MXRT_CONV_WIDEN 1       // e2m1 x32 -> e4m3 x32 (valid as OCP e4m3 and, for these values, as e4m3fnuz)
#define MXRT_CONV_FNUZ_E4M3 2   // OCP e4m3 -> e4m3fnuz bits
#define MXRT_CONV_FNUZ_E5M2 3   // OCP e5m2 -> e5m2fnuz bits

#define MXRT_LOAD_MASKED 0
#define MXRT_LOAD_CHECKED 1
#define MXRT_LOAD_INTERIOR 2

// Global -> registers for one operand and a stage of KS elements: thread `tid` takes 16-byte chunks tid,
// tid + 256, ... (KS/16 chunks per row for 8-bit codes, KS/32 for packed e2m1); `store` writes them to LDS rows
// of pitch ROW.
template <bool FP4, u32 ROW, u32 KS = MXRT_GEMM_KSTEP>
struct MxrtStage {
  static constexpr u32 CPR = KS / (FP4 ? 32u : 16u);
  static constexpr u32 N = MXRT_GEMM_BM * CPR / MXRT_GEMM_THREADS;
  mxrt_u32x4 r[N];

  // PATH MXRT_LOAD_MASKED: every chunk masked (rows, K tail; byte loads for unaligned rows).
  // PATH MXRT_LOAD_CHECKED: a stage inside the rows and the K range with 16-byte aligned rows (a uniform test)
  //   takes plain 16-byte buffer loads without the per-chunk masking arithmetic, others the masked path
  //   (gfx942; on gfx950 the extra branch pushed the SGPR file into spills).
  // PATH MXRT_LOAD_INTERIOR: plain loads only; the launcher guarantees every stage is interior (EDGE=0 builds).
  template <int PATH>
  MXRT_DEVICE void load(const MxrtOperand& op, mxrt_rsrc rs, u32 kstep0, u32 k_end, u32 tid) {
    if (PATH == MXRT_LOAD_INTERIOR ||
        (PATH == MXRT_LOAD_CHECKED && op.vec && op.row0 + MXRT_GEMM_BM <= op.rows && kstep0 + KS <= k_end)) {
#pragma unroll
      for (u32 j = 0; j < N; ++j) {
        const u32 idx = tid + MXRT_GEMM_THREADS * j, row = idx / CPR, c = idx % CPR;
        r[j] = mxrt_buf_load16(rs, (op.row0 + row) * op.row_bytes + (FP4 ? kstep0 / 2u : kstep0) + 16u * c);
      }
      return;
    }
#pragma unroll
    for (u32 j = 0; j < N; ++j) {
      const u32 idx = tid + MXRT_GEMM_THREADS * j, row = idx / CPR, c = idx % CPR;
      r[j] = mxrt_gemm_load_chunk(op, rs, op.row0 + row, kstep0 + c * (FP4 ? 32u : 16u), k_end);
    }
  }

  // WIDEN: e2m1 chunk c (32 codes) becomes 32 e4m3 bytes at byte 32c of the row; otherwise chunk c lands at 16c.
  template <int CONV>
  MXRT_DEVICE void store(u8* lds, u32 tid) const {
#pragma unroll
    for (u32 j = 0; j < N; ++j) {
      const u32 idx = tid + MXRT_GEMM_THREADS * j, row = idx / CPR, c = idx % CPR;
      if (CONV == MXRT_CONV_WIDEN) {
        mxrt_u32x4 lo, hi;
        mxrt_e2m1x8_to_e4m3(r[j].x, lo.x, lo.y);
        mxrt_e2m1x8_to_e4m3(r[j].y, lo.z, lo.w);
        mxrt_e2m1x8_to_e4m3(r[j].z, hi.x, hi.y);
        mxrt_e2m1x8_to_e4m3(r[j].w, hi.z, hi.w);
        *(mxrt_u32x4*)(lds + row * ROW + 32u * c) = lo;
        *(mxrt_u32x4*)(lds + row * ROW + 32u * c + 16u) = hi;
      } else if (CONV == MXRT_CONV_FNUZ_E4M3 || CONV == MXRT_CONV_FNUZ_E5M2) {
        const bool e5 = CONV == MXRT_CONV_FNUZ_E5M2;
        const mxrt_u32x4 v = {mxrt_fnuz_from_ocp(r[j].x, e5), mxrt_fnuz_from_ocp(r[j].y, e5),
                              mxrt_fnuz_from_ocp(r[j].z, e5), mxrt_fnuz_from_ocp(r[j].w, e5)};
        *(mxrt_u32x4*)(lds + row * ROW + 16u * c) = v;
      } else {
        *(mxrt_u32x4*)(lds + row * ROW + 16u * c) = r[j];
      }
    }
  }
};

// The CTA's scalar geometry: tile origin and the split's K range.
struct MxrtGemmTile {
  u32 m0, n0, split, k0, k1, kb0, kb1, tile_id, tiles;
};

MXRT_DEVICE MxrtGemmTile mxrt_gemm_tile(const MxrtGemmArgs& g) {
  MxrtGemmTile t;
  t.n0 = MXRT_BID_X * MXRT_GEMM_BN;
  t.m0 = MXRT_BID_Y * MXRT_GEMM_BM;
  t.split = MXRT_GEMM_BID_Z;
  // mxrt.reference.GemmProblem.k_ranges: split i owns blocks [i*kb/S, (i+1)*kb/S)
  const u32 kb = (g.k + 31u) / 32u;
  t.kb0 = (u32)(((u64)t.split * kb) / g.split_k);
  t.kb1 = (u32)(((u64)(t.split + 1u) * kb) / g.split_k);
  t.k0 = 32u * t.kb0;
  t.k1 = 32u * t.kb1 < g.k ? 32u * t.kb1 : g.k;
  const u32 tiles_n = (g.n + MXRT_GEMM_BN - 1u) / MXRT_GEMM_BN;
  t.tile_id = MXRT_BID_Y * tiles_n + MXRT_BID_X;
  t.tiles = tiles_n * ((g.m + MXRT_GEMM_BM - 1u) / MXRT_GEMM_BM);
  return t;
}

// ---- epilogue -------------------------------------------------------------------------------------------------
// acc[i][j] holds the 16 x 16 tile (i, j) of the wave in the MFMA C/D layout shared by 16x16x128 (gfx950) and
// 16x16x32 (gfx942): register r of lane l is D[4*(l/16) + r][l % 16] (MX_REFERENCE.md 6.1; composable_kernel
// ck_tile WarpGemmAttributeMfmaImpl_f32_16x16x32_f8_base: kCMLane 4, kCNLane 16, kCM1PerLane 4).

MXRT_DEVICE void mxrt_gemm_store_one(const MxrtGemmArgs& g, u32 row, u32 col, float v) {
  const u64 idx = (u64)row * g.n + col;
  if (g.out_dtype == MXRT_OUT_F32)
    ((float*)g.out)[idx] = v;
  else
    ((u16*)g.out)[idx] = (u16)mxrt_gemm_16(v, g.out_dtype);
}

MXRT_DEVICE void mxrt_gemm_atomic_f32(float* p, float v) {
#if defined(MXRT_HOST_SIMT)
  mxrt_host_atomic_add_f32(p, v);
#else
  __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// Packed 16-bit atomic add of (lo, hi) at a 4-byte aligned pair: global_atomic_pk_add_bf16 / _f16.
MXRT_DEVICE void mxrt_gemm_atomic_pk16(u32* p, float lo, float hi, i32 out_dtype) {
  const u32 packed = mxrt_gemm_16(lo, out_dtype) | (mxrt_gemm_16(hi, out_dtype) << 16);
#if defined(MXRT_HOST_SIMT)
  mxrt_host_atomic_pk_add_16(p, packed, out_dtype);
#else
  if (out_dtype == MXRT_OUT_BF16) {
    mxrt_s16x2 v;
    v.x = (short)(packed & 0xFFFFu);
    v.y = (short)(packed >> 16);
    __builtin_amdgcn_global_atomic_fadd_v2bf16((__attribute__((address_space(1))) mxrt_s16x2*)p, v);
  } else {
    mxrt_h16x2 v;
    v.x = __builtin_bit_cast(_Float16, (u16)(packed & 0xFFFFu));
    v.y = __builtin_bit_cast(_Float16, (u16)(packed >> 16));
    __builtin_amdgcn_global_atomic_fadd_v2f16((__attribute__((address_space(1))) mxrt_h16x2*)p, v);
  }
#endif
}

MXRT_DEVICE void mxrt_gemm_fence_release() {
#if !defined(MXRT_HOST_SIMT)
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
#endif
}
MXRT_DEVICE void mxrt_gemm_fence_acquire() {
#if !defined(MXRT_HOST_SIMT)
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
#endif
}
MXRT_DEVICE u32 mxrt_gemm_counter_inc(u32* p) {
#if defined(MXRT_HOST_SIMT)
  return mxrt_host_atomic_inc(p);
#else
  return __hip_atomic_fetch_add(p, 1u, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// Write the wave's 64 x 64 results. wr0 / wc0: the wave tile's origin in the matrix. `flag` is an LDS word
// for the "last CTA of the tile" broadcast. Every thread of the CTA calls this (barriers inside).
MXRT_DEVICE void mxrt_gemm_epilogue(const MxrtGemmArgs& g, const MxrtGemmTile& t, mxrt_v4f (&acc)[4][4], u32 wr0,
                                    u32 wc0, u32* flag) {
  const u32 lane = mxrt_lane();
  const u32 rq = 4u * (lane / 16u), cl = lane % 16u;
  if (g.mode == MXRT_GEMM_MODE_ATOMIC) {
    if (g.out_dtype == MXRT_OUT_F32) {
#pragma unroll
      for (u32 i = 0; i < 4u; ++i)
        for (u32 j = 0; j < 4u; ++j)
          for (u32 r = 0; r < 4u; ++r) {
            const u32 row = wr0 + 16u * i + rq + r, col = wc0 + 16u * j + cl;
            if (row < g.m && col < g.n) mxrt_gemm_atomic_f32((float*)g.out + (u64)row * g.n + col, acc[i][j][r]);
          }
      return;
    }
    // 16-bit outputs: lanes l and l^1 hold columns c, c+1 of the same 4 rows. The even lane adds rows 0, 1 as
    // (c, c+1) pairs, the odd lane rows 2, 3 (n is even and out 4-byte aligned: the Python side checks).
    const bool odd = lane & 1u;
#pragma unroll
    for (u32 i = 0; i < 4u; ++i)
      for (u32 j = 0; j < 4u; ++j) {
        float mine[2], other[2];
        for (u32 q = 0; q < 2u; ++q) {
          // the even lane sends rows 2, 3; the odd lane sends rows 0, 1 (what its partner adds)
          const float send = odd ? acc[i][j][q] : acc[i][j][2u + q];
          other[q] = mxrt_f32_from_bits(mxrt_wave_bpermute(lane ^ 1u, mxrt_bits_from_f32(send)));
          mine[q] = odd ? acc[i][j][2u + q] : acc[i][j][q];
        }
        const u32 c = wc0 + 16u * j + (cl & ~1u);
        for (u32 q = 0; q < 2u; ++q) {
          const u32 row = wr0 + 16u * i + rq + (odd ? 2u : 0u) + q;
          const float lo = odd ? other[q] : mine[q], hi = odd ? mine[q] : other[q];
          if (row < g.m && c < g.n) mxrt_gemm_atomic_pk16((u32*)((u16*)g.out + (u64)row * g.n + c), lo, hi, g.out_dtype);
        }
      }
    return;
  }
  if (g.mode == MXRT_GEMM_MODE_STORE) {
#pragma unroll
    for (u32 i = 0; i < 4u; ++i)
      for (u32 j = 0; j < 4u; ++j)
        for (u32 r = 0; r < 4u; ++r) {
          const u32 row = wr0 + 16u * i + rq + r, col = wc0 + 16u * j + cl;
          if (row < g.m && col < g.n) mxrt_gemm_store_one(g, row, col, acc[i][j][r]);
        }
    return;
  }
  // MODE_WORKSPACE: ws[split] = acc; the CTA that finishes a tile last sums the split_k slices in split order
  // (the same order whichever CTA it is, so the result is bitwise deterministic) and resets the tile's counter.
  const u64 slice = (u64)g.m * g.n;
  float* ws = g.ws + (u64)t.split * slice;
#pragma unroll
  for (u32 i = 0; i < 4u; ++i)
#pragma unroll
    for (u32 j = 0; j < 4u; ++j)
      for (u32 r = 0; r < 4u; ++r) {
        const u32 row = wr0 + 16u * i + rq + r, col = wc0 + 16u * j + cl;
        if (row < g.m && col < g.n) ws[(u64)row * g.n + col] = acc[i][j][r];
      }
  mxrt_gemm_fence_release();
  mxrt_sync();
  if (MXRT_TID_X == 0) {
    const u32 seen = mxrt_gemm_counter_inc(g.counters + t.tile_id);
    const u32 last = seen == g.split_k - 1u;
    if (last) g.counters[t.tile_id] = 0u;  // every other CTA of the tile has arrived: reset for the next call
    *flag = last;
  }
  mxrt_sync();
  if (!*flag) return;
  mxrt_gemm_fence_acquire();
  for (u32 e = MXRT_TID_X; e < MXRT_GEMM_BM * MXRT_GEMM_BN; e += MXRT_GEMM_THREADS) {
    const u32 row = t.m0 + e / MXRT_GEMM_BN, col = t.n0 + e % MXRT_GEMM_BN;
    if (row >= g.m || col >= g.n) continue;
    const u64 idx = (u64)row * g.n + col;
    float s = 0.0f;
    for (u32 z = 0; z < g.split_k; ++z) s += g.ws[z * slice + idx];
    mxrt_gemm_store_one(g, row, col, s);
  }
}
