// kernel   quantize_mx_rowwise                                                        (extern "C")
// computes s[r,b] = e8m0(amax(x[r, 32b : 32b+32])),  q[r,j] = enc(x[r,j] / 2^(s[r,j/32] - 127)), RNE, saturating;
//          NaN/Inf block -> s = 0xFF and q = NaN code; e2m1 codes packed two per byte (even element low nibble);
//          SCALE_LAYOUT != 0: each scale byte goes straight to its offset in the preshuffled layout
//          (kernels_src/common/scale_layouts.h == mxrt.layouts.scale_index), padding bytes written 127
// args     const IN* x [m,k] | u8* q [m,k] (e2m1: [m,ceil(k/2)]) | u8* s: [m,ceil(k/32)], or SCALE_LAYOUT's
//          padded storage (sm*sn bytes) | int m, int k | int scale_mode (MXRT_SCALE_*) |
//          int flags (MXRT_FLAG_VEC_IN, MXRT_FLAG_VEC_OUT, MXRT_FLAG_FLAT)
// grid     FLAT: (ceil(m*k / (THREADS * 4 * 16 / sizeof(IN))),1,1)   else (ceil(m*ceil(k/32)/THREADS),1,1)
//          block (THREADS,1,1)   smem 0   (any grid writes the whole padding: grid-stride loop)
// defines  THREADS, FMT (MXRT_FMT_*), IN_DTYPE (MXRT_IN_*), SCALE_LAYOUT (MXRT_SCALE_LAYOUT_*, mx_codes.h)
//                                                 set by mxrt/ops/quant.py (variants: mxrt/ops/quant_kernels.py)
// requires m*k < 2^31, scale storage < 2^31 bytes; flag VEC_IN: x 16-byte aligned, k*sizeof(IN) % 16 == 0;
//          flag VEC_OUT: q 16-byte aligned, row bytes % 16 == 0; flag FLAT: k % 32 == 0, x and q 16-byte aligned
//                                                                                  checked by mxrt/ops/quant.py
#include "../common/mx_block.h"
#include "../common/scale_layouts.h"

#if !defined(THREADS) || !defined(FMT) || !defined(IN_DTYPE) || !defined(SCALE_LAYOUT)
#error "THREADS, FMT, IN_DTYPE and SCALE_LAYOUT must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");
MXRT_STATIC_ASSERT(SCALE_LAYOUT >= MXRT_SCALE_LAYOUT_NONE && SCALE_LAYOUT <= MXRT_SCALE_LAYOUT_DEEPGEMM_UE8M0,
                   "SCALE_LAYOUT: MXRT_SCALE_LAYOUT_NONE .. _DEEPGEMM_UE8M0 (mx_codes.h)");

typedef MxrtFmt<FMT>::type Fmt;
typedef MxrtScaleLayout<SCALE_LAYOUT> Layout;

#define PER (16u / MxrtIn<IN_DTYPE>::SIZE)                 // elements per 16-byte chunk: 8 (16-bit) or 4 (fp32)
#define LPB (MXRT_BLOCK / PER)                             // lanes per 32-element block: 4 or 8
#define CODE_BYTES (Fmt::BITS == 4 ? PER / 2 : PER)        // code bytes per chunk
#define UNROLL 4u                                          // chunks per lane, all loads in flight at once

// FLAT (k % 32 == 0: x, q and plain scales are 1-D streams): a warp takes 32 * UNROLL consecutive 16-byte
// chunks, lane l chunk u*32 + l, so every load instruction reads 512 contiguous bytes and every store writes
// 32 * CODE_BYTES contiguous bytes. The LPB lanes of a block combine their amax with xor shuffles.
MXRT_DEVICE void rowwise_flat(const void* __restrict__ x, u8* __restrict__ q, u8* __restrict__ s, u32 m, u32 k,
                              i32 scale_mode) {
  const u32 lane = MXRT_TID_X % 32u;
  const u32 nchunks = m * (k / PER);
  const u32 base = (MXRT_BID_X * (THREADS / 32u) + MXRT_TID_X / 32u) * (32u * UNROLL);
  const Layout layout(m, k / MXRT_BLOCK);
  mxrt_u32x4 v[UNROLL];
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = base + u * 32u + lane;
    if (c < nchunks) {
      v[u] = ((const mxrt_u32x4*)x)[c];
    } else {
      v[u].x = v[u].y = v[u].z = v[u].w = 0u;
    }
  }
#pragma unroll
  for (u32 u = 0; u < UNROLL; ++u) {
    const u32 c = base + u * 32u + lane;  // nchunks is a multiple of LPB: a block is all in or all out
    u32 bits[PER];
    mxrt_unpack16<IN_DTYPE>(v[u], bits);
    u32 amax = mxrt_amax_n<PER>(bits);
#pragma unroll
    for (u32 o = 1; o < LPB; o <<= 1) {
      const u32 other = mxrt_shfl_xor(amax, (i32)o);
      amax = other > amax ? other : amax;
    }
    const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(amax, scale_mode);
    u32 words[(CODE_BYTES + 3) / 4];
    mxrt_encode_chunk<Fmt, PER>(bits, sb, words);
    if (c < nchunks) {
      mxrt_store_codes<CODE_BYTES>(q + c * CODE_BYTES, words, CODE_BYTES, true);
      if (lane % LPB == 0) {
        const u32 g = c / LPB;  // block index, = r * (k/32) + column block
        const u32 nb = k / MXRT_BLOCK;
        s[SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE ? g : layout.offset(g / nb, g % nb)] = (u8)sb;
      }
    }
  }
}

// Any shape or alignment: one thread per 32-element block; consecutive threads take consecutive blocks of a
// row (a partial last block behaves as zero-padded).
MXRT_DEVICE void rowwise_blocks(const void* __restrict__ x, u8* __restrict__ q, u8* __restrict__ s, u32 m, u32 k,
                                i32 scale_mode, i32 flags) {
  const u32 nb = (k + MXRT_BLOCK - 1) / MXRT_BLOCK;
  const u32 g = MXRT_BID_X * THREADS + MXRT_TID_X;
  if (g >= m * nb) return;
  const u32 r = g / nb;
  const u32 col0 = (g - r * nb) * MXRT_BLOCK;
  const u32 valid = k - col0;  // >= 1; > 32 means a full block

  u32 bits[MXRT_BLOCK];
  mxrt_load_block<IN_DTYPE>(x, r * k + col0, valid, flags & MXRT_FLAG_VEC_IN, bits);
  const u32 sb = mxrt_e8m0_from_amax_bits<Fmt>(mxrt_amax_bits(bits), scale_mode);
  const Layout layout(m, nb);
  s[SCALE_LAYOUT == MXRT_SCALE_LAYOUT_NONE ? g : layout.offset(r, g - r * nb)] = (u8)sb;

  u32 words[8];
  mxrt_encode_block<Fmt>(bits, sb, words);
  const u32 row_bytes = Fmt::BITS == 4 ? (k + 1) / 2 : k;
  const u32 col_byte = Fmt::BITS == 4 ? col0 / 2 : col0;
  mxrt_store_block<Fmt>(q + r * row_bytes + col_byte, words, valid, flags & MXRT_FLAG_VEC_OUT);
}

extern "C" __global__ void __launch_bounds__(THREADS)
    quantize_mx_rowwise(const void* __restrict__ x, u8* __restrict__ q, u8* __restrict__ s, i32 m, i32 k,
                        i32 scale_mode, i32 flags) {
  if (flags & MXRT_FLAG_FLAT) {
    rowwise_flat(x, q, s, (u32)m, (u32)k, scale_mode);
  } else {
    rowwise_blocks(x, q, s, (u32)m, (u32)k, scale_mode, flags);
  }
#if SCALE_LAYOUT != MXRT_SCALE_LAYOUT_NONE
  const Layout layout((u32)m, ((u32)k + MXRT_BLOCK - 1) / MXRT_BLOCK);
  layout.write_padding(s, MXRT_BID_X * THREADS + MXRT_TID_X, MXRT_NBID_X * THREADS);
#endif
}
