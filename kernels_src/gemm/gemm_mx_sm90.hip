// kernel   gemm_mx_sm90                                                               (extern "C")
// computes out[m,n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[n,kb]-127) * sum_{k in kb} A[m,k] * B[n,k] ("NT", MX block 32
//          along K): per k32 a wgmma m64n128k32 into P, acc = fma(P * 2^(sb-127), 2^(sa-127), acc) where a stage's
//          scales lie in [64, 190]; else promote_wide (exact for any pair, NaN for 255), a per-stage CTA flag.
//          Split z covers blocks [z*KB/split_k, (z+1)*KB/split_k), KB = ceil(k/32); ATOMIC=0 stores slice z of out
//          ([split_k,m,n], fp32 if split_k > 1), ATOMIC=1 adds (fp32 / bf16x2 / f16x2)
// args     const __grid_constant__ mxrt_tmap tma, tmb (CUtensorMaps by value: fp8 codes A [m,k], B [n,k], uint8,
//          boxes BM / BN x 128 bytes, SWIZZLE_128B, zero OOB fill) | const u8* sa [m,ceil(k/32)] | const u8* sb
//          [n,ceil(k/32)] (E8M0, row-major, or the storages of layouts SLA / SLB) | void* out | int m, int n,
//          int k, int split_k
// grid     (ceil(m/BM) * ceil(n/BN),1,split_k)   block (THREADS,1,1) = 128 per consumer warpgroup (no producer)
//          smem STAGES*(BM*128 + BN*128 + 16*BM + 16*(BN/4+4)) + 20*STAGES + 1024 B; BM 64..256 = 1..4 m64 blocks
// defines  A_FMT, B_FMT (E4M3 / E5M2), OUT_DTYPE, ATOMIC, BM, BN, STAGES, DBUF (two partials in flight), DIAG (0; 1, 2:
//          inexact diagnostics), SLA, SLB (MXRT_SCALE_LAYOUT_*; 5 = turbo16x4 words): mxrt/ops/gemm_sm90(_kernels).py
// requires sm_90a; k % 16 == 0, code bases 16-byte aligned (TMA); m, n, ceil(k/32) * max(m, n) < 2^31; 1 <= split_k
//          <= min(65535, ceil(k/32)); ATOMIC, 16-bit out: out 4-byte aligned, m*n even   checked by gemm_sm90.py
// the CTA tile (main loop, promotion, TMA ring), shared with the grouped kernel gemm_mx_grouped_sm90.hip
#include "gemm_sm90_tile.h"

#if defined(MXRT_CUDA)

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_mx_sm90(const __grid_constant__ mxrt_tmap tma, const __grid_constant__ mxrt_tmap tmb,
                 const u8* __restrict__ sa, const u8* __restrict__ sb, void* __restrict__ out, int m, int n, int k,
                 int split_k) {
  extern __shared__ u8 smem_raw[];
  const Sm90Smem S = sm90_smem(smem_raw);
  const u32 tiles_m = ((u32)m + BM - 1) / BM, tiles_n = ((u32)n + BN - 1) / BN;
  const u32 bid = MXRT_BID_X, per_group = GROUP_M * tiles_n, first_m = (bid / per_group) * GROUP_M;
  const u32 gsize = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
  const u32 tm = first_m + (bid % per_group) % gsize, tn = (bid % per_group) / gsize;
  const u32 m0 = tm * BM, n0 = tn * BN;
  // split z: scale blocks [kb0, kb1) (the reference's k_ranges)
  const u32 kbs = ((u32)k + 31u) / 32u, z = blockIdx.z;
  const u32 kb0 = (u32)((u64)z * kbs / (u32)split_k), kb1 = (u32)((u64)(z + 1u) * kbs / (u32)split_k);
  const void* ta = &tma;  // generic addresses of the kernel parameters (param space, __grid_constant__)
  const void* tb = &tmb;
#if !ATOMIC
  // deterministic split-K: split z writes slice z of the fp32 workspace [split_k, m, n]
  out = reinterpret_cast<u8*>(out) + (u64)z * (u32)m * (u32)n * (OUT_DTYPE == MXRT_OUT_F32 ? 4u : 2u);
#endif
  sm90_init(S, ta, tb);
  // row-major scales: the tiles' first scale rows; a preshuffled layout (SLA / SLB): the storage bases
  const Sm90Job job{SLA ? sa : sa + (u64)m0 * kbs, SLB ? sb : sb + (u64)n0 * kbs, kbs, kbs, (u32)m - m0, (u32)n - n0,
                    (i32)m0, (i32)n0, kb0, kb1};
  float acc0[64], acc1[64];  // acc1: columns 128..255 (BN = 256) or rows + 64 (BM = 256); unused otherwise
  sm90_mainloop(S, job, ta, tb, acc0, acc1);
  // ---- epilogue: straight from the accumulator registers, masked at the M / N edges
  sm90_store(out, acc0, acc1, m0, n0, m, n, (n & 1) == 0, sm90_keep_all{});
}

#endif  // MXRT_CUDA
