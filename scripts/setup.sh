#!/usr/bin/env bash
# Installs what zeroshard's build and tests need, only when missing.
# Idempotent: a second run with everything present installs nothing.
# Usage: scripts/setup.sh            (Debian packages + PyPI test tools)
set -euo pipefail

DEB_PACKAGES=(
  cmake g++ pkg-config ninja-build ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libcivetweb-dev civetweb prometheus-cpp-dev libopenblas-dev
  libxxhash-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libbenchmark-dev prometheus python3
)
# PyPI test tools as pip-name[:import-name] (the import name when it differs).
PY_PACKAGES=(numpy safetensors pyyaml:yaml kubernetes-validate:kubernetes_validate lizard)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

py_missing=()
for entry in "${PY_PACKAGES[@]}"; do
  pip_name="${entry%%:*}"; import_name="${entry#*:}"
  python3 -c "import $import_name" 2>/dev/null || py_missing+=("$pip_name")
done
if ((${#py_missing[@]})); then
  echo "setup: pip installing ${py_missing[*]}"
  # Debian's own python3 is "externally managed"; a pyenv/venv python is not.
  python3 -m pip install -q --disable-pip-version-check "${py_missing[@]}" 2>/dev/null \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages \
         "${py_missing[@]}"
fi
echo "setup: all dependencies present"
