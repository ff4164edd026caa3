"""Where `quantize_mx_dual`'s DRAM time goes on this GPU (session 18): the bf16 -> e4m3 1-D build on [M, K] timed
with CUDA events beside variants that skip its global code or scale stores (the work stays: a store behind a
condition that never holds), and a 16-byte copy of the same input bytes.

python3 benchmarks/dual_diag.py [M K]   (prints one line per variant: us, GB/s of the traffic it moves)
"""

import sys

import cupy
import numpy as np

from mxrt import codes
from mxrt.runtime import get_arch
from mxrt.runtime.source import stamped_source

M, K = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (8192, 8192)
DEFS = ("-DTHREADS=256", "-DFMT=0", "-DIN_DTYPE=1", "-DBLOCK_2D=0", "-DSCALE_LAYOUT=0")
# the kernel's stores, made conditional on a value they never take (the codes and staging still computed)
NO_COL = ("mxrt_put16(qc +", "if (nbytes == 0xFFFFFFFFu) mxrt_put16(qc +")
_ROW = "mxrt_store_codes<ROW_CODE_BYTES>("
NO_ROW = (_ROW, "if (words[0] == 0x12345678u && r == 0xFFFFFFFFu) " + _ROW)
NO_SROW = ("  if (lead) {", "  if (lead && sb == 0xFFFFu) {")
_SCOL = "for (u32 c = tid; c < ncols"
NO_SCOL = (_SCOL + "; c += THREADS) {", _SCOL + " && m == 0xFFFFFFFFu; c += THREADS) {")
VARIANTS = {"full": (), "no q_col stores": (NO_COL,), "no q_row stores": (NO_ROW,), "no code stores": (NO_COL, NO_ROW)}
VARIANTS.update({"no s_row stores": (NO_SROW,), "no s_col stores": (NO_SCOL,), "no scale stores": (NO_SROW, NO_SCOL)})


def build(edits):
    src = stamped_source("quant/quantize_mx_dual.hip", get_arch().target)
    for old, new in edits:
        if old not in src:
            raise SystemExit(f"dual_diag: {old!r} not in the kernel source")
        src = src.replace(old, new)
    return cupy.RawModule(code=src, options=("-std=c++17", f"-arch={get_arch().target}", *DEFS)).get_function(
        "quantize_mx_dual"
    )


def timed(fn, reps=50):
    for _ in range(5):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / reps * 1e3


x = cupy.random.default_rng(0).standard_normal((M, K), dtype=cupy.float32).astype(cupy.float16).view(cupy.uint16)
q_row, q_col = cupy.empty((M, K), cupy.uint8), cupy.empty((K, M), cupy.uint8)
s_row, s_col = cupy.empty((M, K // 32), cupy.uint8), cupy.empty((K, M // 32), cupy.uint8)
flags = np.int32(codes.FLAG_VEC_IN | codes.FLAG_VEC_OUT | codes.FLAG_VEC_OUT_COL)
args = (x, q_row, s_row, q_col, s_col, np.int32(M), np.int32(K), np.int32(codes.SCALE_MODE_CODES["rceil"]), flags)
grid = ((K + 127) // 128, (M + 63) // 64, 1)
moved = {"full": 2 * M * K + 2 * (M * K + M * K // 32)}
moved["no q_col stores"] = moved["no q_row stores"] = 2 * M * K + M * K + 2 * M * K // 32
moved["no code stores"] = 2 * M * K + 2 * M * K // 32
moved["no s_row stores"] = moved["no s_col stores"] = moved["full"] - M * K // 32
moved["no scale stores"] = moved["full"] - 2 * M * K // 32
for name, edits in VARIANTS.items():
    k = build(edits)
    us = timed(lambda k=k: k(grid, (256, 1, 1), args))
    print(f"{name:18s} {us:8.1f} us  {moved[name] / us / 1e3:7.1f} GB/s")
dst = cupy.empty_like(x)
us = timed(lambda: cupy.copyto(dst, x))
print(f"{'copy of x':18s} {us:8.1f} us  {2 * x.nbytes / us / 1e3:7.1f} GB/s")
