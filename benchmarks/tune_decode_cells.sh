#!/usr/bin/env bash
# Tune the decode cells of benchmarks/bench_decode.py (DeepSeek-V3 / Llama-70B decode GEMMs at TP 1 and 8) with
# `mxrt tune gemm` on the present GPU, writing $OUT/tuned_decode.json (merge it into mxrt/data/tuned_decode.json to
# ship it). MS: the token counts (default 1,2,4,8,16,32,64); SIGINT at the deadline keeps the cells measured so far.
# MERGE=1 starts from the shipped table (its other devices' and cells' entries kept: the result replaces the file);
# TUNE_ARGS: more `mxrt tune gemm` arguments (e.g. --fmts e4m3,e2m1 --paths none); PREBUILD_TUNE=e4m3,e2m1 also
# prebuilds every sm90_decode build the tuner times on the cells (in parallel, instead of one by one while tuning);
# EXTRA_NK: more NxK cells (comma list, e.g. 7168x4096, the issue's cell).
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
extra = {(n, k) for nk in "${EXTRA_NK:-}".split(",") if nk for n, k in [map(int, nk.split("x"))]}
cells = {(m, n, k) for (_, _, _, m, n, k) in bd.cells([1, 8], ms, False)} | {(m, n, k) for m in ms for n, k in extra}
print(",".join(sorted(f"{m}x{n}x{k}" for m, n, k in cells)))
PY
)
echo "cells: $(echo "$SHAPES" | tr ',' '\n' | wc -l)"
python3 benchmarks/prebuild.py gemm_mx_decode_sm90 gemm_mx_decode_sm90_wg gemm_mx_splitk_reduce --jobs 16 \
  ${PREBUILD_TUNE:+--tune-shapes "$SHAPES" --tune-fmts $PREBUILD_TUNE} 2>&1 | tail -1
[[ ${MERGE:-0} == 1 ]] && cp mxrt/data/tuned_decode.json "$OUT/tuned_decode.json"
timeout -s INT "${DEADLINE:-540}" python3 -m mxrt.cli tune gemm --shapes "$SHAPES" --out "$OUT/tuned_decode.json" \
  --no-progress ${TUNE_ARGS:-} > "$OUT/tune.log" 2>&1
echo "rc=$?"; grep -E "best:|^cell|wrote" "$OUT/tune.log" | tail -${TAIL:-12}
