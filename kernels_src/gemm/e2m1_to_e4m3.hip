// kernel   e2m1_to_e4m3                                                               (extern "C")
// computes q8[r,j] = e4m3 code of the e2m1 value at q4[r,j] for j < k, 0 for k <= j < kp (every e2m1 value is
//          exact in e4m3: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}); feeds the fp8 tensor cores of gemm_mx_sm90
// args     const u8* q4 [rows,ceil(k/2)] (packed, even j in the low nibble) | u8* q8 [rows,kp] | int rows, int k,
//          int kp
// grid     (min(ceil(rows*kp/16/THREADS), 65535),1,1)   block (THREADS,1,1)   smem 0   (grid-stride loop)
// defines  THREADS                                  set by mxrt/ops/gemm_sm90.py (specs: mxrt/ops/gemm_sm90_kernels.py)
// requires kp % 16 == 0, kp >= k, q8 16-byte aligned, rows*kp < 2^35 (u32 chunk index) checked by gemm_sm90.py
#include "../common/mx_warp.h"

#if !defined(THREADS)
#error "THREADS must be defined by the launcher"
#endif
MXRT_STATIC_ASSERT(THREADS % 64 == 0 && THREADS <= 1024, "THREADS: a multiple of the wave size, at most 1024");

// e2m1 code (sign in bit 3) -> e4m3 byte: 0.5 = 0x30, 1 = 0x38, 1.5 = 0x3C, 2 = 0x40, 3 = 0x44, 4 = 0x48, 6 = 0x4C
MXRT_DEVICE u32 e2m1_e4m3(u32 c) {
  const u32 mag = c & 7u;
  const u32 v = mag == 0u ? 0u : (mag == 1u ? 0x30u : 0x38u + ((mag - 2u) << 2));
  return v | ((c & 8u) << 4);
}

extern "C" __global__ void __launch_bounds__(THREADS)
    e2m1_to_e4m3(const u8* __restrict__ q4, u8* __restrict__ q8, int rows, int k, int kp) {
  const u32 chunks_per_row = (u32)kp / 16u, total = (u32)rows * chunks_per_row;
  const u32 kin = ((u32)k + 1u) / 2u;
  for (u32 c = MXRT_BID_X * THREADS + MXRT_TID_X; c < total; c += THREADS * MXRT_NBID_X) {
    const u32 r = c / chunks_per_row, j0 = (c % chunks_per_row) * 16u;
    const u8* src = q4 + (u64)r * kin;
    u32 words[4];
#pragma unroll
    for (u32 w = 0; w < 4u; ++w) {
      u32 acc = 0;
#pragma unroll
      for (u32 b = 0; b < 2u; ++b) {
        const u32 jb = j0 + 4u * w + 2u * b;  // element index of the low nibble
        const u32 byte = jb < (u32)k ? src[jb / 2u] : 0u;
        const u32 lo = e2m1_e4m3(byte & 15u);
        const u32 hi = jb + 1u < (u32)k ? e2m1_e4m3(byte >> 4) : 0u;
        acc |= (lo | (hi << 8)) << (16u * b);
      }
      words[w] = acc;
    }
    mxrt_u32x4 v;
    v.x = words[0];
    v.y = words[1];
    v.z = words[2];
    v.w = words[3];
    *reinterpret_cast<mxrt_u32x4*>(q8 + (u64)r * (u32)kp + j0) = v;
  }
}
