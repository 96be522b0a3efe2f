#!/usr/bin/env bash
# Runs the GPU bundle (scripts/gpu-bundle.sh) on a GPU machine that has
# CUDA's libraries but none of zeroshard's build dependencies. Copied beside
# the archive as build-gpu-bundle/run.sh; run it from the repository root:
#
#   build-gpu-bundle/run.sh [OUTDIR]
#
# It unpacks the archive into /tmp, finds the image's CUDA runtime, NCCL and
# cuBLAS (its Python environment's nvidia/*/lib folders, else
# /usr/local/cuda), keeps NCCL on the loopback interface without
# InfiniBand, runs every GPU test binary with a timeout each (exit 77 =
# skipped), then the benches: device AdamW, the model's kernels, and
# train_bench.py at stages 0 and 3. A time budget (ZS_GPU_BUDGET seconds,
# default 285) keeps the whole run under 5 minutes: a step that would not fit
# is skipped and says so.
#
# Writes three files to OUTDIR (default: $OUT, else ./gpu-bundle-out):
#   summary.txt  the GPU and libraries, one line per test or bench:
#                name, status (pass, fail, skip, timeout, budget), seconds
#   log.txt      everything the tests and benches printed
#   bench.txt    the benches' figures
# Exit: 0 when no test failed; 1 when one did; 77 (one line) without a GPU.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
archive="${here}/zeroshard-gpu.tar.xz"
start=$(date +%s)
budget="${ZS_GPU_BUDGET:-285}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no NVIDIA GPU here (nvidia-smi -L failed); nothing to run"
  exit 77
fi
[[ -f "${archive}" ]] || { echo "run.sh: ${archive} is missing; build it with scripts/gpu-bundle.sh"; exit 2; }

out="${1:-${OUT:-${PWD}/gpu-bundle-out}}"
mkdir -p "${out}"
summary="${out}/summary.txt" log="${out}/log.txt" bench="${out}/bench.txt"
: >"${summary}"; : >"${log}"; : >"${bench}"
note() { echo "$*" | tee -a "${summary}"; }
elapsed() { echo $(( $(date +%s) - start )); }

dir="$(mktemp -d /tmp/zeroshard-gpu.XXXXXX)"
if ! tar -C "${dir}" -xJf "${archive}" 2>>"${log}"; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "${archive}" "${dir}" || { note "run.sh: cannot unpack ${archive}"; exit 2; }
fi
bundle="${dir}/zeroshard-gpu"
note "bundle $(cat "${bundle}/VERSION") unpacked in $(elapsed) s; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"

# The image's CUDA libraries: the first folder that holds each.
search=()
while read -r sp; do
  [[ -d "${sp}/nvidia" ]] && while read -r d; do search+=("${d}"); done < <(find "${sp}/nvidia" -maxdepth 3 -type d -name lib)
done < <(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
search+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
libpath="${bundle}/lib"
for so in libcudart.so.13 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
  found=""
  for d in "${search[@]}"; do
    if [[ -e "${d}/${so}" ]]; then found="${d}"; break; fi
  done
  note "library ${so}: ${found:-NOT FOUND}"
  [[ -n "${found}" && ":${libpath}:" != *":${found}:"* ]] && libpath="${libpath}:${found}"
done
export LD_LIBRARY_PATH="${libpath}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
# NCCL inside a one-machine sandbox: loopback, no InfiniBand.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
export ZEROSHARD_BIN_DIR="${bundle}/bin" ZEROSHARD_SOURCE_DIR="${PWD}"

failed=0
# run_step NAME LIMIT_S DEADLINE_S FILE CMD...: runs CMD with at most LIMIT_S
# seconds, fewer if DEADLINE_S (from the start) is nearer; skipped when under
# 10 s are left. Output goes to the log, and to FILE too when FILE is not "-".
run_step() {
  local name="$1" limit="$2" deadline="$3" file="$4"
  shift 4
  local left=$(( deadline - $(elapsed) ))
  if (( left < 10 )); then
    note "$(printf '%-34s budget   0 s (skipped: %d s of the budget left)' "${name}" "$(( budget - $(elapsed) ))")"
    return 0
  fi
  (( limit > left )) && limit=${left}
  local t0=$(date +%s) rc status
  echo "=== ${name} (limit ${limit} s)" >>"${log}"
  if [[ "${file}" == "-" ]]; then
    (cd "${dir}" && timeout -k 5 "${limit}" "$@") >>"${log}" 2>&1
    rc=$?
  else
    echo "=== ${name}" >>"${file}"
    (cd "${dir}" && timeout -k 5 "${limit}" "$@") 2>&1 | tee -a "${file}" >>"${log}"
    rc=${PIPESTATUS[0]}
  fi
  case "${rc}" in
    0) status=pass ;;
    77) status=skip ;;
    124|137) status=timeout ;;
    *) status=fail ;;
  esac
  [[ "${status}" == fail || "${status}" == timeout ]] && failed=1
  note "$(printf '%-34s %-8s %3d s' "${name}" "${status}" "$(( $(date +%s) - t0 ))")"
}

# Tests, shortest timeout first, until 150 s; then each bench by its own
# deadline, the training bench last with what is left.
while read -r name timeout; do
  run_step "${name}" "${timeout}" 150 - "${bundle}/bin/${name}"
done < <(sort -k2,2n "${bundle}/tests.tsv")
run_step device_adamw_bench 30 185 "${bench}" \
  "${bundle}/bin/device_adamw_bench" --device cuda --n 67108864 --reps 5
run_step model_kernels_bench 40 230 "${bench}" \
  "${bundle}/bin/model_kernels_bench" --model gpt2 --batch 4 --reps 5
run_step train_bench 120 "${budget}" "${bench}" python3 "${bundle}/bench/train_bench.py" \
  --bin "${bundle}/bin" --model gpt2 --stages 0,3 --dtype bf16 --steps 20 --skip 5 --runs 1
note "total $(elapsed) s; $(grep -c ' pass ' "${summary}") passed, $(grep -cE ' (fail|timeout) ' "${summary}") failed or timed out"
rm -rf "${dir}"
exit "${failed}"
