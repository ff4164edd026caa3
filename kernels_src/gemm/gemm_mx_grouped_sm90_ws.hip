// kernel   gemm_mx_grouped_sm90_ws                                                    (extern "C")
// computes grouped MX GEMMs out[rows of group g] = a_g @ b_g.T (MODE 0 lens, 1 indices, 2 masked) as
//          gemm_mx_grouped_sm90.hip, on the issue-10 engine (gemm_sm90_ws_engine.h: persistent CTAs, TMA + scale
//          producer warpgroup, two consumer warpgroups): the CTAs walk a grouped work list built on the device
// args     const __grid_constant__ mxrt_tmap tma (A codes [m, kp] u8, box 128 x 128, SWIZZLE_128B, zero OOB fill), tmb
//          (B codes [G*n, kp], row stride >= kp, box 128 x 128) | const u8* sa [m, sa_stride] | sb [G*n, sb_stride]
//          (E8M0; SCALE_F32 float32 per 128 K, sb per 128 rows; row-major, strides in bytes) | void* out [m, n] | const
//          void* groups (MODE 0 lens [G] / 2 masked_m [G]: int32, int64 with flags & 2; MODE 1 ids int32 [m]) | u32 m,
//          n, k, sa_stride, sb_stride, num_groups, max_m (MODE 2) | u32 flags (1: n even and out aligned to 2
//          elements, pairs stored as one word; 2: int64 groups)
// grid     (min(#SMs, tiles_m * ceil(n/128)),1,1) persistent; tiles_m: MODE 0 ceil(m/128)+G+1, 1 ceil(m/128), 2
//          G*ceil(max_m/128) (bounds: the device list may be shorter, CTAs past it exit); block (384,1,1) as
//          gemm_mx_sm90_ws; smem: the engine's (ring + staging) + GWS_SCHED_BYTES (the schedule)
// defines  MODE (0, 1, 2), A_FMT, B_FMT (e2m1 expanded first), OUT_DTYPE (bf16 / f16), STAGES, SCALE_F32 (1:
//          DeepGEMM's float32 scales, a 1x128, b [G ceil(n/128), *] 128x128), set by mxrt/ops/grouped_gemm_sm90_ws.py
// requires sm_90a; kp % 16 == 0, code bases and B's row stride 16-byte aligned (TMA), scale bases 4-byte aligned
//          (word copies); m, G*n, (m or G*n) * scale stride < 2^31; MODE 0 / 2 G <= MXRT_MAX_GROUPS, MODE 2
//          G*ceil(max_m/128)*128 < 2^31; G >= 1           checked by grouped_gemm_sm90_ws.py unsupported()
//
// The work list (every role walks it itself: the TMA warp, the scale warps, the consumers; gemm_grouped_ws_walk.h):
// MODE 0 lens:    gemm_grouped_tiles.h's gg_lens_tiles in shared memory (row offsets starts[] and row-tile prefix
//                 tiles[] of the G groups and of the tail group G, rows [S, m) past the last group); the list is the
//                 tiles[G + 1] x ceil(n/128) tiles in the dense engine's GROUP_M raster, row tile y belongs to group
//                 gg_find(tiles, G + 1, y). The tail group's tiles have no stages: the consumers store zeros.
// MODE 1 indices: the ceil(m/128) x ceil(n/128) tiles of out; per tile one round per group id among its rows
//                 (ascending; ids < 0 or >= G are no group), each storing the rows whose id is the round's (rows of
//                 no group are never written). The next id of a tile is a warp reduction over its 128 ids, so the
//                 walk steps warp-collectively (the TMA loop runs on the whole warp 8).
// MODE 2 masked:  group z owns rows [z * max_m, + clamp(masked_m[z], 0, max_m)); gg_masked_tiles lists only the
//                 row tiles holding rows (tiles[] in shared memory), so no CTA walks empty space; other rows untouched.
// A's TMA box starts at the tile's first row (rows of the next group come along, scale factor 0, never stored), B's
// at row g*n + n0 (columns past n likewise); scales are read per group row (row-major strides sa_stride / sb_stride).
#if defined(BM) || defined(SPLIT) || defined(SLA) || defined(SLB)
#error "gemm_mx_grouped_sm90_ws fixes the engine's tile, split and scale layouts itself"
#endif
#if !defined(MODE)
#error "MODE must be defined by the launcher"
#endif
#define BM 128
#define BN 128
#define ATOMIC 0
#define DBUF 0
#define DIAG 0
#define SPLIT 0
#define WS_MODE 0
#define SLA 0  // MXRT_SCALE_LAYOUT_NONE: the grouped operands' scales are row-major (one row per group row)
#define SLB 0
#include "gemm_sm90_ws_engine.h"

MXRT_STATIC_ASSERT(MODE >= 0 && MODE <= 2, "MODE: 0 lens, 1 indices, 2 masked (the wgrad runs on gemm_mx_grouped_sm90)");
MXRT_STATIC_ASSERT(OUT_DTYPE == MXRT_OUT_BF16 || OUT_DTYPE == MXRT_OUT_F16, "OUT_DTYPE: bf16 / f16");

#if defined(MXRT_CUDA)
// gemm_grouped_tiles.h's block-wide scans run over the whole CTA (gemm_sm90_tile.h's THREADS counts the old tile's
// 256 consumer threads, used only inside its own functions)
#undef THREADS
#define THREADS WS_THREADS
#include "gemm_grouped_ws_walk.h"

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
    gemm_mx_grouped_sm90_ws(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                            const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out,
                            const void* __restrict__ groups, u32 m, u32 n, u32 k, u32 sa_stride, u32 sb_stride,
                            u32 num_groups, u32 max_m, u32 flags) {
  extern __shared__ u8 smem_raw[];
  const Sm90Smem S = sm90_smem(smem_raw);
  // the schedule after the staging rings (the engine's shared memory is untouched by it)
  u8* sched = reinterpret_cast<u8*>(S.wide_s + STAGES + 3u * WS_AHEAD * 256u * WS_WORDS);
  sched += (8u - (smem_addr(sched) & 7u)) & 7u;
  i64* part = reinterpret_cast<i64*>(sched);
  i32* starts = reinterpret_cast<i32*>(part + THREADS);
  i32* tiles = starts + (MXRT_MAX_GROUPS + 2);
  const u32 lens_i64 = (flags & GWS_FLAG_I64) ? 1u : 0u;
  gws_schedule(groups, lens_i64, num_groups, m, max_m, starts, tiles, part);
  const GwsWalk wk(groups, starts, tiles, m, n, k, sa_stride, sb_stride, num_groups, max_m, flags);
  ws_engine(S, wk, &tma, &tmb, sa, sb, out);
}

#endif  // MXRT_CUDA
