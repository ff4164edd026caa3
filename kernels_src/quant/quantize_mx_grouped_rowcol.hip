// kernel   quantize_mx_grouped_rowcol                                                 (extern "C")
// computes in ONE read of x [total_m,k] both outputs of quantize_mx_grouped(colwise=True): the rowwise padded
//          layout (align) and the colwise one, x^T [k, m_col_ub] with blocks of 32 along M in col_align-padded
//          groups; padding gets zero codes, pad-only blocks scale 127 (mxrt.formats.grouped.quantize_mx_grouped)
// args     const IN* x [total_m,k] | const i64* offs [3,G+1] (offs, offs_pad_row, offs_pad_col) |
//          u8* q_row [m_ub,k] (e2m1: [m_ub,ceil(k/2)]) | u8* s_row [m_ub,ceil(k/32)] | u8* q_col [k,m_col_ub]
//          (e2m1: [k,m_col_ub/2]) | u8* s_col [k,m_col_ub/32] (SCALES_T: [m_col_ub/32,k]) | int num_groups,
//          int m_ub, int m_col_ub, int k | int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, _VEC_OUT,
//          _VEC_OUT_COL, _SCALES_T: s_col transposed, k % 16 == 0) | int n_tail | int workers
// grid     (workers + ceil(k/128) * n_tail, 1, 1): CTAs < workers walk the colwise layout's 32 x 128 tiles in
//          units of MXG_SUB along M (grid-stride); the others write the rowwise tail [offs_pad_row[G], m_ub)
//          block (256,1,1)   smem 32*132*4 + sizeof(MxgStage) bytes static + 3*(G+1)*4 dynamic
// defines  THREADS (= 256), FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*)               set by mxrt/ops/grouped.py
//          (variants: mxrt/ops/grouped_kernels.py)
// requires G <= MXRT_MAX_GROUPS (1024); col_align % 32 == 0 and col_align % align == 0 (a group's rowwise rows
//          lie inside its colwise tiles); total_m*k, m_ub*k, m_col_ub*k < 2^31; offsets from
//          quantize_mx_grouped_offsets                                          checked by mxrt/ops/grouped.py
#include "../common/mx_group.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE)
#error "THREADS, FMT and IN_DTYPE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS == 256, "quantize_mx_grouped_rowcol: THREADS must be 256 (128 row + 128 column blocks)");
// resident CTAs per SM / CU the build asks for (registers); the launcher sizes the persistent grid with it
#if defined(MXRT_HIP)
#define QRC_MIN_BLOCKS 2  // wave64 CDNA: 2 x 4 waves per CU leave 256 VGPRs a lane (3 spilled in 2-D fp6 builds)
#else
#define QRC_MIN_BLOCKS 4  // 64 registers, 8-24 bytes spilled; 6-7% faster than 3 (session 16 call 10)
#endif

#define TILE_M 32
#define TILE_K 128
#define TILE_PITCH (TILE_K + 4)  // 16-byte rows: 16-byte fills / row reads, 8 rows span the 32 banks

typedef MxrtFmt<FMT>::type Fmt;

constexpr u32 PER = 16 / MxrtIn<IN_DTYPE>::SIZE;  // input elements per 16-byte load
constexpr u32 VECS_PER_ROW = TILE_K / PER;
constexpr u32 LOADS = TILE_M * VECS_PER_ROW / THREADS;  // 16-byte loads per thread per tile (2 or 4)

// Where colwise tile row R0 lies: its group g (num_groups past the last), the tile's real rows (loaded) and
// rowwise rows (real + padding, stored), and the first source / rowwise destination row.
struct RcTile {
  i32 nreal, nrow, src0, dst0;
};
MXRT_DEVICE RcTile rc_tile(const i32* s_offs, const i32* s_prow, const i32* s_pcol, i32 num_groups, i32 R0) {
  RcTile w = {0, 0, 0, 0};
  const i32 g = mxg_find_group(s_pcol, num_groups, R0);
  if (g < num_groups) {
    const i32 i0 = R0 - s_pcol[g];
    const i32 len = s_offs[g + 1] - s_offs[g];
    const i32 len_row = s_prow[g + 1] - s_prow[g];
    w.nreal = len - i0 < 0 ? 0 : (len - i0 > TILE_M ? TILE_M : len - i0);
    w.nrow = len_row - i0 < 0 ? 0 : (len_row - i0 > TILE_M ? TILE_M : len_row - i0);
    w.src0 = s_offs[g] + i0;
    w.dst0 = s_prow[g] + i0;
  }
  return w;
}

// One tile's loads in flight: the raw 16-byte input vectors, zero past the real rows and past k. They stay raw
// until the next tile's staging (mxg_stage_tile), so a warp waits for them only there: unpacked at once, the
// conversion stalled every warp on its fresh loads before the encode (ncu, RESULTS.md session 17 call 1).
MXRT_DEVICE void rc_load(const void* __restrict__ x, u32 col0, RcTile w, u32 uk, i32 flags, mxrt_u32x4 (&raw)[LOADS]) {
  const u32 tid = MXRT_TID_X;
#pragma unroll
  for (u32 it = 0; it < LOADS; ++it) {
    const u32 v = it * THREADS + tid;
    const u32 r = v / VECS_PER_ROW;
    const u32 c = col0 + (v % VECS_PER_ROW) * PER;
    const u32 valid = (i32)r < w.nreal && c < uk ? uk - c : 0u;
    raw[it] = mxrt_load_raw16<IN_DTYPE>(x, ((u32)w.src0 + r) * uk + c, valid, flags & MXRT_FLAG_VEC_IN);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, QRC_MIN_BLOCKS)
    quantize_mx_grouped_rowcol(const void* __restrict__ x, const i64* __restrict__ offs, u8* __restrict__ q_row,
                               u8* __restrict__ s_row, u8* __restrict__ q_col, u8* __restrict__ s_col,
                               i32 num_groups, i32 m_ub, i32 m_col_ub, i32 k, i32 scale_mode, i32 flags,
                               i32 n_tail, i32 workers) {
  __shared__ __attribute__((aligned(16))) u32 tile[TILE_M * TILE_PITCH];
  __shared__ __attribute__((aligned(16))) MxgStage<Fmt> stage;
  // the three offset rows, G + 1 each, in dynamic shared memory: sized for MXG_MAX_GROUPS they put the static
  // total past the 48 KB that sm_75 / sm_80 / sm_89 builds allow
  extern __shared__ i32 rc_offsets[];
  i32* const s_offs = rc_offsets;
  i32* const s_prow = rc_offsets + (num_groups + 1);
  i32* const s_pcol = rc_offsets + 2 * (num_groups + 1);
  // SCALES_T: the transpose launch that follows (launched early) may take the SMs this grid leaves
  if (flags & MXRT_FLAG_SCALES_T) mxrt_grid_dependents_launch();
  mxg_load_offsets<THREADS>(offs, num_groups, 0, s_offs);
  mxg_load_offsets<THREADS>(offs, num_groups, 1, s_prow);
  mxg_load_offsets<THREADS>(offs, num_groups, 2, s_pcol);
  mxrt_sync();

  const u32 tid = MXRT_TID_X;
  const u32 uk = (u32)k;
  const u32 tiles_x = (uk + TILE_K - 1) / TILE_K;
  const u32 nb = (uk + MXRT_BLOCK - 1) / MXRT_BLOCK;
  const u32 row_bytes = Fmt::BITS == 4 ? (uk + 1) / 2 : uk;
  const bool is_row = tid < TILE_K;
  const u32 lane = tid % 32;      // tile row (row threads)
  const u32 cblk = tid / 32;      // column block in the tile (row threads, 0..3)
  const u32 ccol = tid - TILE_K;  // tile column (column threads)
  const u32 n_col_tiles = (u32)m_col_ub / TILE_M;
  u32 words[8];

  if (MXRT_BID_X >= (u32)workers) {
    // rowwise tail: rows [offs_pad_row[G], m_ub) get zero codes and scale 127, 32 rows per step; CTA
    // workers + j * tiles_x + tx takes column tile tx and tail step j. No barrier follows, so threads may leave.
    const u32 b = MXRT_BID_X - (u32)workers;
    const u32 c_row = (b % tiles_x) * TILE_K + cblk * MXRT_BLOCK;
    if (!is_row || c_row >= uk) return;
    const u32 valid = uk - c_row < MXRT_BLOCK ? uk - c_row : MXRT_BLOCK;
    const u32 nbytes = Fmt::BITS == 4 ? (valid + 1) / 2 : valid;
    const bool vec = (flags & MXRT_FLAG_VEC_OUT) && valid == MXRT_BLOCK;
    for (u32 r = (u32)s_prow[num_groups] + (b / tiles_x) * TILE_M + lane; r < (u32)m_ub; r += (u32)n_tail * TILE_M) {
      s_row[r * nb + c_row / MXRT_BLOCK] = (u8)MXG_PAD_SCALE;
      u8* dst = q_row + r * row_bytes + (Fmt::BITS == 4 ? c_row / 2 : c_row);
      if (vec) {
        const mxrt_u32x4 z = {0u, 0u, 0u, 0u};
#pragma unroll
        for (u32 v = 0; v < nbytes / 16; ++v) ((mxrt_u32x4*)dst)[v] = z;
      } else {
#pragma unroll 1
        for (u32 i = 0; i < nbytes; ++i) dst[i] = 0;
      }
    }
    return;
  }

  // ---- 32-row tiles of the colwise layout, MXG_SUB of them stacked per unit (unit u: column tile u % tiles_x, row
  // tiles MXG_SUB * (u / tiles_x) ...), a grid-stride loop over the workers with the next tile's loads in flight in
  // registers during the encode and stores; rows leave per tile, the colwise side per unit (mx_group.h) ----
  const u32 quads = (n_col_tiles + MXG_SUB - 1) / MXG_SUB;
  const u32 num_units = quads * tiles_x;
  const u32 col_bytes = Fmt::BITS == 4 ? (u32)m_col_ub / 2 : (u32)m_col_ub;
  mxrt_u32x4 raw[LOADS];
  u32 u = MXRT_BID_X;
  RcTile w = {0, 0, 0, 0};  // the tile in flight's rows (found once per tile, at its loads)
  if (u < num_units) {
    w = rc_tile(s_offs, s_prow, s_pcol, num_groups, (i32)(u / tiles_x * MXG_SUB * TILE_M));
    rc_load(x, (u % tiles_x) * TILE_K, w, uk, flags, raw);
  }
  for (; u < num_units; u += (u32)workers) {
    const u32 col0 = (u % tiles_x) * TILE_K;
    const u32 ty0 = (u / tiles_x) * MXG_SUB;
    const u32 nsub = n_col_tiles - ty0 < MXG_SUB ? n_col_tiles - ty0 : MXG_SUB;
    const u32 ncols = uk - col0 < TILE_K ? uk - col0 : TILE_K;  // col0 < k: valid columns, row elements
#pragma unroll 1
    for (u32 sub = 0; sub < nsub; ++sub) {
      mxg_stage_tile<IN_DTYPE, THREADS, TILE_PITCH>(raw, tile);
      mxrt_sync();
      const RcTile wt = w;  // this tile's rows
      if (sub + 1 < nsub) {
        w = rc_tile(s_offs, s_prow, s_pcol, num_groups, (i32)((ty0 + sub + 1) * TILE_M));
        rc_load(x, col0, w, uk, flags, raw);
      } else if (u + (u32)workers < num_units) {
        const u32 un_ = u + (u32)workers;
        w = rc_tile(s_offs, s_prow, s_pcol, num_groups, (i32)(un_ / tiles_x * MXG_SUB * TILE_M));
        rc_load(x, (un_ % tiles_x) * TILE_K, w, uk, flags, raw);
      }

      u32 bits[MXRT_BLOCK];
      if (is_row) {  // warp-uniform branch
#pragma unroll
        for (int i = 0; i < MXRT_BLOCK; i += 4) {
          const mxrt_u32x4 v = *(const mxrt_u32x4*)&tile[lane * TILE_PITCH + cblk * MXRT_BLOCK + i];
          bits[i] = v.x;
          bits[i + 1] = v.y;
          bits[i + 2] = v.z;
          bits[i + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < MXRT_BLOCK; ++i) bits[i] = tile[i * TILE_PITCH + ccol];
      }
      const bool real_block = is_row ? (i32)lane < wt.nreal : wt.nreal > 0;
      const u32 sb = real_block ? mxrt_e8m0_from_amax_bits<Fmt>(mxrt_amax_bits(bits), scale_mode) : MXG_PAD_SCALE;
      mxrt_encode_block<Fmt>(bits, sb, words);
      if (is_row) {
        mxg_stage_codes<Fmt>(stage.row + lane * MxgStage<Fmt>::RP + cblk * MxgStage<Fmt>::RB, words);
        stage.srow[lane * 4u + cblk] = (u8)sb;
      } else {
        mxg_stage_codes<Fmt>(stage.col + ccol * MxgStage<Fmt>::CP + sub * MxgStage<Fmt>::RB, words);
        stage.scol[ccol * MXG_SUB + sub] = (u8)sb;
      }
      mxrt_sync();  // staged; also: every read of tile is done, so the next tile may refill it
      mxg_store_rows<Fmt, THREADS>(stage, q_row + (u64)(u32)wt.dst0 * row_bytes + (Fmt::BITS == 4 ? col0 / 2 : col0),
                                   row_bytes, s_row + (u64)(u32)wt.dst0 * nb + col0 / MXRT_BLOCK, nb, (u32)wt.nrow,
                                   Fmt::BITS == 4 ? (ncols + 1) / 2 : ncols, (ncols + MXRT_BLOCK - 1) / MXRT_BLOCK,
                                   flags & MXRT_FLAG_VEC_OUT);
      // no barrier here: the next tile's first one orders these reads of `stage` before its staging writes
    }
    // the unit's colwise side, nsub blocks per column (staged before the last tile's second barrier)
    const u32 r0 = ty0 * TILE_M;
    u8* const qc = q_col + (u64)col0 * col_bytes + (Fmt::BITS == 4 ? r0 / 2 : r0);
    if (flags & MXRT_FLAG_SCALES_T) {  // s_col is [m_col_ub / 32, k]: transpose_u8 puts it in place after
      mxg_store_cols<Fmt, THREADS, false>(stage, qc, col_bytes, nullptr, 0u, ncols, nsub,
                                          flags & MXRT_FLAG_VEC_OUT_COL);
      mxg_store_col_scales_t<Fmt, THREADS>(stage, s_col + (u64)ty0 * uk + col0, uk, ncols, nsub);
    } else {
      mxg_store_cols<Fmt, THREADS>(stage, qc, col_bytes, s_col + (u64)col0 * ((u32)m_col_ub / MXRT_BLOCK) + ty0,
                                   (u32)m_col_ub / MXRT_BLOCK, ncols, nsub, flags & MXRT_FLAG_VEC_OUT_COL);
    }
  }
}
