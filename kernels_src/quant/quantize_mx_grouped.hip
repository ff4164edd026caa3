// kernel   quantize_mx_grouped                                                        (extern "C")
// computes the rowwise MX quantization of x [total_m,k] into the per-group padded layout: output row r in
//          group g (offs_pad[g] <= r < offs_pad[g+1]) with i = r - offs_pad[g] < l[g] holds the codes/scales of
//          x row offs[g] + i; every other row of [0, m_ub) (group padding and tail) gets zero codes and scale
//          127 (mxrt.formats.grouped.quantize_mx_grouped; offsets from quantize_mx_grouped_offsets)
// args     const IN* x [total_m,k] | const i64* offs [nout,G+1] (row 0 offs, row 1 offs_pad_row) |
//          u8* q [m_ub,k] (e2m1: [m_ub,ceil(k/2)]) | u8* s [m_ub,ceil(k/32)] | int num_groups, int m_ub, int k,
//          int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, MXRT_FLAG_VEC_OUT) | int num_ctas
// grid     (num_ctas,1,1), a grid-stride loop over m_ub * ceil(k/32) * 4 quarter blocks, UNROLL per thread and
//          step   block (THREADS,1,1)
//          smem 2*(MXG_MAX_GROUPS+1)*4 bytes (static)
// defines  THREADS, FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*), UNROLL (1 or 2: quarter blocks in flight per thread)
//                                            set by mxrt/ops/grouped.py (variants: mxrt/ops/grouped_kernels.py)
// requires G <= MXRT_MAX_GROUPS (1024); total_m*k < 2^31; m_ub*ceil(k/32)*4 < 2^31; offsets <= m_ub (the offsets
//          kernel's cut); VEC_IN: x 16-byte aligned, k*sizeof(IN) % 16 == 0; VEC_OUT: q 16-byte aligned,
//          row bytes % 16 == 0                                                  checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(UNROLL)
#error "THREADS, FMT, IN_DTYPE and UNROLL must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");
MXRT_STATIC_ASSERT(UNROLL == 1 || UNROLL == 2, "UNROLL: 1 or 2");

typedef MxrtFmt<FMT>::type Fmt;
#define PER 8  // elements per thread: a quad of 4 consecutive lanes holds one 32-element block

// Four lanes per block, 8 elements each: a warp reads 8 consecutive blocks of a row (one 16-byte load per lane
// for 16-bit inputs) and writes 256 contiguous code bytes; the block amax is a 4-lane max. Each thread takes
// UNROLL quarter blocks THREADS apart per step, all loads issued before the first use. A thread's rows only grow,
// so its group is found by walking forward from the last one (amortised O(1), no search per row).
extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_grouped(const void* __restrict__ x, const i64* __restrict__ offs, u8* __restrict__ q,
                        u8* __restrict__ s, i32 num_groups, i32 m_ub, i32 k, i32 scale_mode, i32 flags,
                        i32 num_ctas) {
  __shared__ i32 s_offs[MXG_MAX_GROUPS + 1];
  __shared__ i32 s_pad[MXG_MAX_GROUPS + 1];
  mxg_load_offsets<THREADS>(offs, num_groups, 0, s_offs);
  mxg_load_offsets<THREADS>(offs, num_groups, 1, s_pad);
  mxrt_sync();

  const u32 uk = (u32)k;
  const u32 nb = (uk + MXRT_BLOCK - 1) / MXRT_BLOCK;
  const u32 quads = nb * 4;  // work items per row
  const u32 total = (u32)m_ub * quads;
  const u32 row_bytes = Fmt::BITS == 4 ? (uk + 1) / 2 : uk;
  constexpr u32 VEC = 16 / MxrtIn<IN_DTYPE>::SIZE;  // elements per 16-byte load
  constexpr u32 NV = PER / VEC;                     // 16-byte loads per quarter block
  i32 g = 0;                                        // this thread's current group (rows only grow)

  // The loop bound is uniform over the CTA, so every lane reaches the quad max.
  for (u32 t0 = MXRT_BID_X * THREADS * UNROLL; t0 < total; t0 += (u32)num_ctas * THREADS * UNROLL) {
    u32 r[UNROLL], item[UNROLL], valid[UNROLL];
    i32 src[UNROLL];  // the x row of output row r, or -1 for a padding row
    u32 bits[UNROLL][PER];
    mxrt_u32x4 v[UNROLL][NV];
    bool vec[UNROLL];
#pragma unroll
    for (u32 u = 0; u < UNROLL; ++u) {
      const u32 t = t0 + u * THREADS + MXRT_TID_X;
      const bool active = t < total;
      r[u] = active ? t / quads : 0;
      item[u] = t - r[u] * quads;
      const u32 col0 = item[u] * PER;
      valid[u] = active && col0 < uk ? (uk - col0 < PER ? uk - col0 : PER) : 0;
      src[u] = -1;
      if (active) {
        while (g < num_groups && s_pad[g + 1] <= (i32)r[u]) ++g;
        if (g < num_groups) {
          const i32 i = (i32)r[u] - s_pad[g];
          if (i < s_offs[g + 1] - s_offs[g]) src[u] = s_offs[g] + i;
        }
      }
      vec[u] = src[u] >= 0 && valid[u] == PER && (flags & MXRT_FLAG_VEC_IN);
      if (vec[u]) {
        const mxrt_u32x4* p =
            (const mxrt_u32x4*)((const u8*)x + (u64)((u32)src[u] * uk + col0) * MxrtIn<IN_DTYPE>::SIZE);
#pragma unroll
        for (u32 c = 0; c < NV; ++c) v[u][c] = p[c];
      } else {
#pragma unroll
        for (u32 j = 0; j < PER; ++j)
          bits[u][j] = src[u] >= 0 && j < valid[u] ? mxrt_load_elem<IN_DTYPE>(x, (u32)src[u] * uk + col0 + j) : 0u;
      }
    }
#pragma unroll
    for (u32 u = 0; u < UNROLL; ++u) {
      if (vec[u]) {
#pragma unroll
        for (u32 c = 0; c < NV; ++c) mxrt_unpack16<IN_DTYPE>(v[u][c], bits[u] + c * VEC);
      }
      u32 amax = 0;
#pragma unroll
      for (u32 j = 0; j < PER; ++j) {
        const u32 a = bits[u][j] & 0x7FFFFFFFu;
        amax = a > amax ? a : amax;
      }
      amax = mxg_quad_max(amax);
      const u32 sb = src[u] >= 0 ? mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode) : MXG_PAD_SCALE;

      u32 words[2];
      mxrt_encode_chunk<Fmt, PER>(bits[u], sb, words);
      if (valid[u]) {
        const u32 col0 = item[u] * PER;
        u8* dst = q + r[u] * row_bytes + (Fmt::BITS == 4 ? col0 / 2 : col0);
        if (valid[u] == PER && (flags & MXRT_FLAG_VEC_OUT)) {
          if (Fmt::BITS == 4) {
            *(u32*)dst = words[0];
          } else {
            mxg_u32x2 o;
            o.x = words[0];
            o.y = words[1];
            *(mxg_u32x2*)dst = o;
          }
        } else {
          const u32 nbytes = Fmt::BITS == 4 ? (valid[u] + 1) / 2 : valid[u];
#pragma unroll
          for (u32 i = 0; i < PER; ++i)
            if (i < nbytes) dst[i] = (u8)(words[i / 4] >> (8 * (i % 4)));
        }
        if ((item[u] & 3u) == 0) s[r[u] * nb + item[u] / 4] = (u8)sb;
      }
    }
  }
}
