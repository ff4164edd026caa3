"""Development timing of the wgmma decode kernel's parts (issue 12): the full kernel against its DWG_DIAG builds
(1: the producer and memory pipeline alone, consumers only wait and release; 2: plus the wgmmas, no promotion), and
an NCU-friendly single run. CUDA-graph replays over weight sets larger than 3x the L2.

    python3 benchmarks/dev_decode_wg_diag.py MxNxK[,MxNxK...] [nc ns stages pw] [--once DIAG] [--lineinfo]

``--once DIAG`` launches that build four times and stops (for ncu); ``--lineinfo`` builds with line info.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

import mxrt
from mxrt.bench import core
from mxrt.ops import gemm as gemm_op
from mxrt.ops import gemm_decode_kernels as K
from mxrt.ops import gemm_decode_wg as W
from mxrt.ops.gemm_sm90 import tensor_map_arg
from mxrt.problems import gemm_problem
from mxrt.runtime.compiler import build
from mxrt.runtime.kernel_spec import defines
from mxrt.runtime.launch import LaunchConfig, launch


def main() -> int:
    import cupy

    once = None
    if "--once" in sys.argv:
        i = sys.argv.index("--once")
        once = int(sys.argv[i + 1])
        del sys.argv[i : i + 2]
    if "--lineinfo" in sys.argv:
        sys.argv.remove("--lineinfo")
        from mxrt.runtime import compiler

        plain = compiler.compile_options
        compiler.compile_options = lambda arch, d: (*plain(arch, d), "-lineinfo")
    shapes = core.parse_shapes(sys.argv[1], 3)
    nc, ns, stages, pw = (int(v) for v in sys.argv[2:6]) if len(sys.argv) > 5 else (2, 1, 8, 4)
    spec = K.GEMM_MX_DECODE_SM90_WG
    spec = dataclasses.replace(spec, required=(*spec.required, "DWG_DIAG"))
    l2 = core.l2_bytes()
    for m, n, k in shapes:
        nt = next(t for t in K.WG_NT if t >= m)
        rng = cupy.random.default_rng(0)
        qx = mxrt.quantize_mx(rng.standard_normal((m, k), dtype=cupy.float32), "e4m3")
        q0 = mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), "e4m3")
        sets = core.n_input_sets(q0.data.nbytes + q0.scales.nbytes, l2)
        ws = [q0] + [mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), "e4m3") for _ in range(sets - 1)]
        nbytes = q0.data.nbytes + q0.scales.nbytes
        dgs = [gemm_op.device_gemm(gemm_problem(qx, w)) for w in ws]
        arch = dgs[0].arch
        smem = K.wg_smem_bytes(nt, nc, stages, ns)
        for diag in (0, 2, 1) if once is None else (once,):
            d = defines(**dict(K.wg_variant(0, 0, 0, nt, nc, 1, stages, ns, pw)), DWG_DIAG=diag)
            kern = build(spec, d, arch)
            if kern.max_dynamic_shared_size_bytes < smem:
                kern.max_dynamic_shared_size_bytes = smem
            cfg = LaunchConfig((-(-n // 64), 1, 1), (128 * nc + 32 * pw, 1, 1), smem)

            def go(dg, kern=kern, cfg=cfg, m=m, n=n, k=k, nt=nt):
                tmx = tensor_map_arg(dg.a_codes.data.ptr, m, k, nt)
                tmw = tensor_map_arg(dg.b_codes.data.ptr, n, k, 64)
                u32 = np.uint32
                args = (tmx, tmw, dg.a_scales, dg.b_scales, dg.b_codes, dg.out, u32(m), u32(n), u32(k), u32(1))
                launch("gemm_mx", kern, cfg, args)

            if once is not None:
                for dg in dgs:
                    go(dg)
                cupy.cuda.Device().synchronize()
                return 0
            t, _ = core.time_cupy([lambda dg=dg: go(dg) for dg in dgs], 7, log=lambda *_: None)
            what = {0: "full kernel", 1: "pipeline only (DIAG 1)", 2: "pipeline + wgmma (DIAG 2)"}[diag]
            print(f"{m}x{n}x{k} nc={nc} ns={ns} pw={pw} stages={stages} {what:32s}: {t * 1e6:7.2f} us  "
                  f"{nbytes / t / 1e12:5.2f} TB/s of weight bytes")  # fmt: skip
        t, _ = core.time_cupy([lambda dg=dg: W.run(dg, nc=nc, ns=ns, stages=stages, pw=pw, split=1) for dg in dgs], 7,
                              log=lambda *_: None)  # fmt: skip
        print(f"  (through gemm_decode_wg.run: {t * 1e6:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
