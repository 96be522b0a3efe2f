#!/usr/bin/env python3
"""deploy/docker: Docker cannot run here, so the Dockerfiles are checked by
reading them against the repository: every path they COPY exists, every
folder the CMake project adds is copied (or the in-image build would fail),
the binaries they stage are targets the project builds, the runtime stage
runs as non-root, builds a Release configuration of only the shipped
targets, a top-level .dockerignore keeps build dirs, runs/, .git and
worktrees out of the context, and collect-runtime-libs.sh stages a real
binary, stripped, so that it runs from the staged libraries alone."""
import fnmatch
import os
import re
import subprocess
import tempfile
import pathlib

import deploy_common as dc

DOCKER = dc.DEPLOY / "docker"
COLLECT = DOCKER / "collect-runtime-libs.sh"

c = dc.Checker("docker_test")

root_cmake = (dc.SOURCE_DIR / "CMakeLists.txt").read_text()
project_dirs = set(re.findall(r"^\s*add_subdirectory\((\w+)\)", root_cmake, re.M))
project_dirs |= {p.split("/")[0] for p in re.findall(r"^\s*include\(([\w/]+\.cmake)\)",
                                                     root_cmake, re.M)}
executables = set()
for cm in dc.SOURCE_DIR.glob("*/CMakeLists.txt"):
    executables |= set(re.findall(r"add_executable\(([\w-]+)", cm.read_text()))


def instructions(text):
    """(KEYWORD, argument) per instruction, continuation lines joined,
    comment lines dropped."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    return [(m.group(1).upper(), m.group(2).strip())
            for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.M)]


for name, binary in (("Dockerfile.coordinator", "zeroshard-coordinator"),
                     ("Dockerfile.worker", "zeroshard-worker")):
    text = (DOCKER / name).read_text()
    ins = instructions(text)
    froms = [a for k, a in ins if k == "FROM"]
    c.check(len(froms) >= 2, f"{name} is multi-stage (FROM x{len(froms)})")
    copies = [a.split() for k, a in ins if k == "COPY"]
    copied = set()
    for args in copies:
        if any(a.startswith("--from") for a in args):
            continue
        for src in args[:-1]:
            c.check((dc.SOURCE_DIR / src).exists(), f"{name}: COPY source {src} exists")
            copied.add(src.rstrip("/").split("/")[0])
    for d in sorted(project_dirs):
        c.check(d in copied, f"{name}: copies {d}/, which the root CMakeLists.txt adds")
    for f in ("CMakeLists.txt", "CMakePresets.json", "scripts"):
        c.check(f in copied, f"{name}: copies {f}")
    c.check(not any(s.startswith("build") for s in copied), f"{name}: copies no build directory")
    run = " ".join(a for k, a in ins if k == "RUN")
    c.check("scripts/setup.sh" in run, f"{name}: installs the build dependencies with setup.sh")
    c.check("-DCMAKE_BUILD_TYPE=Release" in run, f"{name}: configures CMAKE_BUILD_TYPE=Release")
    builds = re.findall(r"cmake --build (\S+)((?:\s+--target(?:\s+[\w-]+)+)?)", run)
    c.check("scripts/build.sh" not in run and builds and all(t for _, t in builds),
            f"{name}: every `cmake --build` names its --target (no whole-tree build)")
    built = {t for _, ts in builds for t in ts.split() if t != "--target"}
    staged = re.findall(r"collect-runtime-libs\.sh\s+\S+\s+((?:build/bin/[\w-]+\s*)+)", run)
    staged_bins = {p.rsplit("/", 1)[-1] for s in staged for p in s.split()}
    c.check(staged_bins == {binary, "zeroshard"},
            f"{name}: stages {binary} and the zeroshard CLI (staged {sorted(staged_bins)})")
    c.check(built == staged_bins, f"{name}: builds exactly the targets it ships "
            f"(built {sorted(built)}, staged {sorted(staged_bins)})")
    for b in staged_bins:
        c.check(b in executables, f"{name}: {b} is an add_executable target")
    final = text[text.rfind("\nFROM "):]
    user = re.findall(r"^USER\s+(\S+)", final, re.M)
    c.check(user and not user[-1].startswith(("0", "root")), f"{name}: runtime runs as non-root")
    entry = re.search(r'^ENTRYPOINT\s+\["([^"]+)"', final, re.M)
    c.check(entry and entry.group(1) == binary, f"{name}: ENTRYPOINT is {binary}")
    c.check("--from=build" in final, f"{name}: runtime copies only from the build stage")
    # A staged binary run by bare name in the runtime stage needs PATH first.
    final_ins = instructions(final)
    path_at = next((i for i, (k, a) in enumerate(final_ins)
                    if k == "ENV" and "/opt/zeroshard/bin" in a), len(final_ins))
    for i, (k, a) in enumerate(final_ins):
        if k == "RUN" and any(re.search(rf"(?<![/\w-]){re.escape(b)}\b", a) for b in staged_bins):
            c.check(path_at < i, f"{name}: PATH has /opt/zeroshard/bin before `RUN {a[:60]}...`")
coord_text = (DOCKER / "Dockerfile.coordinator").read_text()
c.check("-DZEROSHARD_CUDA=OFF" in coord_text, "coordinator image configures -DZEROSHARD_CUDA=OFF")
c.check(re.search(r"^EXPOSE\s+50051\s+9464\s*$", coord_text, re.M) is not None
        and "--metrics-listen=0.0.0.0:9464" in coord_text,
        "coordinator image serves metrics on 9464 (EXPOSE and CMD)")

# --- .dockerignore: the build context leaves out what the image never reads. ---
ignore_file = dc.SOURCE_DIR / ".dockerignore"
c.check(ignore_file.is_file(), ".dockerignore at the repository root")
patterns = [ln.strip() for ln in (ignore_file.read_text() if ignore_file.is_file() else "")
            .splitlines() if ln.strip() and not ln.startswith("#")]


def ignored(path):
    return any(fnmatch.fnmatch(path, p.rstrip("/")) for p in patterns if not p.startswith("!"))


for path in (".git", "build", "build-asan", "runs", "wt-k8s"):
    c.check(ignored(path), f".dockerignore leaves out {path}")
for name in ("Dockerfile.coordinator", "Dockerfile.worker"):
    for k, a in instructions((DOCKER / name).read_text()):
        if k == "COPY" and "--from" not in a:
            for src in a.split()[:-1]:
                c.check(not ignored(src.rstrip("/")), f".dockerignore keeps {src}, {name} copies it")
c.check("BUILD_IMAGE" in (DOCKER / "Dockerfile.worker").read_text(),
        "worker image takes a CUDA build image as a build argument")

# --- collect-runtime-libs.sh on a real binary. ---
c.check(os.access(COLLECT, os.X_OK), "collect-runtime-libs.sh is executable")
binary = dc.BIN_DIR / "zeroshard-coordinator"
if binary.is_file():
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([str(COLLECT), d, str(binary)], capture_output=True, text=True,
                             timeout=60)
        c.check(out.returncode == 0, f"collect-runtime-libs.sh: {out.stderr.strip()}")
        staged = pathlib.Path(d) / "bin" / binary.name
        c.check(staged.is_file(), "binary staged under bin/")
        sections = subprocess.run(["readelf", "-S", "-W", str(staged)], capture_output=True,
                                  text=True, timeout=30).stdout
        c.check(".text" in sections and ".symtab" not in sections
                and ".debug_info" not in sections,
                "the staged binary is stripped (no .symtab, no .debug_info)")
        c.check(staged.stat().st_size < binary.stat().st_size,
                f"stripped {staged.stat().st_size} B < built {binary.stat().st_size} B")
        # Every library the binary needs resolves from the staged lib/ or
        # glibc/libstdc++ (present in the runtime base), never elsewhere.
        env = dict(os.environ, LD_LIBRARY_PATH=str(pathlib.Path(d) / "lib"))
        ldd = subprocess.run(["ldd", str(staged)], capture_output=True, text=True, env=env,
                             timeout=30).stdout
        base = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so",
                "librt.so", "libstdc++.so", "libgcc_s.so")
        for line in ldd.splitlines():
            parts = line.split()
            if not parts or parts[0].startswith(base) or "=>" not in parts:
                continue
            path = parts[parts.index("=>") + 1]
            c.check(path.startswith(d), f"{parts[0]} resolves from the staged libs (got {path})")
        ver = subprocess.run([str(staged), "--version"], capture_output=True, text=True, env=env,
                             timeout=30)
        c.check(ver.returncode == 0, f"staged binary runs: {ver.stderr.strip()}")
else:
    print(f"note: {binary} not built; collect-runtime-libs.sh not exercised")

c.finish()
