#!/usr/bin/env bash
# Runs zeroshard's GPU tests and benches on a machine that has a GPU AND
# zeroshard's build dependencies (scripts/setup.sh's packages, CUDA, NCCL):
# configures a CUDA build for sm_90 only, makes the GPU bundle from it
# (scripts/gpu-bundle.sh) and runs the bundle (build-gpu-bundle/run.sh), so
# the tests run exactly as they do on a bare GPU machine.
#
# A bare GPU machine (a stock CUDA image, no build dependencies, nothing to
# install) cannot build: make the bundle on a build machine and carry it
# there instead (tests/gpu/README.md).
#
# Usage: tests/gpu/run_gpu_tests.sh [build-dir] [out-dir]
#        (defaults: build-gpu, gpu-bundle-out)
# Env:   CUDA_ARCH (default 90).
# Exit:  run.sh's: 0 all passed, 1 a test failed, 77 no GPU; 2 when this
#        machine cannot configure the build.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${src}/build-gpu}"
out="${2:-${src}/gpu-bundle-out}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run_gpu_tests: no NVIDIA GPU visible (nvidia-smi -L failed); nothing to run" >&2
  exit 77
fi
if ! cmake -S "${src}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DZEROSHARD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"${build}.configure.log" 2>&1; then
  echo "run_gpu_tests: this machine cannot configure zeroshard (see ${build}.configure.log):" \
    "it lacks the build dependencies. Build the bundle where they are" \
    "(scripts/gpu-bundle.sh) and run build-gpu-bundle/run.sh here; tests/gpu/README.md" >&2
  exit 2
fi
"${src}/scripts/gpu-bundle.sh" --build-dir "${build}" --out "${src}/build-gpu-bundle"
exec "${src}/build-gpu-bundle/run.sh" "${out}"
