// kernel   mx_gemm_window_check                                                        (extern "C")
// computes flag[0] |= 1 when one MX operand holds anything the bf16 route (gemm_mx_sm90_bf16) would not compute
//          exactly: a scale byte outside its format's window (e4m3 [10, 134], e5m2 [17, 142]; 255 = NaN is fine)
//          or a NaN / Inf code inside a block whose scale is finite. flag is zeroed by the launcher before.
// args     const u8* codes [rows, kp] (fp8 bytes) | const u8* scales (row-major [rows, kbs] or layout SL) |
//          u32* flag | int rows | int k (valid columns) | int kp (row stride, % 16 == 0) | int kbs
// grid     (ceil(rows * kbs / 256), 1, 1); block (256,1,1): one thread per (row, MX block): its scale byte and
//          its 32 codes as two 16-byte loads (the second past k skipped)
// defines  WIN_FMT (e4m3 / e5m2), SL (MXRT_SCALE_LAYOUT_* 0..4, 5 = turbo16x4 as uint32 words)
// requires rows * kbs < 2^31, code base 16-byte aligned.   Checked by mxrt/ops/gemm_sm90_bf16.py
#include "../common/mx_gemm.h"
#include "../common/scale_layouts.h"

#if WIN_FMT == MXRT_FMT_E4M3
#define WIN_LO 10u
#define WIN_HI 134u
#else
#define WIN_LO 17u
#define WIN_HI 142u
#endif

// any byte of w a NaN (e4m3: magnitude 0x7F) or Inf / NaN (e5m2: exponent 31) code
MXRT_DEVICE u32 special4(u32 w) {
#if WIN_FMT == MXRT_FMT_E4M3
  const u32 x = w & 0x7F7F7F7Fu;
  return (x + 0x01010101u) & 0x80808080u;
#else
  const u32 x = w & 0x7C7C7C7Cu;
  return (x + 0x04040404u) & 0x80808080u;
#endif
}

extern "C" __global__ void __launch_bounds__(256)
    mx_gemm_window_check(const u8* __restrict__ codes, const u8* __restrict__ scales, u32* __restrict__ flag,
                         int rows, int k, int kp, int kbs) {
  const u32 i = MXRT_BID_X * 256u + MXRT_TID_X;
  if (i >= (u32)rows * (u32)kbs) return;
  const u32 r = i / (u32)kbs, b = i % (u32)kbs;
  u64 off;
  if constexpr (SL == MXRT_SCALE_LAYOUT_TURBO16X4_U32)
    off = (u64)MxrtScaleLayout<MXRT_SCALE_LAYOUT_TURBO16X4>((u32)rows, (u32)kbs).offset(r, b) << 2;
  else if constexpr (SL == MXRT_SCALE_LAYOUT_NONE)
    off = (u64)r * (u32)kbs + b;
  else
    off = MxrtScaleLayout<SL>((u32)rows, (u32)kbs).offset(r, b);
  const u32 s = scales[off];
  bool bad = s != 255u && (s < WIN_LO || s > WIN_HI);
  if (!bad && s != 255u) {
    const uint4* p = reinterpret_cast<const uint4*>(codes + (u64)r * (u32)kp + 32u * b);
    const uint4 c0 = p[0];
    u32 sp = special4(c0.x) | special4(c0.y) | special4(c0.z) | special4(c0.w);
    if (32u * b + 16u < (u32)k) {
      const uint4 c1 = p[1];
      sp |= special4(c1.x) | special4(c1.y) | special4(c1.z) | special4(c1.w);
    }
    bad = sp != 0u;
  }
  if (bad) atomicOr(flag, 1u);
}
