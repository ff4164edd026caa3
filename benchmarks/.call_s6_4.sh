export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cc
python3 benchmarks/ncu_decode.py 64 e4m3 && ls /tmp/cc
for f in $(find /tmp/cc -type f); do
  if cuobjdump -sass $f 2>/dev/null | grep -q gemm_mx_decode_sm90; then
     cuobjdump -sass $f > $OUT/m64.sass; fi
done
wc -l $OUT/m64.sass
grep -oP '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[T0-9]+ )?\K[A-Z0-9_]+(\.[A-Z0-9_]+)*' $OUT/m64.sass | sort | uniq -c | sort -rn | head -50
timeout 120 ncu -k regex:gemm_mx_decode -s 2 -c 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" python3 benchmarks/ncu_decode.py 64 e4m3 2>&1 | grep -v "^==PROF==" | grep stalled | sort -k3 -n -r | head -12
