#!/usr/bin/env bash
# The flake hunt of issue 40: the multi-process and streaming tests (ctest
# label "stress", listed in cmake/ProjectOptions.cmake), ROUNDS times each,
# then elastic_redundancy_test's SIGSTOP case ROUNDS times, all beside one
# busy loop per core. Stops at the first failure. Prints the time taken.
# Usage: scripts/stress.sh [ROUNDS]   (default 20; run through scripts/test.sh stress)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
hogs=()
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
start=$(date +%s)
ctest --test-dir build -L stress --repeat until-fail:"$rounds" -j2 --timeout 300 \
  --output-on-failure
for i in $(seq "$rounds"); do
  ZEROSHARD_BIN_DIR="$PWD/build/bin" build/bin/elastic_redundancy_test \
    --gtest_filter='*AStoppedRankIsNamedWithItsOperation*' > build/stress-redundancy.log 2>&1 || {
    cat build/stress-redundancy.log
    echo "stress: elastic_redundancy_test's SIGSTOP case failed in round $i"
    exit 1
  }
done
echo "stress: $rounds rounds of $(ctest --test-dir build -N -L stress | grep -c 'Test *#') tests" \
     "and the SIGSTOP case, under $(nproc) busy loops, passed in $(( $(date +%s) - start )) s"
