#!/usr/bin/env bash
# Installs the tools only the tests use, only when missing (scripts/test.sh
# runs it after scripts/setup.sh; the main job never does):
#   Debian: prometheus (promtool and the server, for the deploy checks),
#           clang-format (the format lint, tests/lint/format_test.sh);
#   PyPI:   numpy, safetensors, PyYAML, kubernetes-validate, lizard, grpcio and
#           grpcio-tools (the attack test compiles proto/ for its client);
#   PyPI:   tokenizers, tiktoken, sentencepiece: the tokenizer references (the
#           vocabularies themselves are fetched by the tests, cached);
#   PyPI:   torch (CPU use only) and transformers, for the Hugging Face
#           export test. PyPI's torch is the CUDA build (~4 GB with all its
#           nvidia-* and triton wheels). The machines here carry CUDA 13 in
#           /usr/local/cuda, so torch goes in without dependencies, then its
#           pure-Python ones and only the CUDA wheels the image lacks, pinned
#           as torch pins them (torch_missing_wheels); the full install is the
#           fallback if that torch does not import.
# A test tool that cannot be installed (after one retry) is reported and
# skipped: the tests that need it exit 77 with the reason. Idempotent.
# Usage: scripts/setup-test-tools.sh
set -uo pipefail

DEB_TEST_PACKAGES=(prometheus clang-format)
# PyPI test tools as pip-name[:import-name] (the import name when it differs).
PY_PACKAGES=(numpy safetensors pyyaml:yaml kubernetes-validate:kubernetes_validate lizard grpcio:grpc
  grpcio-tools:grpc_tools
  tokenizers tiktoken sentencepiece)
TORCH_PURE_DEPS=(filelock typing-extensions sympy networkx jinja2 fsspec setuptools)

status=0
# shellcheck source=scripts/apt_missing.sh
source "$(dirname "$0")/apt_missing.sh"
apt_install_missing setup-test-tools "${DEB_TEST_PACKAGES[@]}" \
  || { echo "setup-test-tools: could not install ${DEB_TEST_PACKAGES[*]}; their tests skip"
       status=1; }

# pip_install ARGS...: pip into this python3 (Debian's own is "externally
# managed": then with --break-system-packages), one retry.
pip_install() {
  local try
  for try in 1 2; do
    python3 -m pip install -q --disable-pip-version-check "$@" 2>/dev/null && return 0
    python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@" \
      && return 0
    echo "setup-test-tools: pip install $* failed (try $try of 2)"
  done
  return 1
}

# has_module NAME: installed (found without importing it: quick).
has_module() {
  python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)" \
    2>/dev/null
}
py_missing=()
for entry in "${PY_PACKAGES[@]}"; do
  pip_name="${entry%%:*}"; import_name="${entry#*:}"
  has_module "$import_name" || py_missing+=("$pip_name")
done
if ((${#py_missing[@]})); then
  echo "setup-test-tools: pip installing ${py_missing[*]}"
  pip_install "${py_missing[@]}" || status=1
fi

torch_works() { python3 -c "import torch; torch.ones(2).sum()" 2>/dev/null; }
# The installed torch's own pins for the libraries CUDA 13 in /usr/local/cuda
# does not have (cuSPARSELt, NVSHMEM, cuFile) or has too old (NCCL).
torch_missing_wheels() {
  python3 - <<'PY'
import re
from importlib.metadata import requires
lacking = {"nvidia-cusparselt-cu13", "nvidia-nvshmem-cu13", "nvidia-nccl-cu13"}
out = []
for r in requires("torch") or []:
    spec = r.split(";")[0].strip()
    name = re.split(r"[\[<>=~! ]", spec, maxsplit=1)[0].lower()
    if name in lacking:
        out.append(spec)
    elif name == "cuda-toolkit":
        out.append(re.sub(r"\[.*\]", "[cufile]", spec))
print(" ".join(out))
PY
}
torch_light() {
  pip_install --no-deps torch && pip_install "${TORCH_PURE_DEPS[@]}" || return 1
  torch_works && return 0
  local wheels
  wheels=$(torch_missing_wheels) && [ -n "$wheels" ] || return 1
  # shellcheck disable=SC2086  # one word per requirement
  pip_install $wheels && torch_works
}
if ! torch_works; then
  echo "setup-test-tools: pip installing torch for the CPU (without most CUDA wheels)"
  start=$SECONDS
  torch_light \
    || { echo "setup-test-tools: that torch does not import; installing torch with all its wheels"
         pip_install torch && torch_works; } \
    || { echo "setup-test-tools: torch could not be installed; the export test skips"; status=1; }
  echo "setup-test-tools: torch took $((SECONDS - start)) s"
fi
if ! has_module transformers; then
  echo "setup-test-tools: pip installing transformers"
  pip_install transformers \
    || { echo "setup-test-tools: transformers could not be installed; the export test skips"
         status=1; }
fi
((status == 0)) && echo "setup-test-tools: all test tools present"
# Missing tools make their tests skip, never fail the run.
exit 0
