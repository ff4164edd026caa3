"""What quantize_mx_dual's SCALES_T transpose costs on this GPU (session 20): the bf16 -> e4m3 1-D dual with its scales
stored transposed, timed with CUDA-graph replays alone (no transpose: its scales are left transposed, the floor any
transpose can approach), with session 19's transpose (64 x 64 tiles, one 16-byte chunk per thread; the source file
kernels_src/quant/transpose_u8_s19.hip, untracked: `git show 3f9895b:kernels_src/quant/transpose_u8.hip >
kernels_src/quant/transpose_u8_s19.hip`; its rows are skipped without it) and with the working tree's, both launched
early as the op does; the dual itself launched early (griddepcontrol.wait at its start, an edited build) with and
without a transpose that triggers its dependents, also after a 16 MB copy (a predecessor that knows nothing of PDL);
then each transpose alone on the scales in L2, and a device copy of the op's bytes (RESULTS.md session 20, calls 1-2).

python3 benchmarks/transpose_diag.py [MxK ...]   (default 4096x7168 7168x4096 8192x8192; one line per variant)
"""

import sys

import cupy
import numpy as np

from mxrt import codes
from mxrt.ops import quant as q_ops
from mxrt.ops.kernels import select
from mxrt.runtime import LaunchConfig, get_arch
from mxrt.runtime.compiler import build
from mxrt.runtime.launch import launch
from mxrt.runtime.source import stamped_source

SHAPES = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1:]] or [(4096, 7168), (7168, 4096), (8192, 8192)]
ARCH = get_arch()


def kernel(file, symbol, defs):
    src = stamped_source(file, ARCH.target)
    return cupy.RawModule(code=src, options=("-std=c++17", f"-arch={ARCH.target}", *defs)).get_function(symbol)


DUAL = build(select("quantize_mx_dual", ARCH.target), q_ops.dual_defines("e4m3", "bfloat16", None, False), ARCH)
NEW = q_ops.transpose_kernel(ARCH)
try:
    OLD = kernel("quant/transpose_u8_s19.hip", "transpose_u8", ("-DTHREADS=256",))
except Exception as e:  # not carried: the new kernel's rows only
    print(f"transpose_diag: no session-19 transpose ({type(e).__name__}), its rows skipped")
    OLD = None
# the dual as a programmatic dependent itself: it waits for the kernel before it at its start (launched early, its
# CTAs take the SMs while that kernel runs); the transpose that triggers the next launch at its start
_TRIG = "  if (flags & MXRT_FLAG_SCALES_T) mxrt_grid_dependents_launch();"
_WAIT = "  mxrt_grid_dependency_wait();  // launched early after the quantizer"


def edited(file, symbol, defs, old, new):
    src = stamped_source(file, ARCH.target)
    if old not in src:
        raise SystemExit(f"transpose_diag: {old!r} not in {file}")
    src = src.replace(old, new)
    return cupy.RawModule(code=src, options=("-std=c++17", f"-arch={ARCH.target}", *defs)).get_function(symbol)


_DDEFS = [f"-D{k}={v}" for k, v in q_ops.dual_defines("e4m3", "bfloat16", None, False)]
DUAL_W = edited(
    "quant/quantize_mx_dual.hip", "quantize_mx_dual", _DDEFS, _TRIG, "  mxrt_grid_dependency_wait();\n" + _TRIG
)
NEW_T = edited(
    "quant/transpose_u8.hip", "transpose_u8", ("-DTHREADS=256",), _WAIT, "  mxrt_grid_dependents_launch();\n" + _WAIT
)


def old_launch(src0, dst0, src1, dst1):
    """Session 19's launch geometry (64 x 64 tiles)."""
    (r0, c0), (r1, c1) = src0.shape, src1.shape
    tiles0 = -(-r0 // 64) * -(-c0 // 64)
    tiles = tiles0 + -(-r1 // 64) * -(-c1 // 64)
    i32 = np.int32
    return LaunchConfig(grid=(tiles, 1, 1), block=(256, 1, 1)), (src0, dst0, i32(r0), i32(c0), src1, dst1, i32(r1),
                                                                  i32(c1), i32(tiles0))  # fmt: skip


def timed(fn, reps=40):
    """Microseconds per call: CUDA-graph replays of ``reps`` calls (host launch time excluded), best of 5."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        fn()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(reps):
            fn()
        graph = stream.end_capture()
        graph.launch(stream)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        best = None
        for _ in range(5):
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            t = cupy.cuda.get_elapsed_time(start, stop) / reps * 1e3
            best = t if best is None else min(best, t)
    return best


def measure(m, k):
    # bf16 bits of a normal sample (as the bench's rows; cupy has no bfloat16)
    f = cupy.random.default_rng(0).standard_normal((m, k), dtype=cupy.float32)
    x = (f.view(cupy.uint32) >> 16).astype(cupy.uint16)
    q_row, q_col = cupy.empty((m, k), cupy.uint8), cupy.empty((k, m), cupy.uint8)
    s_row, s_col = cupy.empty((m, k // 32), cupy.uint8), cupy.empty((k, m // 32), cupy.uint8)
    flags, cfg = q_ops.dual_launch(m, k, "bfloat16", x.data.ptr, q_row.data.ptr, q_col.data.ptr, "e4m3")
    sr, sc, t_flag, (tcfg, targs) = q_ops.dual_scale_targets(
        m, k, "t", s_row, s_col, lambda shape: cupy.empty(shape, cupy.uint8)
    )
    args = (x, q_row, sr, q_col, sc, np.int32(m), np.int32(k))
    args += (np.int32(codes.SCALE_MODE_CODES["rceil"]), np.int32(flags | t_flag))
    ocfg, oargs = old_launch(sr, s_row, sc, s_col)
    nbytes = 2 * m * k + 2 * m * k + s_row.nbytes + s_col.nbytes

    def dual():
        DUAL(cfg.grid, cfg.block, args)

    def run(tk, c, a):
        def fn():
            dual()
            launch("transpose_diag", tk, c, a, early=True)

        return fn

    def dual_w():
        launch("transpose_diag", DUAL_W, cfg, args, early=True)

    def run_w(tk):
        def fn():
            dual_w()
            launch("transpose_diag", tk, tcfg, targs, early=True)

        return fn

    pre_src, pre_dst = cupy.empty(16 << 20, cupy.uint8), cupy.empty(16 << 20, cupy.uint8)

    def after_copy(fn):
        def f():
            cupy.copyto(pre_dst, pre_src)  # a kernel that knows nothing of PDL before each call
            fn()

        return f

    results = {}
    for name, fn in [
        ("dual, no transpose", dual),
        ("dual early, no transpose", dual_w),
        *([("dual + transpose s19", run(OLD, ocfg, oargs))] if OLD is not None else []),
        ("dual + transpose new", run(NEW, tcfg, targs)),
        ("dual early + tr new", run_w(NEW)),
        ("dual early + tr trigger", run_w(NEW_T)),
        ("copy16M, dual + tr", after_copy(run(NEW, tcfg, targs))),
        ("copy16M, dual early + tr", after_copy(run_w(NEW))),
        ("copy16M alone", after_copy(lambda: None)),
    ]:
        results[name] = timed(fn)
    same = None
    if OLD is not None:
        run(NEW, tcfg, targs)()
        want = (s_row.copy(), s_col.copy())
        s_row.fill(0)
        s_col.fill(0)
        run(OLD, ocfg, oargs)()
        same = all(bool((a == b).all()) for a, b in zip(want, (s_row, s_col), strict=True))
        results["transpose s19 alone"] = timed(lambda: OLD(ocfg.grid, ocfg.block, oargs))
    results["transpose new alone"] = timed(lambda: NEW(tcfg.grid, tcfg.block, targs))
    dst = cupy.empty(nbytes // 2, cupy.uint8)
    srcb = cupy.empty(nbytes // 2, cupy.uint8)
    results["copy of the op's bytes"] = timed(lambda: cupy.copyto(dst, srcb))
    print(f"{m} x {k}: old and new transposes give the same scales: {same}; tiles {ocfg.grid[0]} / {tcfg.grid[0]}")
    for name, us in results.items():
        copy = results["copy of the op's bytes"]
        share = f"{copy / us * 100:5.1f}% of the copy" if "alone" not in name and "copy16M" not in name else ""
        print(f"  {name:24s} {us:8.2f} us   {share}")


for m, k in SHAPES:
    measure(m, k)
    cupy.get_default_memory_pool().free_all_blocks()
