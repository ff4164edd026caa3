# Shared set-up of the device scripts (`source "$(dirname "$0")/gpu_common.sh" "${1:-default steps}"` first): the
# repository root as the working directory, the tests' helpers importable, unbuffered output, $OUT (the device tool's
# result folder, else ./gpu_out), and the step selection: `if has NAME; then step "what"; ...; fi`.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
steps=" ${1:-} "
step() { echo; echo "=== $* ($(date +%T))"; }
has() { [[ $steps == *" $1 "* ]]; }
# sanitize SCRIPT [ARGS...]: a smoke script once, then under compute-sanitizer memcheck / racecheck / synccheck (logs
# $OUT/san_TOOL.txt; one line each: rc, the tool's summary and the script's mismatch count)
sanitize() {
  timeout 60 python3 "$@" 2>&1 | tail -3
  local tool extra
  for tool in memcheck racecheck synccheck; do
    extra=""; [[ $tool == memcheck ]] && extra="--leak-check no"
    timeout ${T_SAN:-150} compute-sanitizer --tool $tool $extra python3 "$@" > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' "$OUT/san_$tool.txt" | tail -2 | tr '\n' ' ')"
  done
}
