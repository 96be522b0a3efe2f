#!/usr/bin/env python3
"""Each of the project's static libraries links what it uses.

A static library that calls into another library it does not declare
(target_link_libraries) builds only while every program happens to list
that other library after it: a link-order dependency. This test reads
each library's declared dependencies (direct and transitive) from CMake's
file API (the code model the top CMakeLists.txt asks for), lists the
zeroshard symbols its archive leaves undefined (nm), and fails naming
every library whose undefined symbols no archive in its own closure
defines.

Environment: ZEROSHARD_BUILD_DIR (the configured, built tree). Skips (77)
where nm or the code model is missing.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

OURS = re.compile(r"\bzeroshard::")


def code_model(build):
    replies = glob.glob(os.path.join(build, ".cmake/api/v1/reply/codemodel-v2-*.json"))
    if not replies:
        return None
    model = json.load(open(max(replies, key=os.path.getmtime)))
    reply_dir = os.path.dirname(replies[0])
    libraries = {}
    for config in model["configurations"][:1]:
        for ref in config["targets"]:
            target = json.load(open(os.path.join(reply_dir, ref["jsonFile"])))
            if target["type"] != "STATIC_LIBRARY":
                continue
            libraries[target["id"]] = {
                "name": target["name"],
                "archive": os.path.join(build, target["artifacts"][0]["path"]),
                "deps": [d["id"] for d in target.get("dependencies", [])],
            }
    return libraries


def symbols(archive, which):
    out = subprocess.run(["nm", "-C", which, archive], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split(None, 2) if which == "--defined-only" else line.split(None, 1)
        if which == "--undefined-only" and len(parts) == 2 and parts[0] == "U":
            names.add(parts[1])
        elif which == "--defined-only" and len(parts) == 3 and parts[1] not in ("U", "w"):
            names.add(parts[2])
    return {n for n in names if OURS.search(n)}


def main():
    build = os.environ.get("ZEROSHARD_BUILD_DIR", "build")
    if shutil.which("nm") is None:
        print("SKIP: nm is not installed")
        return 77
    libraries = code_model(build)
    if not libraries:
        print(f"SKIP: no CMake code model under {build} (configure twice to write it)")
        return 77
    defined, undefined = {}, {}
    for lib_id, lib in libraries.items():
        if not os.path.exists(lib["archive"]):
            print(f"SKIP: {lib['archive']} is not built")
            return 77
        defined[lib_id] = symbols(lib["archive"], "--defined-only")
        undefined[lib_id] = symbols(lib["archive"], "--undefined-only")
    problems = []
    for lib_id, lib in sorted(libraries.items(), key=lambda kv: kv[1]["name"]):
        closure = set(defined[lib_id])
        for dep in lib["deps"]:
            closure |= defined.get(dep, set())
        missing = sorted(undefined[lib_id] - closure)
        if not missing:
            continue
        owners = sorted({libraries[o]["name"] for o in defined for s in missing
                         if s in defined[o]})
        problems.append(f"{lib['name']}: {len(missing)} symbol(s) it does not link, e.g. "
                        f"{missing[0]!r}; defined in {owners or 'no project library'}")
    for p in problems:
        print(p)
    print(f"link_deps_test: {len(libraries)} static libraries, {len(problems)} with a "
          "link-order dependency")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
