#!/usr/bin/env bash
# Session 8 device call 1 (nvidia-h200-x2): W = 2 expert parallelism on main as it is. Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
step() { echo; echo "=== $*"; }
step device; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvidia-smi topo -m
python3 -c "import torch, torch.distributed as d; print(torch.__version__, torch.cuda.device_count(), d.is_nccl_available(), torch.cuda.nccl.version())"
step "all-to-all probe"
cat > /tmp/a2a.py <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl"); r = dist.get_rank(); torch.cuda.set_device(r)
for mb in (64, 512, 1024):
    n = mb * 2**20; x = torch.empty(n, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
    for _ in range(3): dist.all_to_all_single(y, x)
    torch.cuda.synchronize(); s, e = torch.cuda.Event(True), torch.cuda.Event(True); s.record()
    for _ in range(10): dist.all_to_all_single(y, x)
    e.record(); torch.cuda.synchronize(); ms = s.elapsed_time(e) / 10
    if r == 0: print(f"all_to_all {mb} MiB per rank: {ms:.3f} ms, off-rank {n/2/ms/1e6:.0f} GB/s a direction")
dist.destroy_process_group()
PY
torchrun --standalone --nproc-per-node 2 /tmp/a2a.py 2>&1 | grep -v Warning
step "pytest"
python3 -m pytest -q -m gpu tests/test_ep.py tests/test_ep_readme.py tests/test_gpu_layouts.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest.txt" | tail -8
step "check W=2"
torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --tokens 1000 --hidden 1024 --inter 512 --experts 32 --topk 8 2>&1 | grep -E "rank|check"
torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --tokens 1000 --hidden 1024 --inter 512 --experts 32 --topk 8 --uneven 2>&1 | grep -E "rank|check"
step "bench W=2"
timeout 300 torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --bench --hidden 7168 --inter 2048 --experts 256 --layer-experts 32 --bench-tokens 4096 8192 16384 --iters 10 2>&1 | tee "$OUT/bench.txt" | grep -E "bench|layer|Error|error"
