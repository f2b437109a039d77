#!/usr/bin/env bash
# Fetch, on this machine, the wheels the GPU check needs and the device machine lacks (it has torch,
# numpy, safetensors, cloudpickle, pytest, h5py, rich, ml-dtypes... but not Keras 3), for its
# Python 3.12 on x86-64, into .whl/ (in .gitignore). Then call the device tool's run with
# carry [".whl"] and the command `bash benchmarks/gpu_check.sh`, which installs them to /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done
KERAS=$(python3 -c "import keras; print(keras.__version__)" 2>/dev/null || echo 3.15.0)
for req in "keras==$KERAS" namex optree; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "$req"
done
ls -l .whl
