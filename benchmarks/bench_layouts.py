"""Timings of the GPU scale preshuffles and moe_align_block_size (not a test).

``python benchmarks/bench_layouts.py``: preshuffle of the scales of an [8192, 8192] MX tensor (8192 x 256 bytes)
into every layout, with the bytes moved against a device-to-device copy of the same size, and
moe_align_block_size on decode and prefill routing shapes (one-CTA and multi-CTA paths).
"""

from __future__ import annotations

import cupy
import numpy as np
from _timing import timed

import mxrt
from mxrt.ops import moe as moe_ops


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"device {mxrt.runtime.get_arch().name}")
    s = cupy.asarray(rng.integers(0, 256, (8192, 256), dtype=np.uint8))
    dst = cupy.empty_like(s)
    t_copy = timed(lambda: dst.__setitem__(slice(None), s), iters=50)
    print(f"{'d2d copy 2 MiB':36s} {t_copy * 1e6:8.1f} us")
    for layout, dtype in [("aiter32x8", None), ("turbo16x4", None), ("turbo16x4", np.uint32), ("cublas128x4", None)]:
        t = timed(lambda layout=layout, dtype=dtype: mxrt.preshuffle_scales(s, layout, dtype=dtype), iters=50)
        name = f"preshuffle {layout}{'/u32' if dtype else ''} 8192x256"
        print(f"{name:36s} {t * 1e6:8.1f} us  ({t_copy / t * 100:5.1f}% of copy speed)")
    t = timed(lambda: mxrt.preshuffle_scales(s, "deepgemm_ue8m0"), iters=50)
    print(f"{'preshuffle deepgemm_ue8m0 8192x256':36s} {t * 1e6:8.1f} us")
    for tokens, topk, e, bs in [(1, 8, 256, 16), (64, 8, 256, 16), (512, 8, 256, 64), (4096, 8, 256, 128)]:
        ids = cupy.asarray(rng.integers(0, e, (tokens, topk)).astype(np.int32))
        for tokens_x in (tokens, tokens * 8):
            if tokens_x != tokens and tokens != 4096:
                continue
            idx = ids if tokens_x == tokens else cupy.tile(ids, (8, 1))
            plan = moe_ops.plan_moe_align(int(idx.size), e)
            path = "1 CTA" if plan.small else f"{plan.num_ctas} CTAs"
            t = timed(lambda idx=idx, bs=bs, e=e: mxrt.moe_align_block_size(idx, bs, e), iters=50)
            name = f"moe_align T={tokens_x} topk={topk} E={e} bs={bs}"
            print(f"{name:36s} {t * 1e6:8.1f} us  ({path})")


if __name__ == "__main__":
    main()
