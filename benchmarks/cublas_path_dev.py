"""Development timing of the sm90_cublas GEMM path and the GPU dequantizer (session 10), CUDA-graph replays:

- dequant: ``dequantize_mx`` e4m3 / e2m1 -> bf16 at [8192, 8192] against a device copy of the same bytes
  (read + write) in the same run;
- fp32 vs bf16 out of ``sm90_cublas`` at 8192^3 and the MoE shapes (MXFP8);
- crossover: ``sm90_cublas`` against ``sm90_ws`` (bf16 out) and ``sm90_bf16`` (fp32 out) over m at n, k = 7168, 4096.

    python benchmarks/cublas_path_dev.py [--sections dequant,outs,crossover]
"""

from __future__ import annotations

import argparse
import os

import cupy

import mxrt
from mxrt.ops.gemm_paths import DeviceGemm, gemm_paths
from mxrt.problems import gemm_problem
from mxrt.runtime import get_arch


def graph_time_us(fn, reps: int = 20) -> float:
    """Median-free mean of ``reps`` replays of one captured call (after a warm-up call), in microseconds."""
    fn()
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        fn()
        g = s.end_capture()
    g.launch(stream=s)
    s.synchronize()
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    e0.record(s)
    for _ in range(reps):
        g.launch(stream=s)
    e1.record(s)
    e1.synchronize()
    return cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / reps


def operands(m: int, n: int, k: int, fa: str = "e4m3", fb: str = "e4m3"):
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=cupy.float32)
    w = rng.standard_normal((n, k), dtype=cupy.float32)
    return mxrt.quantize_mx(x, fa), mxrt.quantize_mx(w, fb)


def path_call(name: str, qa, qb, out_dtype: str):
    arch = get_arch()
    path = next(p for p in gemm_paths(arch.target) if p.name == name)
    p = gemm_problem(qa, qb, out_dtype=out_dtype)
    out = cupy.empty((p.m, p.n), cupy.float32 if out_dtype == "float32" else cupy.uint16)
    old = os.environ.get("MXRT_GEMM_PATH")
    os.environ["MXRT_GEMM_PATH"] = name
    try:
        dg = DeviceGemm(p, qa.data, qb.data, qa.scales, qb.scales, out, arch)
        why = path.supports(dg)
    finally:
        os.environ.pop("MXRT_GEMM_PATH") if old is None else os.environ.__setitem__("MXRT_GEMM_PATH", old)
    if why is not None:
        return None, why
    return (lambda: path.run(dg)), ""


def tflops(m, n, k, us):
    return 2 * m * n * k / us / 1e6


def _dequant_launcher(fmt: str, ch: int):
    from mxrt.ops.dequant import launch_dequant

    q = mxrt.quantize_mx(cupy.random.default_rng(1).standard_normal((8192, 8192), dtype=cupy.float32), fmt)
    out = cupy.empty((8192, 8192), cupy.uint16)
    gate = cupy.zeros(1, cupy.uint32)
    arch = get_arch()

    def run():
        launch_dequant("dev", q.data, q.scales, out, 8192, 8192, 8192, fmt, None, "bfloat16", arch, gate, ch=ch)

    return q, run


def section_dequant() -> None:
    print(
        "## dequant [8192, 8192] -> bf16 with the gate (the GEMM's pass; graph replays) vs a copy kernel of the bytes"
    )
    for fmt in ("e4m3", "e2m1"):
        for ch in (8, 16):
            q, run = _dequant_launcher(fmt, ch)
            us = graph_time_us(run)
            nbytes = q.data.nbytes + q.scales.nbytes + 8192 * 8192 * 2
            src = cupy.empty(nbytes // 2, cupy.uint8)
            dst = cupy.empty_like(src)
            cu = graph_time_us(lambda src=src, dst=dst: cupy.copyto(dst, src))  # reads + writes nbytes
            print(f"{fmt} CH={ch}: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s; copy kernel of the same bytes {cu:.1f} "
                  f"us = {nbytes / cu / 1e3:.0f} GB/s; ratio {cu / us:.2f}")  # fmt: skip


def section_dequant_once() -> None:
    """One launch per (format, CH), for ncu."""
    for fmt in ("e4m3",):
        for ch in (8, 16):
            _, run = _dequant_launcher(fmt, ch)
            run()
            cupy.cuda.Device().synchronize()


def section_outs() -> None:
    print("## sm90_cublas bf16 vs fp32 out (MXFP8), and sm90_bf16 fp32 in the same run (TFLOP/s)")
    for m, n, k in ((8192, 8192, 8192), (4096, 4096, 7168), (4096, 7168, 2048), (4096, 5760, 2880)):
        qa, qb = operands(m, n, k)
        row = []
        for name, out in (("sm90_cublas", "bfloat16"), ("sm90_cublas", "float32"), ("sm90_bf16", "float32")):
            fn, why = path_call(name, qa, qb, out)
            row.append(f"{name}/{out} " + (f"{tflops(m, n, k, graph_time_us(fn)):.1f}" if fn else f"- ({why})"))
        print(f"{m}x{n}x{k}: " + " | ".join(row))


def section_crossover() -> None:
    print("## crossover over m at n, k = 7168, 4096 (MXFP8; TFLOP/s, graph replays)")
    n, k = 7168, 4096
    for m in (65, 128, 256, 384, 512, 1024, 2048):
        qa, qb = operands(m, n, k)
        row = []
        for name, out in (("sm90_cublas", "bfloat16"), ("sm90_ws", "bfloat16"), ("sm90_cublas", "float32"),
                          ("sm90_bf16", "float32")):  # fmt: skip
            fn, _ = path_call(name, qa, qb, out)
            row.append(f"{name}/{out[:4]} " + (f"{tflops(m, n, k, graph_time_us(fn)):.1f}" if fn else "-"))
        print(f"m={m}: " + " | ".join(row))


def section_eager() -> None:
    """Wall time per eager ``mxrt.gemm_mx`` call (CuPy MXArrays, 200 calls, one sync at the end): the small-call plan
    (prepared launches) vs every call through path.run (``MXRT_LAUNCH=cupy``), and sm90_ws planned, beside the
    graph-replayed kernel time."""
    import time

    print("## eager calls (us per call, 200 calls, one sync) vs the graph-replayed kernels")
    for m in (65, 128, 512):
        qa, qb = operands(m, 7168, 4096)
        row = []
        for label, env in (("cublas plan", {}), ("cublas no plan", {"MXRT_LAUNCH": "cupy"}),
                           ("ws plan", {"MXRT_GEMM_PATH": "sm90_ws"})):  # fmt: skip
            old = {k_: os.environ.get(k_) for k_ in env}
            os.environ.update(env)
            try:
                from mxrt.api import gemm as api_gemm

                api_gemm.clear_plans()
                for _ in range(5):
                    mxrt.gemm_mx(qa, qb)
                cupy.cuda.Device().synchronize()
                t = time.perf_counter()
                for _ in range(200):
                    mxrt.gemm_mx(qa, qb)
                cupy.cuda.Device().synchronize()
                row.append(f"{label} {(time.perf_counter() - t) / 200 * 1e6:.1f}")
            finally:
                for k_, v in old.items():
                    os.environ.pop(k_) if v is None else os.environ.__setitem__(k_, v)
        fn, _ = path_call("sm90_cublas", qa, qb, "bfloat16")
        row.append(f"kernels (graph) {graph_time_us(fn):.1f}")
        print(f"m={m}: " + " | ".join(row))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="dequant,outs,crossover")
    args = ap.parse_args()
    print(get_arch())
    for s in args.sections.split(","):
        sections = {"dequant": section_dequant, "dequant_once": section_dequant_once, "outs": section_outs,
                    "crossover": section_crossover, "eager": section_eager}  # fmt: skip
        sections[s]()
        cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
