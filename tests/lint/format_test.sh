#!/usr/bin/env bash
# The tree follows .clang-format (Google style, 100 columns): every tracked
# C++ and CUDA file formats to itself. The files that do not are listed with
# the command that fixes them. Skips (77) where clang-format is missing
# (scripts/setup-test-tools.sh installs Debian's) or the tree is not a git
# checkout. Formatting changes between clang-format majors: the tree is
# formatted with the version Debian ships (14).
set -uo pipefail
cd "${ZEROSHARD_SOURCE_DIR:?}"
if ! command -v clang-format >/dev/null; then
  echo "format_test: clang-format is not installed (scripts/setup-test-tools.sh installs it); skipped"
  exit 77
fi
if ! files=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null) || [ -z "$files" ]; then
  echo "format_test: not a git checkout; skipped"
  exit 77
fi
clang-format --version
bad=()
while IFS= read -r f; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done <<< "$files"
count=$(wc -l <<< "$files")
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted: %s\n' "${bad[@]}"
  echo "format_test: ${#bad[@]} of $count files differ from .clang-format; fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format_test: $count files follow .clang-format"
