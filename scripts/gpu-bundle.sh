#!/usr/bin/env bash
# Builds the GPU bundle: zeroshard's GPU tests, `zeroshard`, `zeroshard-worker`
# and the GPU benches, built here (the CUDA build compiles sm_80 and sm_90
# code), stripped, with the non-system shared libraries they load, packed in
# one xz archive for a bare GPU machine that has CUDA's own libraries and
# nothing of zeroshard's build dependencies (tests/gpu/README.md).
#
# Left out, because the GPU image provides them: the CUDA runtime, NCCL,
# cuBLAS/cuBLASLt and the driver (run.sh finds them in the image's Python
# `nvidia/*/lib` folders or /usr/local/cuda), and libc, libm, libdl,
# libpthread, librt, libgcc_s, libstdc++, OpenSSL and zlib. Every binary and
# library gets RUNPATH $ORIGIN/../lib (binaries) or $ORIGIN (libraries), so
# no path of this machine travels.
#
# Usage: scripts/gpu-bundle.sh [--build-dir DIR] [--out DIR] [--no-build]
#   --build-dir  a configured CUDA build (default: build/; configured with the
#                default preset when missing). Its targets are brought up to
#                date with ninja first, unless --no-build (the suite's test:
#                it packs what was built and never builds while tests run).
#   --out        where the archive and run.sh go (default: build-gpu-bundle/,
#                ignored by git).
# Output: OUT/zeroshard-gpu.tar.xz and OUT/run.sh; one line with the sizes.
# Exit: 0; 2 when the build has no CUDA (no nvcc) or a tool is missing.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${src}/build"
out="${src}/build-gpu-bundle"
build_first=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$(realpath -m "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --no-build) build_first=0; shift ;;
    *) echo "gpu-bundle: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for tool in patchelf strip ldd xz ninja ctest; do
  command -v "$tool" >/dev/null || { echo "gpu-bundle: $tool is missing (scripts/setup.sh installs it)" >&2; exit 2; }
done

if [[ ! -f "${build}/CMakeCache.txt" ]]; then
  cmake -S "${src}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi

# The GPU tests with their CTest timeouts, the binaries the benches and the
# launch test run, and one CPU test (the bundle's check on a host without a GPU).
mapfile -t tests < <(ctest --test-dir "${build}" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
if [[ ${#tests[@]} -eq 0 ]]; then
  echo "gpu-bundle: ${build} has no GPU test: it is not a CUDA build (no nvcc at configure time)" >&2
  exit 2
fi
programs=(zeroshard zeroshard-worker zeroshard-sentencepiece device_adamw_bench model_kernels_bench
  device_cpu_test)
if ((build_first)); then
  ninja -C "${build}" "${tests[@]}" "${programs[@]}" >/dev/null
else
  for b in "${tests[@]}" "${programs[@]}"; do
    [[ -x "${build}/bin/${b}" ]] || { echo "gpu-bundle: ${build}/bin/${b} is not built" >&2; exit 2; }
  done
fi

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
root="${stage}/zeroshard-gpu"
mkdir -p "${root}/bin" "${root}/lib" "${root}/bench"
for b in "${tests[@]}" "${programs[@]}"; do
  strip --strip-unneeded -o "${root}/bin/${b}" "${build}/bin/${b}"
  patchelf --set-rpath '$ORIGIN/../lib' "${root}/bin/${b}"
done

# What the image provides, by soname prefix; everything else ldd resolves
# travels.
provided='^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64|linux-vdso|libssl|libcrypto|libz|libcuda|libcudart|libnccl|libcublas|libcublasLt)\.so'
ldd "${root}"/bin/* 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u |
  while read -r soname path; do
    [[ "${soname}" =~ ${provided} ]] && continue
    [[ -f "${root}/lib/${soname}" ]] && continue
    strip --strip-unneeded -o "${root}/lib/${soname}" "$(readlink -f "${path}")"
    patchelf --set-rpath '$ORIGIN' "${root}/lib/${soname}"
  done

# The GPU tests and their timeouts, read by run.sh.
ctest --test-dir "${build}" -L gpu --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    timeout = next((p["value"] for p in t.get("properties", []) if p["name"] == "TIMEOUT"), 120)
    print(t["name"], int(float(timeout)))' >"${root}/tests.tsv"
cp "${src}/bench/gpu/train_bench.py" "${root}/bench/"
git -C "${src}" describe --always --dirty >"${root}/VERSION" 2>/dev/null || echo unknown >"${root}/VERSION"

mkdir -p "${out}"
XZ_OPT="-6 -T0" tar -C "${stage}" -cJf "${out}/zeroshard-gpu.tar.xz" zeroshard-gpu
install -m 0755 "${src}/tests/gpu/run.sh" "${out}/run.sh"
echo "gpu-bundle: ${out}/zeroshard-gpu.tar.xz $(du -m "${out}/zeroshard-gpu.tar.xz" | cut -f1) MiB" \
  "(${#tests[@]} GPU tests, $(ls "${root}/lib" | wc -l) libraries, $(du -sm "${root}" | cut -f1) MiB unpacked)"
