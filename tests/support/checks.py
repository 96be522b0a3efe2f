"""The bookkeeping zeroshard's Python tests share: each check prints one
"ok"/"FAIL" line, a test ends with the "N passed, M failed" line CTest's
log readers know, and a missing test tool is a skip (exit 77) with its
reason.
"""
import sys

SKIP = 77
passes, failures = [], []


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def check(cond, message):
    print(("ok   " if cond else "FAIL ") + message, flush=True)
    (passes if cond else failures).append(message)
    return cond


def finish():
    """Prints the closing line; the exit code (1 on any failure)."""
    print(f"{len(passes)} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0
