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
