export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
timeout 280 python3 -m pytest -q -x tests/test_gpu_gemm_decode.py tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | tail -4
timeout 300 python3 benchmarks/bench_decode.py --sweep 16x7168x4096,32x7168x4096,64x7168x4096 --fmts e4m3 2>&1 | grep -E "sweep|best"
timeout 100 python3 benchmarks/bench_decode.py --sweep 64x7168x4096 --fmts e2m1 2>&1 | grep -E "sweep|best"
