"""A small run of mxrt.ep.dispatch's fused layout on one GPU for compute-sanitizer (memcheck, racecheck): the four
EP layout kernels (route count / scatter, both row gathers, the receive map) on MX payloads whose rows move in
16-, 8- and 1-byte units, a bf16 payload, int32 / int64 ids, many route CTAs, no tokens, and bad ids; every result
bitwise the torch layout. A world of one without NCCL (the sanitizers and NCCL's kernels do not mix well): the
two all-to-alls of a one-rank group are copies, patched in here. Prints the mismatches; exit status 1 on any."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

import mxrt
from mxrt.ep import _transport as tp
from mxrt.ep import dispatch
from mxrt.errors import ShapeError


def main() -> int:
    quick = "--quick" in sys.argv
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    tp.all_to_all_equal = lambda x, group: x.clone()
    tp.all_to_all_into = lambda out, x, group: out.copy_(x)
    tp.all_to_all_v = lambda x, send, recv, group: x.clone()
    dev = torch.device("cpu" if "--cpu" in sys.argv else "cuda")  # --cpu: a dry run of this script on the twins
    bad = 0
    cases = [(37, 128, 8, 3), (20, 96, 4, 2), (0, 64, 4, 2), (257, 256, 16, 8)]
    cases += [] if quick else [(600, 7168, 256, 8)]  # 4800 pairs: 5 route CTAs
    for t, h, e, k in cases:
        g = torch.Generator(device=dev).manual_seed(t + h)
        x = torch.randn(t, h, device=dev, generator=g).to(torch.bfloat16)
        ids = torch.argsort(torch.rand(t, e, device=dev, generator=g), 1)[:, :k].contiguous()
        w = torch.rand(t, k, device=dev, generator=g)
        for payload, tid in ((mxrt.quantize_mx(x), ids), (x, ids.to(torch.int32))):
            got = {}
            for layout in ("torch", "fused"):
                os.environ["MXRT_EP_DISPATCH"] = layout
                got[layout] = dispatch(payload, tid, w, num_experts=e)
            (gt, ht), (gf, hf) = got["torch"], got["fused"]
            same = [torch.equal(getattr(ht, n), getattr(hf, n)) for n in ("order", "recv_to_grouped", "group_lens")]
            if isinstance(payload, torch.Tensor):
                same.append(torch.equal(gt.view(torch.uint8), gf.view(torch.uint8)))
            else:
                same += [torch.equal(gt.data, gf.data), torch.equal(gt.scales, gf.scales)]
            if not all(same):
                bad += 1
                print(f"MISMATCH t={t} h={h} e={e} k={k} {type(payload).__name__}: {same}")
        if t:
            wrong = ids.clone()
            wrong[t // 2, 0] = -1
            wrong[0, k - 1] = e + 5
            try:
                dispatch(mxrt.quantize_mx(x), wrong, w, num_experts=e)
                bad += 1
                print(f"MISMATCH t={t}: bad ids did not raise")
            except ShapeError:
                pass
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"ep fused smoke: {len(cases)} shapes, {bad} mismatches")
    return int(bool(bad))


if __name__ == "__main__":
    sys.exit(main())
