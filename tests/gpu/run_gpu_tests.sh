#!/usr/bin/env bash
# Runs zeroshard's GPU tests on a machine with an NVIDIA GPU, CUDA (nvcc) and
# NCCL: configures a CUDA build for sm_90 only (to save compile time), builds
# only the test targets labelled "gpu" (tests register with
# zeroshard_add_test(... LABELS gpu), so the CTest name is the target name)
# and runs `ctest -L gpu`, then device_adamw_bench (one line per compute
# dtype), model_kernels_bench (one line per kernel) and train_bench.py
# (gpt2 at stages 0 and 3) briefly. Meant to finish in under 5 minutes.
#
# Usage: tests/gpu/run_gpu_tests.sh [build-dir]   (default: build-gpu)
# Env:   CUDA_ARCH (default 90), JOBS (default: all cores).
# Exit:  ctest's status; 2 when no gpu-labelled test exists; 77 when no GPU.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${src}/build-gpu}"
jobs="${JOBS:-$(nproc)}"
arch="${CUDA_ARCH:-90}"
start=$(date +%s)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run_gpu_tests: no NVIDIA GPU visible (nvidia-smi -L failed); nothing to run" >&2
  exit 77
fi
nvidia-smi -L

cmake -S "${src}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DZEROSHARD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${arch}" >"${build}.configure.log" 2>&1 ||
  { cat "${build}.configure.log"; exit 1; }
grep -E "communication backends|CUDA kernels" "${build}.configure.log" || true

mapfile -t targets < <(ctest --test-dir "${build}" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "run_gpu_tests: no test labelled gpu (was CUDA/NCCL found? see ${build}.configure.log)" >&2
  exit 2
fi
echo "gpu tests: ${targets[*]}"
ninja -C "${build}" -j "${jobs}" "${targets[@]}"
echo "built in $(( $(date +%s) - start )) s"

status=0
ctest --test-dir "${build}" -L gpu --output-on-failure --timeout 240 || status=$?
# The device layer's AdamW bench, briefly (a line per compute dtype); it
# does not change the exit status.
if ninja -C "${build}" -j "${jobs}" device_adamw_bench >/dev/null; then
  timeout 60 "${build}/bin/device_adamw_bench" --device cuda --n 67108864 --reps 5 || true
fi
# The model's CUDA kernels at one gpt2 block, briefly (ms and TFLOP/s or
# GB/s per kernel, fp32 and TF32); it does not change the exit status.
if ninja -C "${build}" -j "${jobs}" model_kernels_bench >/dev/null; then
  timeout 120 "${build}/bin/model_kernels_bench" --model gpt2 --batch 4 --reps 5 || true
fi
# Training gpt2 on the GPU, briefly (tokens/s, MFU, peak memory by kind
# against the ZeRO formula; bench/gpu/train_bench.py); launch_cuda_test
# built the binaries. It does not change the exit status.
timeout 150 python3 "${src}/bench/gpu/train_bench.py" --bin "${build}/bin" --model gpt2 \
  --stages 0,3 --dtype bf16 --steps 20 --skip 5 --runs 1 || true
echo "run_gpu_tests: total $(( $(date +%s) - start )) s, ctest status ${status}"
exit "${status}"
