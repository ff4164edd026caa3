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
#include "../common/mx_dequant.h"
#include "../common/scale_layouts.h"

// the window (DqFmt) and the specials test: kernels_src/common/mx_dequant.h, shared with the dequantizer's GEMM gate
typedef DqFmt<WIN_FMT> Win;

// any of 16 codes a NaN / Inf code
MXRT_DEVICE u32 sp16(uint4 c) {
  return mxrt_fp8_special4<WIN_FMT>(c.x) | mxrt_fp8_special4<WIN_FMT>(c.y) | mxrt_fp8_special4<WIN_FMT>(c.z) |
         mxrt_fp8_special4<WIN_FMT>(c.w);
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
  bool bad = s != 255u && (s < Win::WIN_LO || s > Win::WIN_HI);
  if (!bad && s != 255u) {
    const uint4* p = reinterpret_cast<const uint4*>(codes + (u64)r * (u32)kp + 32u * b);
    const uint4 c0 = p[0];
    u32 sp = sp16(c0);
    if (32u * b + 16u < (u32)k) {
      const uint4 c1 = p[1];
      sp |= sp16(c1);
    }
    bad = sp != 0u;
  }
  if (bad) atomicOr(flag, 1u);
}
