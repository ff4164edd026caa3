// gemm_decode_amd.h: the body of the AMD small-M (decode) MX GEMM kernels gemm_mx_decode_gfx950.hip and
// gemm_mx_decode_gfx942.hip (mainloops in gemm_decode_gfx950.h / gemm_decode_gfx942.h) and of their MoE twins
// gemm_mx_decode_gfx950_moe.hip / _gfx942_moe.hip (the MoE part at the end of this file). Decode multiplies a
// few tokens (m <= 64) by a large weight [n, k]: the time is the weight read, so every weight byte is loaded once,
// straight from global memory into the MFMA operand registers (no LDS staging: nothing is shared between waves),
// and the CTA count comes from n / 64 times a K split.
//
// Work split: a CTA (256 threads, 4 waves of 64) owns 64 weight rows [n0, n0 + 64) and every token; its K range
// (split z of grid z: blocks [z*KB/split_k, (z+1)*KB/split_k), KB = ceil(k/32)) is cut into steps of DEC_KSTEP K
// (128; 64 for gfx942 at MT = 4, whose two register stages of 128 spilled) and wave w takes steps w, w + 4, ...
// (two register stages: the next step's loads are in flight during this step's MFMAs). Per step a wave multiplies
// MT token tiles of 16 by 4 weight tiles of 16 (16 x 16 output tiles). The four waves' partial sums are added in
// wave order through LDS (bitwise deterministic) and wave 0 writes.
//
// MFMA orientation: the 16 x 16 instructions are square, so the tokens are the instruction's A operand and the
// weights its B operand. That keeps the dense tile headers' g950_mfma / g942_mfma (which bind A_FMT to the first
// operand) and puts 16 consecutive weight rows, i.e. 16 consecutive output columns, across the lanes of a store.
// acc[j][i] = output tile (tokens 16j.., weight rows n0 + 16i..); reg r of lane l is D[4*(l/16) + r][l % 16]:
// token 16j + 4*(l/16) + r, output column n0 + 16i + l % 16.
//
// Tails without branches around loads: codes past the split's K end or past the last row load as zero (buffer
// loads with an out-of-range offset, amd_gemm.h), scale bytes of blocks past the split's end or rows past the
// last read as 127 (2^0), so a NaN scale of the next split never meets zero codes inside this one.
//
// defines  A_FMT (tokens), B_FMT (weights) as MXRT_FMT_*, MT (token tiles of 16: 1, 2, 4) from the launcher;
//          DEC_KSTEP from the kernel file; the weight code layout is the mainloops' template parameter WL (dec_off)
#pragma once

#ifndef MT
#error "MT must be defined by the launcher"
#endif
#if MT != 1 && MT != 2 && MT != 4
#error "the AMD decode kernels: MT (token tiles of 16) must be 1, 2 or 4"
#endif

#define DEC_ROWS 64     // weight rows per CTA (4 tiles of 16)
#define DEC_WAVES 4     // waves per CTA, splitting the CTA's K steps
#ifndef DEC_KSTEP
#error "DEC_KSTEP (K per wave step) must be defined by the kernel file"
#endif

// The CTA's geometry: weight rows from n0, the split's K range [k0, k1), its blocks [kb0, kb1), DEC_KSTEP steps.
struct DecTile {
  u32 n0, split, kb0, kb1, k0, k1, steps;
};

MXRT_DEVICE DecTile dec_tile(const MxrtGemmArgs& g, u32 split) {
  DecTile t;
  t.n0 = MXRT_BID_X * DEC_ROWS;
  t.split = split;
  const u32 kb = (g.k + 31u) / 32u;  // mxrt.reference.GemmProblem.k_ranges
  t.kb0 = (u32)(((u64)t.split * kb) / g.split_k);
  t.kb1 = (u32)(((u64)(t.split + 1u) * kb) / g.split_k);
  t.k0 = 32u * t.kb0;
  t.k1 = 32u * t.kb1 < g.k ? 32u * t.kb1 : g.k;
  t.steps = (t.k1 - t.k0 + DEC_KSTEP - 1u) / DEC_KSTEP;
  return t;
}

// The token rows a lane loads, as a type the mainloops take: x(j) is the row of token tile j that lane % 16 holds in
// the MFMA operand, xs() the row of token `lane` (gfx942 loads one token's scale bytes per lane). DecRowsDense: the
// tokens themselves (16 j + lane % 16, lane; computed where used, as before the MoE kernels); DecRowsMoe: the
// gathered activation rows (dec_moe_rows). A row at or past the operand's rows reads zero codes and scale bytes 127.
struct DecRowsDense {
  MXRT_DEVICE u32 x(u32 j) const { return 16u * j + mxrt_lane() % 16u; }
  MXRT_DEVICE u32 xs() const { return mxrt_lane(); }
};

struct DecRowsMoe {
  u32 r[MT], s;
  MXRT_DEVICE u32 x(u32 j) const { return r[j]; }
  MXRT_DEVICE u32 xs() const { return s; }
};

// Whole-chunk loads: inside the envelope (k % 16 == 0 for fp8, k % 32 for e2m1, split ends on 32-blocks) a chunk
// of `per` elements starting at a multiple of `per` never straddles k or the split's end: it is fully valid or
// lies past the end (bit 31 set: the buffer load returns zero). So no element mask follows the load, and nothing
// consumes the loaded registers before their step's MFMAs (a mask applied at the load made the compiler wait for
// the next step's loads right after issuing them).
//
// Weight code layouts, template parameter WL of the loads (define WLB of the dense kernels; the MoE kernels and the
// token operand always 0): DEC_WL_ROW (0) row-major [rows, row_bytes]; DEC_WL_AITER16 (1) aiter's shuffle_weight(w,
// (16, 16)) (mxrt.preshuffle_weight, MX_REFERENCE.md 3b'): the codes zero-padded to [ceil(rows/16)*16, kk], kk =
// ceil(row_bytes/32)*32, byte (r, c) at (r/16)*16*kk + (c/32)*512 + ((c/16)%2)*256 + (r%16)*16 + c%16. A 16-byte
// chunk of a row (c a multiple of 16) stays contiguous, so do its 8- and 4-byte pieces: the loads keep their width,
// only the offset changes. Masking is the row-major one (rows at or past op.rows and pieces past k_end: OOB bit).
#define DEC_WL_ROW 0
#define DEC_WL_AITER16 1

template <int WL>
MXRT_DEVICE u32 dec_off(const MxrtOperand& op, u32 r, u32 kel, u32 k_end, i32 per) {
  i32 valid;
  const u32 off = mxrt_gemm_chunk_off(op, r, kel, k_end, per, valid);
  if (WL == DEC_WL_ROW) return off;
  const u32 c = op.fp4 ? kel / 2u : kel, kk = (op.row_bytes + 31u) & ~31u;
  const u32 sh = (r & ~15u) * kk + (c / 32u) * 512u + (c & 16u) * 16u + (r % 16u) * 16u + c % 16u;
  return sh | ((u32)(valid - 1) & 0x80000000u);  // as mxrt_gemm_chunk_off: OOB when no element is valid
}

// The buffer resource of an operand's codes in layout WL: rows * row_bytes, or the padded aiter16x16 buffer.
template <int WL>
MXRT_DEVICE mxrt_rsrc dec_rsrc(const MxrtOperand& op) {
  if (WL == DEC_WL_ROW) return mxrt_make_rsrc(op.codes, op.rows * op.row_bytes);
  return mxrt_make_rsrc(op.codes, ((op.rows + 15u) & ~15u) * ((op.row_bytes + 31u) & ~31u));
}

// Scale byte S[r, c] of an operand, in two halves so that the load's result is not consumed where it is issued:
// dec_scale_load returns the raw byte (offset 0, a byte every scale tensor has, for a masked one) and `ok` (1 for
// a row inside the operand and a block before kb_end); dec_scale_fix gives the byte, or 127 (2^0) where not ok.
// Branch-free and comparison-free (sign bits, no lane masks).
MXRT_DEVICE u32 dec_scale_load(const MxrtOperand& op, u32 r, u32 c, u32 kb_end, u32& ok) {
  ok = ((u32)((i32)r - (i32)op.rows) >> 31) & ((u32)((i32)c - (i32)kb_end) >> 31);
  return op.scales[(mxrt_gemm_rowpart(op.sa, r) + mxrt_gemm_colpart(op.sa, c)) * ok];
}
MXRT_DEVICE u32 dec_scale_fix(u32 v, u32 ok) { return (v & (0u - ok)) | (127u & (ok - 1u)); }

// ---- the epilogue: waves 1..3 hand their sums to wave 0 through LDS, wave 0 adds them in order and writes ------
// dec_epilogue_with calls store(tok, col, v) for every (token tile row, output column) of the CTA, tok < 16 * MT.
#define DEC_RED_FLOATS ((DEC_WAVES - 1) * MT * 4 * 4 * 64)

template <class Store>
MXRT_DEVICE void dec_epilogue_with(const DecTile& t, mxrt_v4f (&acc)[MT][4], float* red, Store store) {
  const u32 tid = MXRT_TID_X, wave = tid / 64u, lane = mxrt_lane();
  if (wave > 0u) {
#pragma unroll
    for (u32 j = 0; j < MT; ++j)
#pragma unroll
      for (u32 i = 0; i < 4u; ++i)
#pragma unroll
        for (u32 r = 0; r < 4u; ++r) red[((((wave - 1u) * MT + j) * 4u + i) * 4u + r) * 64u + lane] = acc[j][i][r];
  }
  mxrt_sync();
  if (wave != 0u) return;
  const u32 q = lane / 16u, col0 = t.n0 + lane % 16u;
#pragma unroll
  for (u32 j = 0; j < MT; ++j)
#pragma unroll
    for (u32 i = 0; i < 4u; ++i)
#pragma unroll
      for (u32 r = 0; r < 4u; ++r) {
        float v = acc[j][i][r];
#pragma unroll
        for (u32 w = 0; w < DEC_WAVES - 1u; ++w) v += red[(((w * MT + j) * 4u + i) * 4u + r) * 64u + lane];
        store(16u * j + 4u * q + r, col0 + 16u * i, v);
        mxrt_sched_fence();  // one element at a time: hoisting every LDS read first took ~200 VGPRs
      }
}

// The dense store. mode MXRT_GEMM_MODE_STORE: element (z*m + t)*n + col of `out` in out_dtype (split_k = 1: out
// [m, n]; a split launch passes out_dtype f32 and out = the [split_k, m, n] workspace, reduced by
// gemm_mx_splitk_reduce); MXRT_GEMM_MODE_ATOMIC: fp32 atomic add into out [m, n] (f32; 16-bit outputs go through an
// fp32 workspace).
MXRT_DEVICE void dec_epilogue(const MxrtGemmArgs& g, const DecTile& t, mxrt_v4f (&acc)[MT][4], float* red) {
  dec_epilogue_with(t, acc, red, [&](u32 tok, u32 col, float v) {
    if (tok < g.m && col < g.n) {
      if (g.mode == MXRT_GEMM_MODE_ATOMIC) {
        mxrt_gemm_atomic_f32((float*)g.out + (u64)tok * g.n + col, v);
      } else {
        mxrt_gemm_store_one(g, t.split * g.m + tok, col, v);
      }
    }
  });
}

// The kernel entry's common part: arguments, operands (tokens a: rows [0, m); weights b: rows from n0).
// Code rows are 16-byte aligned (the launcher declines other shapes): `vec` is a constant, so the byte-load path of
// amd_gemm.h's loads is compiled out (with it the MT = 4 builds ran out of VGPRs).
#define DEC_OPERANDS(A4, B4)                                                                                     \
  const MxrtGemmArgs g = {a,      b,          sa,       sb,       out,       nullptr, nullptr, (u32)m, (u32)n,   \
                          (u32)k, (u32)split_k, a_layout, b_layout, out_dtype, mode,    0};                     \
  const DecTile t = dec_tile(g, MXRT_GEMM_BID_Z);                                                                \
  const u32 kb_total = (g.k + 31u) / 32u;                                                                        \
  const MxrtOperand ox = {a, sa, g.m, (A4) ? (g.k + 1u) / 2u : g.k, kb_total, 0u,                                \
                          true, (A4), mxrt_gemm_scale_addr(a_layout, kb_total)};  \
  const MxrtOperand ow = {b, sb, g.n, (B4) ? (g.k + 1u) / 2u : g.k, kb_total, t.n0,                              \
                          true, (B4), mxrt_gemm_scale_addr(b_layout, kb_total)}

// ---- MoE decode: the entries gemm_mx_decode_gfx950_moe / _gfx942_moe ------------------------------------------
// A CTA owns 64 rows of expert e = expert_ids[b] (b = grid y: a block of the vLLM moe_align_block_size layout) and
// chunk z (grid z) of DEC_MOE_SLOTS of the block's slots, as the dense kernel owns 64 weight rows and its tokens.
// Token rows are gathered: slot id reads activation row id / a_div (dec_moe_rows). The weight operand is expert
// e's [n, k] slice: code and scale bases moved by e * n rows in 64 bits (a weight tensor may pass 2^31 bytes, one
// expert's codes may not: the buffer offsets are 32-bit), so rows past n read zero like the dense kernel's tail.
// Wave 0 stores slot id's row of out [numel, n] (times topk_w[id] when given), in out_dtype. Blocks at or past
// num_tokens_post_padded[0], experts outside [0, E) and chunks without a slot leave at once (the op zeroes out
// first, so slots no CTA stores read 0). One K range (no split-K): grid z is the slot chunk.
#define DEC_MOE_SLOTS (16u * MT)

struct DecMoe {
  const i32* sorted_ids;   // [cap] slot ids, padding = numel
  const i32* expert_ids;   // [nblocks]
  const i32* ntpp;         // num_tokens_post_padded [1]
  u32 e_num, numel, a_div, block_size, cap;
};

// The chunk's slot ids into ids_s[64] (-1 for padding, slots past the block or the layout, ids outside
// [0, numel)) and the block's expert e; false when the CTA has nothing to do. Every thread of the CTA reads the same
// values, so every thread returns the same answer (the first return is before the barrier, for all of them).
MXRT_DEVICE bool dec_moe_slots(const DecMoe& mp, i32* ids_s, u32& e) {
  const u32 b = MXRT_BID_Y, chunk0 = MXRT_GEMM_BID_Z * DEC_MOE_SLOTS, tid = MXRT_TID_X;
  const i32 ntpp = *mp.ntpp, ex = mp.expert_ids[b];
  if ((u64)b * mp.block_size >= (u64)(ntpp < 0 ? 0 : ntpp) || ex < 0 || (u32)ex >= mp.e_num) return false;
  e = (u32)ex;
  if (tid < 64u) {
    const u64 i = (u64)b * mp.block_size + chunk0 + tid;
    i32 id = -1;
    if (tid < DEC_MOE_SLOTS && chunk0 + tid < mp.block_size && i < mp.cap) id = mp.sorted_ids[i];
    ids_s[tid] = (id >= 0 && (u32)id < mp.numel) ? id : -1;
  }
  mxrt_sync();
  u32 any = 0u;
  for (u32 r = 0; r < DEC_MOE_SLOTS; ++r) any |= (u32)(ids_s[r] >= 0);
  return any != 0u;
}

// DecRowsMoe of the chunk: slot id -> activation row id / a_div; padding -> m_act (zero codes, scale 127).
MXRT_DEVICE DecRowsMoe dec_moe_rows(const i32* ids_s, u32 a_div, u32 m_act) {
  const u32 lane = mxrt_lane();
  DecRowsMoe rows;
#pragma unroll
  for (u32 j = 0; j < MT; ++j) {
    const i32 id = ids_s[16u * j + lane % 16u];
    rows.r[j] = id >= 0 ? (u32)id / a_div : m_act;
  }
  const i32 id = ids_s[lane];
  rows.s = id >= 0 ? (u32)id / a_div : m_act;
  return rows;
}

// The MoE store: chunk row tok holds slot ids_s[tok]; out row id, column col, in g.out_dtype (times topk_w[id]).
MXRT_DEVICE void dec_moe_epilogue(const MxrtGemmArgs& g, const DecTile& t, mxrt_v4f (&acc)[MT][4], float* red,
                                  const i32* ids_s, const float* topk_w) {
  dec_epilogue_with(t, acc, red, [&](u32 tok, u32 col, float v) {
    const i32 id = ids_s[tok];
    if (id >= 0 && col < g.n) mxrt_gemm_store_one(g, (u32)id, col, topk_w != nullptr ? v * topk_w[id] : v);
  });
}

// The MoE entry's common part (the kernel's arguments by name; returns from the kernel when the CTA has no work):
// g (a = tokens [m_act, k], b = expert e's weights), t, ox, ow as DEC_OPERANDS, and xr the gathered token rows.
#define DEC_MOE_OPERANDS(A4, B4)                                                                                 \
  const DecMoe mp = {sorted_ids, expert_ids, num_tokens_post_padded, (u32)e_num, (u32)numel, (u32)a_div,       \
                     (u32)block_size, (u32)cap};                                                                 \
  u32 e = 0u;                                                                                                    \
  if (!dec_moe_slots(mp, ids_s, e)) return;                                                                      \
  const u32 kb_total = ((u32)k + 31u) / 32u, wrow = (B4) ? ((u32)k + 1u) / 2u : (u32)k;                         \
  const u64 erow = (u64)e * (u32)n;                                                                              \
  const MxrtGemmArgs g = {x, w + erow * wrow, sx, sw + erow * kb_total, out, nullptr, nullptr, (u32)m_act,       \
                          (u32)n, (u32)k, 1u, MXRT_SCALE_LAYOUT_NONE, MXRT_SCALE_LAYOUT_NONE, out_dtype,         \
                          MXRT_GEMM_MODE_STORE, 0};                                                              \
  const DecTile t = dec_tile(g, 0u);                                                                             \
  const MxrtOperand ox = {g.a, g.sa, g.m, (A4) ? (g.k + 1u) / 2u : g.k, kb_total, 0u,                            \
                          true, (A4), mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, kb_total)};                   \
  const MxrtOperand ow = {g.b, g.sb, g.n, wrow, kb_total, t.n0,                                                  \
                          true, (B4), mxrt_gemm_scale_addr(MXRT_SCALE_LAYOUT_NONE, kb_total)};                   \
  const DecRowsMoe xr = dec_moe_rows(ids_s, (u32)a_div, g.m)
