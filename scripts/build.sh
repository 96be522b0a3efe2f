#!/usr/bin/env bash
# Configures (once) and builds zeroshard with a CMake preset (default: "default").
# Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
