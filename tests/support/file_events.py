"""Waiting on files another process writes, on the kernel's inotify events
instead of sleeps (the Python twin of tests/support/file_watch.h).

wait_for_files(directory, predicate, timeout) checks predicate() at once,
then after each change in `directory` (a file created, written, closed or
moved in), and returns its first truthy value, or None once `timeout`
seconds passed. `recheck` (seconds) bounds each wait for an event, for
conditions that change without one (a child process's exit). Where
inotify cannot be had (no such directory, the watch limit reached) it
checks every 20 ms instead and says so on stderr. Standard library only
(ctypes over libc's inotify_init1/inotify_add_watch).
"""
import ctypes
import ctypes.util
import os
import select
import sys
import time

_CHANGES = 0x100 | 0x002 | 0x008 | 0x080  # IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _watch(directory):
    """An inotify fd watching `directory`, or None."""
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    if _libc.inotify_add_watch(fd, os.fsencode(str(directory)), _CHANGES) < 0:
        os.close(fd)
        return None
    return fd


def _drain(fd):
    try:
        while os.read(fd, 65536):
            pass
    except BlockingIOError:
        pass


def wait_for_files(directory, predicate, timeout, recheck=None):
    deadline = time.monotonic() + timeout
    fd = _watch(directory)
    if fd is None:
        print(f"wait_for_files: no inotify watch on {directory}: checking every 20 ms",
              file=sys.stderr)
    poller = select.poll()
    if fd is not None:
        poller.register(fd, select.POLLIN)
    try:
        while True:
            value = predicate()  # After the watch is set: no change is missed between.
            left = deadline - time.monotonic()
            if value or left <= 0:
                return value or None
            if fd is None:
                time.sleep(min(left, 0.02))
                continue
            wait = left if recheck is None else min(left, recheck)
            if poller.poll(wait * 1000 + 1):
                _drain(fd)
    finally:
        if fd is not None:
            os.close(fd)
