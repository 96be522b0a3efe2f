#!/usr/bin/env python3
"""Keeps the manifests and images honest: every flag that deploy/k8s (the
base and every overlay) or a
Dockerfile's CMD passes to zeroshard-coordinator / zeroshard-worker appears
in that binary's --help. Skipped (77) when the binaries are not built."""
import re
import subprocess

import deploy_common as dc

c = dc.Checker("flags_test")


def help_flags(binary):
    path = dc.BIN_DIR / binary
    out = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=30)
    c.check(out.returncode == 0, f"{binary} --help exits 0 (got {out.returncode})")
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out.stdout + out.stderr))


def dockerfile_cmd_flags(name):
    """Flags in the Dockerfile's CMD (JSON form, possibly over several lines)."""
    text = (dc.DEPLOY / "docker" / name).read_text().replace("\\\n", " ")
    m = re.search(r"^CMD\s+(\[.*?\])", text, re.M)
    return set(re.findall(r'"(--[a-z][a-z0-9-]*)', m.group(1))) if m else set()


binaries = ("zeroshard-coordinator", "zeroshard-worker")
missing = [b for b in binaries if not (dc.BIN_DIR / b).is_file()]
if missing:
    dc.skip(f"{', '.join(missing)} not built in {dc.BIN_DIR}")

known = {b: help_flags(b) for b in binaries}
used = {b: {} for b in binaries}  # binary -> flag -> where
for render, path in dc.render_dirs().items():
    objs, _ = dc.load_resources(path)
    for o in objs:
        for tmpl in dc.pod_templates(o):
            spec = tmpl["spec"]
            for container in spec.get("containers", []) + spec.get("initContainers", []):
                argv = dc.container_argv(container)
                binary = argv[0].rsplit("/", 1)[-1] if argv else ""
                if binary not in used:
                    continue
                for flag in dc.flags_of(argv):
                    used[binary].setdefault(flag, set()).add(
                        f"{render}:{o['kind']}/{o['metadata']['name']}")
for dockerfile, binary in (("Dockerfile.coordinator", "zeroshard-coordinator"),
                           ("Dockerfile.worker", "zeroshard-worker")):
    for flag in dockerfile_cmd_flags(dockerfile):
        used[binary].setdefault(flag, set()).add(dockerfile)

c.check(used["zeroshard-coordinator"] and used["zeroshard-worker"],
        "the manifests run both binaries with flags")
for binary, flags in used.items():
    for flag, where in sorted(flags.items()):
        c.check(flag in known[binary],
                f"{flag} (used by {sorted(where)}) is not in `{binary} --help`")
c.finish()
