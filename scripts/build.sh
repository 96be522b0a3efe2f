#!/usr/bin/env bash
# Configures and builds zeroshard with a CMake preset (default: "default"),
# printing CMake's summary of what was built (backends, CUDA, sanitizers).
# Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
# CMake's code model (lint_link_deps_test reads each library's declared
# links) is written only where its query exists before CMake runs.
build_dir=build
[[ "$preset" == default ]] || build_dir="build-$preset"
mkdir -p "$build_dir/.cmake/api/v1/query"
touch "$build_dir/.cmake/api/v1/query/codemodel-v2"
if ! configure_log=$(cmake --preset "$preset" 2>&1); then
  printf '%s\n' "$configure_log"
  exit 1
fi
printf '%s\n' "$configure_log" | sed -n '/zeroshard .* summary:/,/sanitizers:/p'
cmake --build --preset "$preset"
