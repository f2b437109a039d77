#!/usr/bin/env bash
# The GPU check (issue 28): every GPU path of multidev, run in one go on a lent GPU machine.
#
#   bash benchmarks/gpu_check.sh            on the GPU machine (at most ~8 minutes), results in $OUT
#   bash benchmarks/gpu_check.sh --dry-run  the same steps on CPU with tiny sizes (< 2 minutes; in the test suite)
#
# Steps, each under its own time limit so one hang cannot eat the budget:
#   (d) versions: nvidia-smi, python, torch, CUDA, multidev's device table
#   (a) pytest -m gpu, each test in its own process at once, stacks printed on a hang (benchmarks/gpu_tests.sh),
#       then the GPU-relevant existing tests (-k "gpu or cuda or nccl or memory or mixed")
#   (b) multidev bench train --device gpu: the three reference workloads, plain / bf16 autocast / 1 and 2
#       logical GPUs / fit / Keras 3's fit (when keras is importable), with the GPU targets
#   (c) multidev bench scaling: per-step Python cost at N = 1, 2, 4, 8 replicas, threads vs processes
#   (e) torch.profiler of the transformer, plain vs 2 logical GPUs: why a missed target was missed
# What comes back from the device machine is at most 8 files: the steps write exactly 7 to $OUT.
#
# On the device machine (Python 3.12, torch preinstalled, no network) multidev runs from this checkout
# (PYTHONPATH); wheels it lacks (keras for the Keras 3 variants: benchmarks/gpu_wheels.sh fetches them
# here) travel in .whl/ (carry [".whl"]) and are installed to /tmp/site first.
set -u
cd "$(dirname "$0")/.."
DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  *) echo "usage: bash benchmarks/gpu_check.sh [--dry-run]" >&2; exit 2 ;;
esac
OUT=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 KERAS_BACKEND=${KERAS_BACKEND:-torch} MULTIDEV_COLLECTIVE_TIMEOUT=${MULTIDEV_COLLECTIVE_TIMEOUT:-20}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
if [ $DRY = 1 ]; then
  DEVICE=cpu; SIZE="--smoke"; SCALE="--smoke"; PROFILE_STEPS=2; TRAIN_WORKLOADS=text_conv
  TRAIN_VARIANTS=plain,plain_bf16,mirrored_1,mirrored_2,fit_mirrored_1
  PYTEST_K=(--co -q)                       # dry run: the selection must collect, not run (CPU, 2 minutes)
  LIMIT_GPU_TESTS=200; LIMIT_TESTS=200; LIMIT_TRAIN=200; LIMIT_SCALE=300; LIMIT_PROFILE=120  # safety nets (loaded CI)
else
  DEVICE=gpu; SIZE="--rounds 3 --steps 20 --warmup 3"; SCALE="--rounds 3 --steps 20"; PROFILE_STEPS=10
  TRAIN_WORKLOADS=text_conv,mlp,transformer
  TRAIN_VARIANTS=plain,plain_bf16,mirrored_1,mirrored_2,fit,fit_mirrored_1,fit_mirrored_2
  if $PY -c "import keras" >/dev/null 2>&1; then TRAIN_VARIANTS=$TRAIN_VARIANTS,keras3_own,keras3_fit1,keras3_fit2; fi
  PYTEST_K=(-q -x --timeout 120)
  # the limits add up to 7.8 minutes with the version step: the device call gets timeout_s 540
  LIMIT_GPU_TESTS=90; LIMIT_TESTS=120; LIMIT_TRAIN=150; LIMIT_SCALE=80; LIMIT_PROFILE=30
fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
step() {  # step NAME LIMIT_S OUTFILE COMMAND...: run under timeout, append output, note the exit code
  local name=$1 limit=$2 file=$3; shift 3
  local t0=$SECONDS
  echo "== $name (limit ${limit} s)" | tee -a "$file" >&2
  timeout --kill-after=10 "$limit" "$@" >>"$file" 2>&1
  local rc=$?
  echo "$name: rc=$rc in $((SECONDS - t0)) s$([ $rc = 124 ] && echo ' (TIMED OUT)')" | tee -a "$SUMMARY" >&2
}
{
  echo "gpu_check $([ $DRY = 1 ] && echo '--dry-run ')on $(hostname) at $(date -u +%FT%TZ)"
  (nvidia-smi 2>&1 || echo "nvidia-smi: not available") | head -25
  $PY - <<'PYEOF' 2>&1
import platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| cuda available", torch.cuda.is_available(),
      "| devices", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
try:
    import keras
    print("keras", keras.__version__)
except ImportError as err:
    print("keras: not importable (", err, ") - the Keras 3 variants are skipped")
PYEOF
} >>"$SUMMARY"
step "devices" 30 "$SUMMARY" $PY -m multidev.cli.main devices
if [ $DRY = 1 ]; then   # the GPU tests skip on CPU: collecting them is the dry run's check
  step "pytest -m gpu" "$LIMIT_GPU_TESTS" "$OUT/pytest.txt" $PY -m pytest -p no:cacheprovider --co -q -m gpu tests
else
  step "pytest -m gpu" "$LIMIT_GPU_TESTS" "$OUT/pytest.txt" bash benchmarks/gpu_tests.sh 40
fi
step "pytest -k gpu-relevant" "$LIMIT_TESTS" "$OUT/pytest.txt" \
  $PY -m pytest -p no:cacheprovider "${PYTEST_K[@]}" -k "gpu or cuda or nccl or memory or mixed" tests
# shellcheck disable=SC2086  # SIZE/SCALE are option lists
step "bench train" "$LIMIT_TRAIN" "$OUT/bench_train.txt" $PY -m multidev.cli.main bench train --device "$DEVICE" \
  --workloads "$TRAIN_WORKLOADS" --variants "$TRAIN_VARIANTS" $SIZE --output "$OUT/bench_train.json"
# shellcheck disable=SC2086
step "bench scaling" "$LIMIT_SCALE" "$OUT/bench_scaling.txt" $PY -m multidev.cli.main bench scaling --device "$DEVICE" \
  $SCALE --output "$OUT/bench_scaling.json"
step "profile" "$LIMIT_PROFILE" "$OUT/profile.txt" $PY benchmarks/gpu_profile.py --device "$DEVICE" \
  --workload "$([ $DRY = 1 ] && echo mlp || echo transformer)" --steps "$PROFILE_STEPS"
echo "results in $OUT:" >&2
ls "$OUT" >&2
# Fail when a step failed, so a caller (and the dry run in the test suite) sees it.
! grep -q ": rc=[1-9]" "$SUMMARY"
