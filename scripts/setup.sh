#!/usr/bin/env bash
# Installs what zeroshard's build needs (Debian packages), only when missing:
# the main job's set-up, kept quick. The test tools (Prometheus, the PyPI
# packages, torch and transformers) are scripts/setup-test-tools.sh's, which
# scripts/test.sh runs.
# Idempotent: a second run with everything present installs nothing.
# Usage: scripts/setup.sh
set -euo pipefail

# python3: `zeroshard launch` trains on Python's standard-library sources by
# default. GoogleTest and benchmark: the build compiles the tests and benches.
# openssl (the CLI): the security tests make their certificates with it.
# libgoogle-perftools-dev: tcmalloc, the coordinator's malloc (cmake/Allocator.cmake).
# ocl-icd-opencl-dev: Debian's libdnnl-dev is built for OpenCL GPUs, and its
# CMake config requires OpenCL (a recommendation we install by name).
# libpcre2-dev, libutf8proc-dev, libsentencepiece-dev: the tokenizers
# (common/tokenizer). patchelf, xz-utils: scripts/gpu-bundle.sh (and its test) packs the GPU
# bundle with them.
DEB_PACKAGES=(
  cmake g++ pkg-config ninja-build ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev
  libabsl-dev libgloo-dev libcivetweb-dev civetweb prometheus-cpp-dev libdnnl-dev
  libxxhash-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libbenchmark-dev python3 liburing-dev openssl ocl-icd-opencl-dev
  libgoogle-perftools-dev patchelf xz-utils libpcre2-dev libutf8proc-dev libsentencepiece-dev
)

# shellcheck source=scripts/apt_missing.sh
source "$(dirname "$0")/apt_missing.sh"
apt_install_missing setup "${DEB_PACKAGES[@]}"
echo "setup: build dependencies present"
