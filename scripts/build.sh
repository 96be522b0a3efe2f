#!/usr/bin/env bash
# Configures and builds zeroshard with a CMake preset (default: "default"),
# printing CMake's summary of what was built (backends, CUDA, sanitizers).
# Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
if ! configure_log=$(cmake --preset "$preset" 2>&1); then
  printf '%s\n' "$configure_log"
  exit 1
fi
printf '%s\n' "$configure_log" | sed -n '/zeroshard .* summary:/,/sanitizers:/p'
cmake --build --preset "$preset"
