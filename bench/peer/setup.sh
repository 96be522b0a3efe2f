#!/usr/bin/env bash
# Installs what bench/peer needs beside the build: torch (through the test
# tools' installer) and, for adamw_peer.py, DeepSpeed (its CPU Adam op is
# compiled on first use, which needs ninja). Never a product dependency.
# Usage: bench/peer/setup.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup-test-tools.sh
if ! python3 -c "import deepspeed" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --break-system-packages deepspeed ninja
fi
