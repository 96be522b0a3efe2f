#!/usr/bin/env bash
# Installs what is missing (build dependencies, then the test tools), builds,
# and runs every test with CTest.
# Usage: scripts/test.sh [preset]   (default, or asan for ASan+UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
scripts/setup.sh
scripts/setup-test-tools.sh
scripts/build.sh "$preset"
ctest --preset "$preset"
