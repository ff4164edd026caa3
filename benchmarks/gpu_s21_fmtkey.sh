#!/usr/bin/env bash
# Session 21 (issue 12): the tuned decode table's e2m1 (MXFP4 weights) entries. Steps (default "prebuild tune"):
#   prebuild  every sm90_decode build the tuner times on the cells (e2m1 weights at MT 1: M 1-8), in parallel
#   tune      `mxrt tune gemm --fmts e2m1 --paths $PATHS` on the shipped table's N x K cells at M in $MS (default
#             1,8,2,4: the outer loop, so a deadline keeps whole buckets) into $OUT/tuned_e2m1.json (no user table;
#             log $OUT/tune.log, SIGINT at $DEADLINE s keeps the cells measured so far)
#   ab        `bench_decode.py --fmts e2m1 --m $MS --no-peers` (the seed's 15 cells, then --quick: 7168 x 4096) on
#             each tree of $TREES (default "ab_old . ab_old .": the library before the key, a `git archive` of its
#             mxrt/ and kernels_src/ carried inside this tree, and this tree), one process per tree and pass
#             (ab_<i>_<tree>[_q].json / .log, packed into $OUT/ab.tgz; each seed pass stops adding cells after
#             $BENCH_S s, default 85), so old and new alternate on one warm GPU
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tune}"
MS=${MS:-1,8,2,4}
export MXRT_TUNED_TABLE="$OUT/no_user_table.json"  # the shipped tables only (a fresh machine has none, to be sure)
SHAPES=$(python3 - <<PY
import json
doc = json.load(open("mxrt/data/tuned_decode.json"))
nk = {}
for devices in doc["targets"].values():
    for cells in devices.values():
        nk.update(dict.fromkeys(cells))
print(",".join(f"{m}x{c}" for m in "$MS".split(",") for c in nk))
PY
)
echo "cells: $(echo "$SHAPES" | tr ',' '\n' | wc -l); $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"

if has prebuild; then
  step "prebuild"
  python3 benchmarks/prebuild.py gemm_mx_splitk_reduce --tune-shapes "$SHAPES" --tune-fmts e2m1 --jobs 16 2>&1 | tail -3
fi
if has tune; then
  step "tune (paths: ${PATHS:-sm90_decode_wg})"
  timeout -s INT "${DEADLINE:-330}" python3 -m mxrt.cli tune gemm --fmts e2m1 --paths "${PATHS:-sm90_decode_wg}" \
    --shapes "$SHAPES" --out "$OUT/tuned_e2m1.json" --no-progress > "$OUT/tune.log" 2>&1
  echo "rc=$?"; grep -cE "^  best:" "$OUT/tune.log"; grep -E "fallback:" "$OUT/tune.log" | head -3
fi
if has ab; then
  step "ab (trees: ${TREES:-ab_old . ab_old .}; M $MS)"
  i=0
  for tree in ${TREES:-ab_old . ab_old .}; do
    i=$((i + 1)); tag=$(basename "$(cd "$tree" && pwd)")
    for q in "" "--quick"; do
      PYTHONPATH=$(cd "$tree" && pwd) timeout 150 python3 benchmarks/bench_decode.py --fmts e2m1 --m "$MS" --tp 1,8 \
        --no-peers --budget-s "${BENCH_S:-85}" $q --json "$OUT/ab_${i}_${tag}${q:+_q}.json" > "$OUT/ab_${i}_${tag}${q:+_q}.log" 2>&1
      echo "tree $tree pass $i ${q:-seed cells}: rc=$? $(grep -E '^wall' "$OUT/ab_${i}_${tag}${q:+_q}.log")"
    done
  done
  # one file: the device tool brings back only a few files per call (call 2 lost passes 3-4)
  (cd "$OUT" && tar czf ab.tgz ab_*.json ab_*.log && rm -f ab_*.json ab_*.log)
fi
