#!/usr/bin/env bash
# Copies binaries (stripped of symbols and debug info) and the shared
# libraries they load into a staging tree for a slim runtime image:
# DEST/bin/<binary> and DEST/lib/<soname>.
# glibc's own libraries and libstdc++/libgcc are left out (the Debian 12
# runtime base has the same versions). The CUDA driver (libcuda,
# libnvidia-ml) is left out too: the NVIDIA container runtime mounts the
# host's copy into GPU pods.
# Usage: collect-runtime-libs.sh DEST BINARY...
set -euo pipefail
dest="$1"; shift
mkdir -p "$dest/bin" "$dest/lib"
for bin in "$@"; do
  install -m 0755 "$bin" "$dest/bin/"
  strip --strip-all "$dest/bin/$(basename "$bin")"
  # ldd prints "soname => /path (addr)" for every library in the closure.
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    case "$soname" in
      linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) continue ;;
      libstdc++.so.*|libgcc_s.so.*) continue ;;
      libcuda.so.*|libnvidia-ml.so.*) continue ;;
    esac
    if [ "$path" = "not" ]; then
      echo "collect-runtime-libs: $bin needs $soname, which is not found" >&2
      exit 1
    fi
    cp -L "$path" "$dest/lib/$soname"
  done < <(ldd "$bin")
done
echo "collect-runtime-libs: $(ls "$dest/lib" | wc -l) libraries for $*"
