#!/usr/bin/env python3
"""The GPU bundle, checked on a machine without a GPU (issue 38): packs it
with scripts/gpu-bundle.sh from this build's binaries (--no-build: nothing
is rebuilt while the suite runs), then

- the archive is at most 40 MiB;
- unpacked, `ldd` of every binary and library, with only the bundle's
  library folder on LD_LIBRARY_PATH and an empty environment otherwise,
  resolves every library into the bundle or to one the GPU image provides
  (libc and its kin, libstdc++, OpenSSL, zlib, and the CUDA runtime, NCCL
  and cuBLAS, which here come from this machine's CUDA install as they
  come from the image's there); no RUNPATH names a folder of this machine;
- the CPU-runnable binaries run under `env -i` with the bundle's library
  folder and the system's: a CPU test, a GPU test (it loads the CUDA
  libraries and skips, exit 77, for want of a GPU), and
  `zeroshard launch --device cpu` for 3 steps on real text;
- run.sh, beside the archive, prints one line and exits 77 without a GPU.

Skipped (77) where the build is not a CUDA build (no GPU test in it).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402

BUILD = os.path.dirname(os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin")))
MAX_ARCHIVE = 40 << 20
# Sonames the GPU image provides: the C library and its kin, libstdc++,
# OpenSSL, zlib; CUDA's runtime, NCCL, cuBLAS and the driver.
PROVIDED = re.compile(
    r"^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|"
    r"libssl|libcrypto|libz|libcuda|libcudart|libnccl|libcublas|libcublasLt)\.so")


def run(cmd, env=None, timeout=240, cwd=None):
    return subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True)


def bare_env(bundle, **extra):
    """What `env -i` leaves, plus the bundle's library folder."""
    return {"LD_LIBRARY_PATH": os.path.join(bundle, "lib"), **extra}


def check_libraries(bundle):
    bad, runpaths = [], []
    for folder in ("bin", "lib"):
        for name in sorted(os.listdir(os.path.join(bundle, folder))):
            path = os.path.join(bundle, folder, name)
            out = run(["/usr/bin/ldd", path], env=bare_env(bundle)).stdout
            for line in out.splitlines():
                m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
                if not m:
                    continue
                soname, where = m.group(1), m.group(2)
                inside = where.startswith(os.path.join(bundle, "lib") + "/")
                if not inside and not PROVIDED.match(soname):
                    bad.append(f"{folder}/{name}: {soname} => {where}")
            dyn = run(["readelf", "-d", path]).stdout
            for rp in re.findall(r"R(?:UN)?PATH\).*\[(.*)\]", dyn):
                if any(not p.startswith("$ORIGIN") for p in rp.split(":")):
                    runpaths.append(f"{folder}/{name}: {rp}")
    check(not bad, "every library resolves into the bundle or is one the image provides"
          + ("" if not bad else ": " + "; ".join(bad[:8])))
    check(not runpaths, "no RUNPATH names a folder of this machine"
          + ("" if not runpaths else ": " + "; ".join(runpaths[:8])))


def check_bare_runs(bundle, tmp):
    bin_dir = os.path.join(bundle, "bin")
    r = run([os.path.join(bin_dir, "device_cpu_test"), "--gtest_brief=1"], env=bare_env(bundle))
    check(r.returncode == 0, f"env -i: device_cpu_test passes (exit {r.returncode}) "
          + r.stderr[-300:])
    r = run([os.path.join(bin_dir, "device_cuda_test")], env=bare_env(bundle))
    check(r.returncode in (0, 77), f"env -i: device_cuda_test loads its CUDA libraries and "
          f"runs or skips (exit {r.returncode}) " + (r.stdout + r.stderr)[-300:])
    run_dir = os.path.join(tmp, "run")
    r = run([os.path.join(bin_dir, "zeroshard"), "launch", "--device", "cpu", "--workers", "2",
             "--model", "tiny", "--steps", "3", "--data", os.path.join(ROOT, "README.md"),
             "--run-dir", run_dir], env=bare_env(bundle), cwd=tmp)
    steps = os.path.join(run_dir, "steps.jsonl")
    lines = open(steps).read().splitlines() if os.path.exists(steps) else []
    check(r.returncode == 0 and len(lines) == 3,
          f"env -i: zeroshard launch --device cpu ran 3 steps (exit {r.returncode}, "
          f"{len(lines)} step lines) " + ("" if r.returncode == 0 else r.stderr[-600:]))


def check_run_sh(out):
    if shutil.which("nvidia-smi") and run(["nvidia-smi", "-L"]).returncode == 0:
        print("note: this machine has a GPU; run.sh's no-GPU answer is not checked here")
        return
    r = run([os.path.join(out, "run.sh")], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    text = (r.stdout + r.stderr).strip()
    check(r.returncode == 77 and len(text.splitlines()) == 1 and "GPU" in text,
          f"run.sh without a GPU: one line, exit 77 (exit {r.returncode}: {text!r})")


def main():
    gpu_tests = run(["ctest", "--test-dir", BUILD, "-N", "-L", "gpu"]).stdout
    if not re.search(r"Test +#\d+:", gpu_tests):
        skip(f"{BUILD} is not a CUDA build (no test labelled gpu)")
    with tempfile.TemporaryDirectory(prefix="zs-bundle-") as tmp:
        out = os.path.join(tmp, "out")
        r = run([os.path.join(ROOT, "scripts", "gpu-bundle.sh"), "--build-dir", BUILD,
                 "--out", out, "--no-build"])
        print(r.stdout.strip())
        if not check(r.returncode == 0, f"scripts/gpu-bundle.sh builds the bundle "
                     f"(exit {r.returncode}) {r.stderr[-600:]}"):
            return finish()
        archive = os.path.join(out, "zeroshard-gpu.tar.xz")
        size = os.path.getsize(archive)
        check(size <= MAX_ARCHIVE, f"archive {size / 2**20:.1f} MiB <= 40 MiB")
        unpacked = os.path.join(tmp, "x")
        os.makedirs(unpacked)
        check(run(["tar", "-C", unpacked, "-xJf", archive]).returncode == 0, "archive unpacks")
        bundle = os.path.join(unpacked, "zeroshard-gpu")
        check_libraries(bundle)
        check_bare_runs(bundle, tmp)
        check_run_sh(out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
