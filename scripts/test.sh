#!/usr/bin/env bash
# Installs what is missing (build dependencies, then the test tools), builds,
# and runs every test with CTest.
# Usage: scripts/test.sh [preset]   (default, or asan for ASan+UBSan)
#        scripts/test.sh stress [ROUNDS]   (the flake hunt, scripts/stress.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
scripts/setup.sh
scripts/setup-test-tools.sh
if [[ "$preset" == stress ]]; then
  scripts/build.sh default
  exec scripts/stress.sh "${2:-20}"
fi
scripts/build.sh "$preset"
ctest --preset "$preset"
