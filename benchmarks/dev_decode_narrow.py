"""Development timing of the wgmma decode path on narrow cells (issue 12, session 13): where a split-K call's time
goes. Per cell and split: the kernel alone writing its fp32 slices, the deterministic call (kernel + reduce launch),
the atomic call (zero fill + kernel with packed atomics), against cuBLAS bf16; CUDA-graph replays over weight sets
larger than 3x the L2.

    python3 benchmarks/dev_decode_narrow.py MxNxK[,MxNxK...] [splits, e.g. 1,2,4,6,8] [fmt e4m3|e2m1]
"""

from __future__ import annotations

import dataclasses
import sys


def main() -> int:
    import cupy
    import torch

    import mxrt
    from mxrt.bench import core
    from mxrt.ops import gemm as gemm_op
    from mxrt.ops import gemm_decode_wg as W
    from mxrt.ops.gemm_splitk import F32, workspace
    from mxrt.problems import gemm_problem

    shapes = core.parse_shapes(sys.argv[1], 3)
    splits = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "1,2,4,6,8").split(",")]
    fmt = sys.argv[3] if len(sys.argv) > 3 else "e4m3"
    l2 = core.l2_bytes()
    for m, n, k in shapes:
        rng = cupy.random.default_rng(0)
        x32 = rng.standard_normal((m, k), dtype=cupy.float32)
        qx = mxrt.quantize_mx(x32, "e4m3")
        w32 = rng.standard_normal((n, k), dtype=cupy.float32)
        q0 = mxrt.quantize_mx(w32, fmt)
        nbytes = q0.data.nbytes + q0.scales.nbytes
        sets = core.n_input_sets(nbytes, l2)
        ws = [q0] + [mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), fmt) for _ in range(sets - 1)]
        wb = torch.from_dlpack(w32).to(torch.bfloat16)
        xb = torch.from_dlpack(x32).to(torch.bfloat16)
        wbs = [wb] + [torch.randn_like(wb) for _ in range(core.n_input_sets(wb.numel() * 2, l2) - 1)]
        t_torch, _ = core.time_torch([lambda w=w, xb=xb: torch.matmul(xb, w.t()) for w in wbs], 7, log=lambda *_: None)
        del wbs
        plan = W.plan(m, n, k, 1)
        print(f"narrow {m}x{n}x{k} {fmt}: cuBLAS bf16 {t_torch * 1e6:.2f} us; plan {plan}; "
              f"{nbytes / 1e6:.1f} MB of weights")  # fmt: skip
        for det in (True, False):
            dgs = [gemm_op.device_gemm(gemm_problem(qx, w, deterministic=det)) for w in ws]
            for s in splits:
                if s > k // 128:
                    continue
                t, _ = core.time_cupy([lambda dg=dg, s=s: W.run(dg, split=s) for dg in dgs], 7, log=lambda *_: None)
                line = f"  split {s:2d} {'det' if det else 'atomic'}: call {t * 1e6:7.2f} us ({t_torch / t:4.2f}x)"
                if det and s > 1:
                    slices = workspace((s, m, n), zero=False)
                    dss = [dataclasses.replace(dg, p=dataclasses.replace(dg.p, split_k=s)) for dg in dgs]
                    launches = [lambda dg=dg, ws=slices: W._launch(dg, ws, F32, False, {}) for dg in dss]
                    tk, _ = core.time_cupy(launches, 7, log=lambda *_: None)
                    line += f"  kernel alone {tk * 1e6:7.2f} us ({nbytes / tk / 1e12:4.2f} TB/s)"
                print(line)
            del dgs
        del ws
    return 0


if __name__ == "__main__":
    sys.exit(main())
