// mx_group.h: helpers of the grouped quantizers (kernels_src/quant/quantize_mx_grouped*.hip,
// quantize_mx_dual_grouped.hip): group lookup in shared memory, a 4-lane max and the staged tile stores. The
// element encoder is mx_block.h's mxrt_encode_chunk (the fast path: x * 2^-e in fp32, then the format's rounding).
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

// ---- a 32 x 128 input tile, loaded as raw 16-byte vectors, into shared memory as fp32 bit patterns ----------------
// Thread t's vector `it` holds 16 / sizeof(IN) elements of tile row v / VPR from column (v % VPR) * PER, with
// v = it * NT + t and VPR = 128 / PER vectors per row (the loads of quantize_mx_grouped_rowcol / _dual_grouped).
// Unpacked here rather than at the load, so a warp waits for its loads only when it stages them.
template <int IN, u32 NT, u32 PITCH, u32 LOADS>
MXRT_DEVICE void mxg_stage_tile(const mxrt_u32x4 (&raw)[LOADS], u32* tile) {
  constexpr u32 PER = 16 / MxrtIn<IN>::SIZE, VPR = 128 / PER;
#pragma unroll
  for (u32 it = 0; it < LOADS; ++it) {
    const u32 v = it * NT + MXRT_TID_X;
    u32 vals[PER];
    mxrt_unpack16<IN>(raw[it], vals);
#pragma unroll
    for (u32 j = 0; j < PER; j += 4) {
      mxrt_u32x4 o;
      o.x = vals[j];
      o.y = vals[j + 1];
      o.z = vals[j + 2];
      o.w = vals[j + 3];
      *(mxrt_u32x4*)&tile[(v / VPR) * PITCH + (v % VPR) * PER + j] = o;
    }
  }
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

// ---- staged stores of 32 (rows) x 128 (k) dual tiles (quantize_mx_dual_grouped, quantize_mx_grouped_rowcol) ----
// The encoders leave each 32-element block's codes in one thread (a row block: 32 rows x 4 blocks; a column block:
// 128 columns x 1 block). Stored straight from there, every warp store touched 32 rows 16 bytes each and every scale
// byte was its own write: the L2 took ~11 write requests per read request and was the bottleneck (ncu, RESULTS.md
// session 6). Staged in shared memory, a tile's rows leave as whole 16-byte chunks, consecutive threads on
// consecutive chunks of a row, and the column side of MXG_SUB tiles stacked along the rows (one column's MXG_SUB
// blocks are contiguous in the colwise layout) leaves as full 128-byte lines (fp8) with 4-byte scale runs.
// Pitches of 16 bytes past the data keep the 16-byte staging writes of 8 consecutive threads on distinct banks.
#if defined(MXRT_HIP)
#define MXG_SUB 1u  // wave64 CDNA: 4 stacked tiles pushed the 2-D fp6 / fp4 builds past the SGPRs (spills); unmeasured
#else
#define MXG_SUB 4u
#endif
template <class F>
struct MxgStage {
  static constexpr u32 RB = F::BITS == 4 ? 16u : 32u;  // code bytes of one block
  static constexpr u32 RP = 4u * RB + 16u;             // row staging pitch (4 blocks of a row)
  static constexpr u32 CP = MXG_SUB * RB + 16u;        // column staging pitch (MXG_SUB blocks of a column)
  u8 row[32 * RP];
  u8 col[128 * CP];
  u8 srow[32 * 4];
  u8 scol[128 * MXG_SUB];
};

// Codes of one block (words as mxrt_encode_block left them) into staging bytes dst (16-byte aligned).
template <class F>
MXRT_DEVICE void mxg_stage_codes(u8* dst, const u32* words) {
#pragma unroll
  for (u32 v = 0; v < MxgStage<F>::RB / 16u; ++v) {
    mxrt_u32x4 o;
    o.x = words[4 * v];
    o.y = words[4 * v + 1];
    o.z = words[4 * v + 2];
    o.w = words[4 * v + 3];
    ((mxrt_u32x4*)dst)[v] = o;
  }
}


// A staged tile's rows out, all NT threads (the caller synchronised after staging): qr is row 0's first code
// byte, rows qr_stride apart, nrows stored, row_bytes valid code bytes per row (<= 4 * RB), row_blocks scales (sr:
// row 0's first scale byte, sr_stride apart); vec: the code base and stride allow 16-byte stores. A thread's chunk
// column and scale column are fixed (NT is a multiple of both widths): one base address each, fully unrolled steps
// of a fixed stride, so all of a thread's shared loads issue before its global stores.
template <class F, u32 NT>
MXRT_DEVICE void mxg_store_rows(const MxgStage<F>& st, u8* qr, u32 qr_stride, u8* sr, u32 sr_stride, u32 nrows,
                                u32 row_bytes, u32 row_blocks, bool vec) {
  constexpr u32 CH = 4u * MxgStage<F>::RB / 16u, RSTEP = NT / CH;
  MXRT_STATIC_ASSERT(NT % CH == 0 && NT % 4u == 0, "mxg_store_rows: NT must be a multiple of the chunks per row");
  const u32 ch = MXRT_TID_X % CH, r0 = MXRT_TID_X / CH;
  if (16u * ch < row_bytes) {
    u8* q = qr + (u64)r0 * qr_stride + 16u * ch;
#pragma unroll
    for (u32 j = 0; j < (32u + RSTEP - 1) / RSTEP; ++j) {
      const u32 r = r0 + j * RSTEP;
      if (r < 32u && r < nrows)
        mxrt_put16(q + (u64)(j * RSTEP) * qr_stride, st.row + r * MxgStage<F>::RP + 16u * ch, row_bytes - 16u * ch,
                   vec);
    }
  }
  const u32 b = MXRT_TID_X % 4u, rs0 = MXRT_TID_X / 4u;
  if (b < row_blocks) {
    u8* q = sr + (u64)rs0 * sr_stride + b;
#pragma unroll
    for (u32 j = 0; j < (32u + NT / 4u - 1) / (NT / 4u); ++j) {
      const u32 r = rs0 + j * (NT / 4u);
      if (r < 32u && r < nrows) q[(u64)(j * (NT / 4u)) * sr_stride] = st.srow[r * 4u + b];
    }
  }
}

// The column side's scales of nsub staged tiles out transposed (flag SCALES_T of the row+col quantizer): block row
// b (< nsub) of the unit's 128 columns to sct + b * k as 4-byte words of 4 columns (the row's bytes contiguous:
// whole sectors, where the [k, m/32] layout takes nsub bytes per column into sectors 8 units share); c < ncols;
// sct + b * k 4-byte aligned (k % 4 == 0, sct aligned).
template <class F, u32 NT>
MXRT_DEVICE void mxg_store_col_scales_t(const MxgStage<F>& st, u8* sct, u32 k, u32 ncols, u32 nsub) {
  MXRT_STATIC_ASSERT(NT >= 32u * MXG_SUB, "mxg_store_col_scales_t: a thread per 4 columns of every block row");
  const u32 b = MXRT_TID_X / 32u, c = 4u * (MXRT_TID_X % 32u);
  if (b >= nsub || c >= ncols) return;
  u32 w = 0;
#pragma unroll
  for (u32 i = 0; i < 4u; ++i) w |= (u32)st.scol[(c + i) * MXG_SUB + b] << (8u * i);
  u8* dst = sct + (u64)b * k + c;
  if (c + 4u <= ncols) {
    *(u32*)dst = w;
  } else {
    for (u32 i = 0; c + i < ncols; ++i) dst[i] = (u8)(w >> (8u * i));
  }
}

// The column side of nsub (<= MXG_SUB) staged tiles out: column c's nsub blocks (all valid) to qc + c * qc_stride,
// its nsub scales to sc + c * sc_stride, for c < ncols; vec_col: the base and stride allow 16-byte stores. As the
// rows: a thread's chunk and block are fixed, one base address each, unrolled fixed steps.
template <class F, u32 NT, bool SCALES = true>
MXRT_DEVICE void mxg_store_cols(const MxgStage<F>& st, u8* qc, u32 qc_stride, u8* sc, u32 sc_stride, u32 ncols,
                                u32 nsub, bool vec_col) {
  constexpr u32 RB = MxgStage<F>::RB, CH = MXG_SUB * RB / 16u, CSTEP = NT / CH, SSTEP = NT / MXG_SUB;
  MXRT_STATIC_ASSERT(NT % CH == 0 && NT % MXG_SUB == 0, "mxg_store_cols: NT must be a multiple of the chunks");
  const u32 ch = MXRT_TID_X % CH, c0 = MXRT_TID_X / CH;
  if (ch < nsub * RB / 16u) {
    u8* q = qc + (u64)c0 * qc_stride + 16u * ch;
#pragma unroll
    for (u32 j = 0; j < (128u + CSTEP - 1) / CSTEP; ++j) {
      const u32 c = c0 + j * CSTEP;
      if (c < 128u && c < ncols)
        mxrt_put16(q + (u64)(j * CSTEP) * qc_stride, st.col + c * MxgStage<F>::CP + 16u * ch, 16u, vec_col);
    }
  }
  const u32 b = MXRT_TID_X % MXG_SUB, cs0 = MXRT_TID_X / MXG_SUB;
  if (SCALES && b < nsub) {
    u8* q = sc + (u64)cs0 * sc_stride + b;
#pragma unroll
    for (u32 j = 0; j < (128u + SSTEP - 1) / SSTEP; ++j) {
      const u32 c = cs0 + j * SSTEP;
      if (c < 128u && c < ncols) q[(u64)(j * SSTEP) * sc_stride] = st.scol[c * MXG_SUB + b];
    }
  }
}
