// sm90_async.h: the sm_90a PTX wrappers the Hopper GEMM kernels share (gemm_sm90_tile.h and its users, and the
// decode kernels gemm_decode_sm90.h and gemm_mx_decode_sm90_wg.hip): small float vectors, the CUtensorMap argument
// type, shared addresses, mbarrier init / wait / arrive (+ expect_tx), the 2D TMA load, 16-byte cp.async, the e2m1 ->
// e4m3 widening (2^-6 times the values), the K-major 128-byte-swizzle wgmma descriptor and wgmma fence / commit /
// wait. Included inside the including file's `#if defined(MXRT_CUDA)`.
#pragma once

struct __attribute__((aligned(16))) f32x4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) f32x2 {
  float x, y;
};
// CUtensorMap (cuda.h is not available under NVRTC): 128 opaque bytes, 64-byte aligned, passed by value
struct __attribute__((aligned(64))) mxrt_tmap {
  u64 opaque[16];
};

MXRT_DEVICE u32 smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

MXRT_DEVICE void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
MXRT_DEVICE void mbar_wait(u32 bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
MXRT_DEVICE void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
MXRT_DEVICE void mbar_arrive_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
MXRT_DEVICE void tma_load_2d(u32 dst, const void* tmap, u32 bar, i32 c0, i32 c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same for a 3-D map (the aiter 16x16 weight layout's row tiles: gemm_decode_sm90.h, WLB)
MXRT_DEVICE void tma_load_3d(u32 dst, const void* tmap, u32 bar, i32 c0, i32 c1, i32 c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
          "r"(dst),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// cp.async of 16 bytes; src_bytes 0 fills zeros and reads nothing (rows past a matrix's end)
MXRT_DEVICE void sm90_cp16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// 8 e2m1 codes (w, element 0 in bits 0..3) -> 8 e4m3 bytes of 2^-6 times their values (lo: elements 0..3, hi:
// 4..7): code s.e1.e0.m becomes s.000.e1.e0.m.00, exponent field e and mantissa m00 (e4m3 bias 7 against e2m1's 1;
// the subnormal 0.5 = 0.1 x 2^0 lands on e4m3's subnormal 0.100 x 2^-6), so a byte shift and masks replace the
// table look-ups (~9 instructions per 8 codes against ~14 for exact values through byte permutes). Users multiply
// SM90_LO6_MUL(fmt) per operand back into a scale factor (exact: a power of two, products stay normal).
MXRT_DEVICE void sm90_e2m1x8_lo6(u32 w, u32& lo, u32& hi) {
  const u32 ev = ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);  // elements 0, 2, 4, 6 (low nibbles)
  const u32 od = ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u);         // elements 1, 3, 5, 7 (high nibbles)
  lo = __byte_perm(ev, od, 0x5140u);
  hi = __byte_perm(ev, od, 0x7362u);
}
// what an operand of format F read through sm90_e2m1x8_lo6 (e2m1) or as is (fp8) must be multiplied by
#define SM90_LO6_MUL(F) ((F) == MXRT_FMT_E2M1 ? 64.0f : 1.0f)

// K-major operand tile with 128-byte rows written by TMA with SWIZZLE_128B: 8-row groups 1024 bytes apart (SBO),
// layout type 1 (128B swizzle) in bits 62-63; a k32 step inside the row advances the start address by 32 bytes.
MXRT_DEVICE u64 make_desc(u32 saddr) {
  return (u64)((saddr & 0x3FFFFu) >> 4) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

MXRT_DEVICE void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MXRT_DEVICE void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
MXRT_DEVICE void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
