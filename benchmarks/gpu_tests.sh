#!/usr/bin/env bash
# The GPU tests (pytest -m gpu) for benchmarks/gpu_check.sh: each test in its own process, all at once (the GPU
# machine has 16 cores; one hang costs its own test, not the step), a process still running after HANG_DUMP_S
# seconds prints every thread's stack (benchmarks/hang_dump/sitecustomize.py). Prints one line per test, then
# the reports of those that failed.   usage: bash benchmarks/gpu_tests.sh [HANG_DUMP_S]
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/benchmarks/hang_dump${PYTHONPATH:+:$PYTHONPATH}" HANG_DUMP_S=${1:-40}
LOGS=$(mktemp -d /tmp/gpu_tests.XXXXXX)
mapfile -t TESTS < <(HANG_DUMP_S= $PY -m pytest -p no:cacheprovider --co -q -m gpu tests 2>/dev/null | grep "::")
for i in "${!TESTS[@]}"; do
  timeout --kill-after=5 $((HANG_DUMP_S * 2)) $PY -m pytest -p no:cacheprovider -q -rs -m gpu "${TESTS[$i]}" \
    > "$LOGS/$i.txt" 2>&1 &
done
wait
failed=0
for i in "${!TESTS[@]}"; do
  last=$(grep -E "[0-9]+ (passed|failed|skipped|error)" "$LOGS/$i.txt" | tail -1)
  echo "${TESTS[$i]}: ${last:-no result (killed)}"
  case "$last" in *passed*|*skipped*) ;; *) failed=$((failed + 1)) ;; esac
done
for i in "${!TESTS[@]}"; do
  grep -qE "[0-9]+ (passed|skipped)" "$LOGS/$i.txt" && ! grep -qE "[0-9]+ failed" "$LOGS/$i.txt" && continue
  echo; echo "######## ${TESTS[$i]}"; head -c 40000 "$LOGS/$i.txt"
done
echo "${#TESTS[@]} GPU tests, $failed not passed"
[ ${#TESTS[@]} -gt 0 ] && [ $failed = 0 ]
