// kernel   quantize_mx_rowwise                                                        (extern "C")
// computes s[r,b] = e8m0(amax(x[r, 32b : 32b+32])),  q[r,j] = enc(x[r,j] / 2^(s[r,j/32] - 127)), RNE, saturating;
//          NaN/Inf block -> s = 0xFF and q = NaN code; e2m1 codes packed two per byte (even element low nibble)
// args     const IN* x [m,k] | u8* q [m,k] (e2m1: [m,ceil(k/2)]) | u8* s [m,ceil(k/32)] | int m, int k |
//          int scale_mode (MXRT_SCALE_*) | int flags (MXRT_FLAG_VEC_IN, MXRT_FLAG_VEC_OUT)
// grid     (ceil(m * ceil(k/32) / THREADS),1,1)   block (THREADS,1,1)   smem 0
// defines  THREADS, FMT, IN_DTYPE                                              set by mxrt/ops/quant.py
// requires m*k < 2^31; flag VEC_IN: x 16-byte aligned, k*sizeof(IN) % 16 == 0; flag VEC_OUT: q 16-byte
//          aligned, row bytes % 16 == 0                                         checked by mxrt/ops/quant.py
#include "../common/mx_block.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE)
#error "THREADS, FMT and IN_DTYPE must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");

typedef MxrtFmt<FMT>::type Fmt;

// One thread per 32-element block; consecutive threads take consecutive blocks of a row, so a warp reads
// 32 * 32 contiguous elements.
extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_rowwise(const void* __restrict__ x, u8* __restrict__ q, u8* __restrict__ s, i32 m, i32 k,
                        i32 scale_mode, i32 flags) {
  const u32 nb = ((u32)k + MXRT_BLOCK - 1) / MXRT_BLOCK;
  const u32 g = MXRT_BID_X * THREADS + MXRT_TID_X;
  if (g >= (u32)m * nb) return;
  const u32 r = g / nb;
  const u32 col0 = (g - r * nb) * MXRT_BLOCK;
  const u32 valid = (u32)k - col0;  // >= 1; > 32 means a full block

  u32 bits[MXRT_BLOCK];
  mxrt_load_block<IN_DTYPE>(x, r * (u32)k + col0, valid, flags & MXRT_FLAG_VEC_IN, bits);
  const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(mxrt_amax_bits(bits), scale_mode);
  s[g] = (u8)sb;

  u32 words[8];
  mxrt_encode_block<Fmt>(bits, sb, words);
  const u32 row_bytes = Fmt::BITS == 4 ? ((u32)k + 1) / 2 : (u32)k;
  const u32 col_byte = Fmt::BITS == 4 ? col0 / 2 : col0;
  mxrt_store_block<Fmt>(q + r * row_bytes + col_byte, words, valid, flags & MXRT_FLAG_VEC_OUT);
}
