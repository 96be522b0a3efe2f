#!/usr/bin/env python3
"""The code's shape (STYLE.md points 20-21): no source file over 400 lines
and no function over 60 lines, except a function whose body carries a
`#lizard forgives(length)` comment saying why. Function lengths are
lizard's (PyPI), measured from the signature to the closing brace.

Exit codes: 0 clean, 1 a file or function over the limit (each named), or
lizard missing and not installable: where scripts/setup-test-tools.sh has
not installed it, the test pip-installs it itself rather than skip."""
import importlib
import os
import pathlib
import subprocess
import sys

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
FOLDERS = ("common", "server", "worker", "cli", "tests", "bench")
SUFFIXES = (".cc", ".h", ".cu", ".cuh")

def import_lizard():
    try:
        return importlib.import_module("lizard")
    except ImportError:
        pass
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "lizard"]
    for extra in ([], ["--break-system-packages"]):
        if subprocess.run(pip + extra, capture_output=True).returncode == 0:
            importlib.invalidate_caches()
            return importlib.import_module("lizard")
    print("structure_test: FAIL: the lizard module is missing and pip could not install it "
          "(scripts/setup-test-tools.sh installs it)")
    sys.exit(1)


lizard = import_lizard()


def sources(root):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                yield path


def main():
    root = pathlib.Path(os.environ.get("ZEROSHARD_SOURCE_DIR",
                                       pathlib.Path(__file__).resolve().parents[2]))
    problems, files, functions = [], 0, 0
    for path in sources(root):
        files += 1
        rel = path.relative_to(root)
        text = path.read_text(errors="replace")
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            problems.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES})")
        info = lizard.analyze_file.analyze_source_code(str(path), text)
        for fn in info.function_list:
            functions += 1
            if fn.length > MAX_FUNCTION_LINES:
                problems.append(f"{rel}:{fn.start_line}: {fn.name} is {fn.length} lines "
                                f"(limit {MAX_FUNCTION_LINES}; split it, or say why with "
                                f"'#lizard forgives(length)')")
    for p in problems:
        print(p)
    print(f"structure_test: {files} files, {functions} functions, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
