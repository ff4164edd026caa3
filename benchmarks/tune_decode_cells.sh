#!/usr/bin/env bash
# Tune the decode cells of benchmarks/bench_decode.py (DeepSeek-V3 / Llama-70B decode GEMMs at TP 1 and 8) with
# `mxrt tune gemm` on the present GPU, writing $OUT/tuned_decode.json (merge it into mxrt/data/tuned_decode.json to
# ship it). MS: the token counts (default 1,2,4,8,16,32,64); SIGINT at the deadline keeps the cells measured so far.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
SHAPES=$(python3 - <<PY
import importlib.util
spec = importlib.util.spec_from_file_location("bd", "benchmarks/bench_decode.py")
bd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bd)
ms = [int(x) for x in "${MS:-1,2,4,8,16,32,64}".split(",")]
print(",".join(sorted({f"{m}x{n}x{k}" for (_, _, _, m, n, k) in bd.cells([1, 8], ms, False)})))
PY
)
echo "cells: $(echo "$SHAPES" | tr ',' '\n' | wc -l)"
python3 benchmarks/prebuild.py gemm_mx_decode_sm90 gemm_mx_decode_sm90_wg gemm_mx_splitk_reduce --jobs 16 2>&1 | tail -1
timeout -s INT "${DEADLINE:-540}" python3 -m mxrt.cli tune gemm --shapes "$SHAPES" --out "$OUT/tuned_decode.json" \
  --no-progress > "$OUT/tune.log" 2>&1
echo "rc=$?"; grep -E "best:|^cell|wrote" "$OUT/tune.log" | tail -${TAIL:-12}
