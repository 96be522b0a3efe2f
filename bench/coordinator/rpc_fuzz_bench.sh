#!/usr/bin/env bash
# The long fuzz run of every coordinator RPC (tests/fuzz/rpc_fuzz.py):
# REQUESTS (default 1,000,000) requests with no time limit; prints the
# count, the rate, the status codes and every finding (a progress line every
# 20,000; SIGTERM ends it early with the summary). Run niced:
#   nice bench/coordinator/rpc_fuzz_bench.sh [REQUESTS] [SEED]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
export ZEROSHARD_BIN_DIR="${ZEROSHARD_BIN_DIR:-$here/build/bin}"
exec python3 "$here/tests/fuzz/rpc_fuzz.py" --requests "${1:-1000000}" --seconds 1e9 \
  --seed "${2:-1}" --rss-growth-mb 500 --progress 20000
