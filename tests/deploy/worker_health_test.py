#!/usr/bin/env python3
"""zeroshard-worker --health-listen, as the worker Job's probes see it
(processes over loopback):
- before it has joined (no coordinator answers yet) /healthz is 200 and
  /readyz 503;
- joined but alone (below --min-workers 2) it is healthy, not ready;
- once a second worker makes a generation form, /readyz is 200;
- with the coordinator stopped (SIGSTOP) heartbeats fail and /healthz turns
  503 after --health-stale-after, /readyz 503; after SIGCONT both recover;
- a malformed or busy --health-listen is one line naming the flag, exit 1;
- SIGTERM while waiting to join (a live member holds the worker id) and
  after the coordinator's pause both exit 0.
Skipped (77) when the binaries are not built."""
import json
import re
import signal
import socket
import subprocess
import tempfile
import time
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import deploy_common as dc  # noqa: E402
from file_events import wait_for_files  # noqa: E402
import k8s_local as kl  # noqa: E402

STALE_S = 2

c = dc.Checker("worker_health_test")
coordinator_bin, worker_bin = dc.BIN_DIR / "zeroshard-coordinator", dc.BIN_DIR / "zeroshard-worker"
for b in (coordinator_bin, worker_bin):
    if not b.is_file():
        dc.skip(f"{b} not built")
procs = []


def start(argv, log):
    p = subprocess.Popen([str(a) for a in argv], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def health_port(log, proc, timeout=15):
    """The port the worker prints to `log`, read on the log's file events
    (None if it exits or the timeout passes first)."""
    def port():
        m = re.search(r"^health on 127\.0\.0\.1:(\d+) ", pathlib.Path(log).read_text(), re.M)
        return int(m.group(1)) if m else (proc.poll() is not None and -1)
    found = wait_for_files(pathlib.Path(log).parent, port, timeout, recheck=0.5)
    return found if found and found > 0 else None


def wait_status(port, path, want, timeout):
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = kl.http_status(port, path)
        if got == want:
            return got
        time.sleep(0.2)
    return got


def worker(d, name, coordinator):
    log = pathlib.Path(d) / f"{name}.log"
    p = start([worker_bin, f"--coordinator={coordinator}", f"--worker-id={name}", "--threads=1",
               "--health-listen=127.0.0.1:0", f"--health-stale-after={STALE_S}"], log)
    port = health_port(log, p)
    c.check(port is not None, f"{name} prints its health port: {log.read_text()[-400:]}")
    return p, port, log


with tempfile.TemporaryDirectory() as d:
    try:
        # Bad flags: one line naming --health-listen, exit 1.
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            for value, want in (("nope", "is not HOST:PORT"),
                                (f"127.0.0.1:{busy.getsockname()[1]}", "already in use")):
                out = subprocess.run([str(worker_bin), "--coordinator=127.0.0.1:1",
                                      f"--health-listen={value}"], capture_output=True,
                                     text=True, timeout=30)
                lines = out.stderr.strip().splitlines()
                c.check(out.returncode == 1 and len(lines) == 1 and "--health-listen" in lines[0]
                        and want in lines[0], f"--health-listen={value}: exit 1 with one line "
                        f"naming the flag ({out.returncode}, {out.stderr!r})")

        # No coordinator yet: alive (joining has its own deadline), not ready.
        grpc = dc.free_port()
        early, early_port, early_log = worker(d, "early", f"127.0.0.1:{grpc}")
        c.check(kl.http_status(early_port, "/healthz") == 200, "/healthz 200 before joining")
        c.check(kl.http_status(early_port, "/readyz") == 503, "/readyz 503 before joining")
        c.check(kl.http_status(early_port, "/metrics") == 404, "nothing but the probes is served")
        early.send_signal(signal.SIGTERM)
        c.check(early.wait(timeout=30) == 0, f"SIGTERM before joining exits 0: "
                f"{early_log.read_text()[-300:]}")

        metrics = dc.free_port()
        job = {"model": "tiny", "steps": 100000, "global_batch": 4, "micro_batch": 2,
               "eval_every": 0, "threads": 1}
        coordinator = start([coordinator_bin, f"--listen=127.0.0.1:{grpc}",
                             f"--metrics-listen=127.0.0.1:{metrics}", "--min-workers=2",
                             "--heartbeat-interval=0.2", "--lease-timeout=3", "--settle=0",
                             f"--job-config-json={json.dumps(job)}"],
                            pathlib.Path(d) / "coordinator.log")
        c.check(wait_status(metrics, "/readyz", 200, 15) == 200, "coordinator serving")
        a, a_port, a_log = worker(d, "a", f"127.0.0.1:{grpc}")
        c.check(wait_status(a_port, "/healthz", 200, 10) == 200, "joined alone: /healthz 200")
        time.sleep(1)
        c.check(kl.http_status(a_port, "/readyz") == 503,
                "joined alone (below --min-workers): /readyz 503")
        b, b_port, _ = worker(d, "b", f"127.0.0.1:{grpc}")
        c.check(wait_status(a_port, "/readyz", 200, 30) == 200,
                f"in a running generation: /readyz 200 ({a_log.read_text()[-300:]})")
        c.check(wait_status(b_port, "/readyz", 200, 30) == 200, "the second worker is ready too")

        # A second "a" waits for the live member's id; a stop while it waits
        # to join is a leave (exit 0), not an error.
        dup_log = pathlib.Path(d) / "a-dup.log"
        dup = start([worker_bin, f"--coordinator=127.0.0.1:{grpc}", "--worker-id=a",
                     "--threads=1"], dup_log)
        # Its Join is refused while "a" holds the id: it says so, then retries.
        wait_for_files(d, lambda: "still held" in dup_log.read_text(), 20)
        dup.send_signal(signal.SIGTERM)
        rc = dup.wait(timeout=30)
        c.check(rc == 0, f"SIGTERM while waiting to join exits 0 (exit {rc}: "
                f"{dup_log.read_text()[-600:]})")

        coordinator.send_signal(signal.SIGSTOP)
        c.check(wait_status(a_port, "/healthz", 503, STALE_S + 10) == 503,
                f"heartbeats failing for {STALE_S} s: /healthz 503")
        c.check(wait_status(a_port, "/readyz", 503, 15) == 503,
                "heartbeats failing (10 s RPC deadline): /readyz 503")
        coordinator.send_signal(signal.SIGCONT)
        c.check(wait_status(a_port, "/healthz", 200, 20) == 200,
                "coordinator back: /healthz 200 again")
        for name, p in (("a", a), ("b", b)):
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=60)
            log = (pathlib.Path(d) / f"{name}.log")
            c.check(rc == 0, f"worker {name} exits 0 on SIGTERM (exit {rc}; log tail: "
                    f"{log.read_text()[-1500:] if log.is_file() else '(none)'})")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(timeout=10)
c.finish()
