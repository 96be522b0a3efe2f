"""TLS, mTLS, certificate rotation and safe defaults against the real
binaries on loopback, with certificates the test makes with openssl
(certs.py). The client is `zeroshard status` (exit 0: the call went
through; 1: refused or unreachable). Exits 0 pass, 1 fail, 77 skipped."""
import os
import pathlib
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import certs  # noqa: E402

BIN = pathlib.Path(os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"))
FAILURES = []


def check(cond, message):
    print(("ok: " if cond else "FAIL: ") + message, flush=True)
    if not cond:
        FAILURES.append(message)


class Coordinator:
    def __init__(self, d, *flags, listen="127.0.0.1:0", metrics=""):
        self.proc = subprocess.Popen(
            [str(BIN / "zeroshard-coordinator"), "--listen", listen, "--metrics-listen", metrics,
             "--job-id", "tls", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd=d)
        self.out = ""
        deadline = time.time() + 20
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.out += line
            if " (grpc)" in line:
                self.address = re.search(r"listening on (\S+) \(grpc\)", line).group(1)
                m = re.search(r", (\S+) \(metrics\)", line)
                self.metrics = m.group(1) if m else None
                # Keep reading, or a full pipe would block the coordinator.
                threading.Thread(target=self._drain, daemon=True).start()
                return
        self.proc.wait(timeout=10)
        self.address = None

    def _drain(self):
        for line in self.proc.stdout:
            self.out += line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def status(address, d, *flags):
    r = subprocess.run([str(BIN / "zeroshard"), "status", "--coordinator", address,
                        "--timeout", "3", *flags], cwd=d, capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stdout + r.stderr


def client_flags(ca="ca", cert="client"):
    flags = ["--tls-ca", f"{ca}.pem"]
    if cert:
        flags += ["--tls-cert", f"{cert}.pem", "--tls-key", f"{cert}.key"]
    return flags


def test_mtls_refusals(d):
    c = Coordinator(d, "--tls-cert", "server.pem", "--tls-key", "server.key", "--tls-ca", "ca.pem")
    try:
        check(c.address is not None, f"mTLS coordinator starts ({c.out.strip()})")
        if c.address is None:
            return
        code, out = status(c.address, d, *client_flags())
        check(code == 0, f"a client with a CA-signed certificate gets through ({out.strip()})")
        for name, flags in [("no client certificate", client_flags(cert=None)),
                            ("a wrong CA's client certificate", client_flags(cert="wrongclient")),
                            ("an expired client certificate", client_flags(cert="expired")),
                            ("a client that does not trust the server's CA",
                             client_flags(ca="wrongca")),
                            ("a plaintext client", [])]:
            code, out = status(c.address, d, *flags)
            check(code == 1, f"{name} is refused (exit {code})")
    finally:
        c.stop()


def test_rotation(d):
    shutil.copy(d / "server.pem", d / "live.pem")
    shutil.copy(d / "server.key", d / "live.key")
    c = Coordinator(d, "--tls-cert", "live.pem", "--tls-key", "live.key")
    try:
        check(c.address is not None, "TLS coordinator on rotatable files starts")
        if c.address is None:
            return
        check(status(c.address, d, *client_flags(cert=None))[0] == 0, "before rotation: CA 1 works")
        check(status(c.address, d, *client_flags(ca="wrongca", cert=None))[0] == 1,
              "before rotation: CA 2 is refused")
        # Atomic replacement, key first (the watcher skips a mismatched pair).
        for src, dst in [("wrongserver.key", "live.key"), ("wrongserver.pem", "live.pem")]:
            shutil.copy(d / src, d / (dst + ".tmp"))
            os.replace(d / (dst + ".tmp"), d / dst)
        rotated = eventually(
            lambda: status(c.address, d, *client_flags(ca="wrongca", cert=None))[0] == 0)
        check(rotated, "after rotation a new connection sees the new certificate (no restart)")
        check(status(c.address, d, *client_flags(cert=None))[0] == 1,
              "after rotation the old CA no longer verifies the server")
        check(c.proc.poll() is None, "the coordinator kept running")
    finally:
        c.stop()


def test_safe_defaults(d):
    c = Coordinator(d, listen="0.0.0.0:0")
    code = c.proc.wait(timeout=10) if c.address is None else None
    lines = [l for l in c.out.splitlines() if l.strip()]
    check(code == 2 and len(lines) == 1 and "--insecure" in c.out,
          f"a non-loopback --listen without TLS and tokens exits 2 with one line ({c.out.strip()})")
    c.stop()
    c = Coordinator(d, "--insecure", listen="0.0.0.0:0", metrics="127.0.0.1:0")
    try:
        check(c.address is not None and "WARNING" in c.out, "--insecure starts, with a warning")
        if c.address is not None and c.metrics:
            text = urllib.request.urlopen(f"http://{c.metrics}/metrics", timeout=5).read().decode()
            check('insecure="true"' in text, "zeroshard_build_info shows insecure=\"true\"")
            check("zeroshard_kv_" in text and "addr/" not in text, "/metrics is open, no KV content")
    finally:
        c.stop()
    (d / "tokens").write_text("admin admin-token-0123456789abcdef\n")
    (d / "tokens").chmod(0o600)  # Token files open to other users are refused.
    c = Coordinator(d, "--tls-cert", "server.pem", "--tls-key", "server.key", "--token-file",
                    "tokens", listen="0.0.0.0:0")
    try:
        check(c.address is not None, "a non-loopback --listen with TLS and tokens starts")
    finally:
        c.stop()


def eventually(predicate, timeout=15, poll=0.2):
    """predicate() until it is true or `timeout` seconds pass; its last value.
    For states the coordinator exposes without an event (its metrics and
    what a new connection sees)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(poll)
    return value


def reloads(c, result):
    with urllib.request.urlopen(f"http://{c.metrics}/metrics", timeout=5) as r:
        m = re.search(rf'^zeroshard_tls_reloads_total{{result="{result}"}} (\S+)$',
                      r.read().decode(), re.M)
    return float(m.group(1)) if m else -1


def test_broken_rotation(d):
    """An empty key (a non-atomic copy caught half way) and then a key that
    does not match: both refused, the old pair kept, counted; a valid pair
    after them is applied."""
    shutil.copy(d / "server.pem", d / "live2.pem")
    shutil.copy(d / "server.key", d / "live2.key")
    c = Coordinator(d, "--tls-cert", "live2.pem", "--tls-key", "live2.key", metrics="127.0.0.1:0")
    try:
        check(c.address is not None and c.metrics is not None, "TLS coordinator with metrics starts")
        if c.address is None or c.metrics is None:
            return
        (d / "live2.key").write_text("")  # Truncated in place, as `cp` does first.
        eventually(lambda: reloads(c, "refused") >= 1)
        check(c.proc.poll() is None, "an empty key does not stop the coordinator")
        check(status(c.address, d, *client_flags(cert=None))[0] == 0,
              "with an empty key file the old pair still serves")
        check(reloads(c, "refused") >= 1, f"the refused reload is counted ({reloads(c, 'refused')})")
        shutil.copy(d / "wrongserver.key", d / "live2.key")  # Not the certificate's key.
        eventually(lambda: reloads(c, "refused") >= 2)
        check(c.proc.poll() is None and status(c.address, d, *client_flags(cert=None))[0] == 0,
              "a key that does not match the certificate is refused; the old pair serves")
        check(reloads(c, "refused") >= 2, f"both refusals counted ({reloads(c, 'refused')})")
        shutil.copy(d / "wrongserver.pem", d / "live2.pem")  # Now the pair matches.
        rotated = eventually(
            lambda: status(c.address, d, *client_flags(ca="wrongca", cert=None))[0] == 0)
        check(rotated and reloads(c, "applied") >= 1, "the valid pair after them is applied")
    finally:
        c.stop()


def healthz(c):
    """(HTTP status or the error, body) of the coordinator's /healthz."""
    try:
        with urllib.request.urlopen(f"http://{c.metrics}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return str(e), ""


def test_slowloris(d):
    """16 connections to the metrics port that never finish their request:
    /healthz still answers within 1 s."""
    import socket
    c = Coordinator(d, metrics="127.0.0.1:0")
    slow = []
    try:
        check(c.metrics is not None, "a coordinator with a metrics port starts")
        if c.metrics is None:
            return
        host, port = c.metrics.rsplit(":", 1)
        for _ in range(16):
            s = socket.create_connection((host, int(port)), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # No blank line: unfinished.
            slow.append(s)
        time.sleep(0.5)
        t0 = time.time()
        code, _ = healthz(c)
        took = time.time() - t0
        check(code == 200 and took < 1.0,
              f"/healthz answers within 1 s beside 16 unfinished requests ({code}, {took:.2f} s)")
    finally:
        for s in slow:
            s.close()
        c.stop()


def closed_by_peer(s):
    """Whether the peer closed `s` (whatever it sent before its FIN is read
    and dropped)."""
    s.setblocking(False)
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except BlockingIOError:
        return False
    except OSError:  # Reset.
        return True


def test_idle_connections(d):
    """3,000 TCP connections to the gRPC port that never handshake, with the
    test's and so the coordinator's soft file limit at 1,024: the coordinator
    raises its own to the hard limit, closes them at its handshake deadline,
    and a new mTLS client gets through within 2 s."""
    import resource
    import socket
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 4096:
        print(f"skipped part: the hard file limit is {hard}")
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # The coordinator inherits it.
    c = Coordinator(d, "--tls-cert", "server.pem", "--tls-key", "server.key", "--tls-ca",
                    "ca.pem", "--handshake-timeout", "1")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    idle = []
    try:
        check(c.address is not None, "an mTLS coordinator with a 1 s handshake deadline starts")
        if c.address is None:
            return
        host, port = c.address.rsplit(":", 1)
        for _ in range(3000):
            idle.append(socket.create_connection((host, int(port)), timeout=5))
        t0 = time.time()
        open_ = {s.fileno(): s for s in idle}
        poller = select.poll()  # Woken by each socket the coordinator closes.
        for fd in open_:
            poller.register(fd, select.POLLIN)
        while open_ and time.time() - t0 < 15:
            for fd, _ in poller.poll(max(0.0, 15 - (time.time() - t0)) * 1000 + 1):
                if fd in open_ and closed_by_peer(open_[fd]):
                    poller.unregister(fd)
                    del open_[fd]
        check(not open_, f"the coordinator closed all {len(idle)} connections that never "
                         f"handshook ({len(open_)} open after {time.time() - t0:.1f} s)")
        t0 = time.time()
        rc, out = status(c.address, d, *client_flags())
        took = time.time() - t0
        check(rc == 0 and took < 2.0, f"a new mTLS client gets through after them "
                                      f"(exit {rc}, {took:.2f} s): {out[-300:]}")
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        c.stop()


def test_worker_identity(d):
    """--worker-identity cert: a worker joins only under a name its client
    certificate carries (CN worker-7 here); another worker_id with the same
    certificate is refused, naming the certificate's identities."""
    certs.make_leaf(d, "ca", "worker-7")
    refused = Coordinator(d, "--worker-identity", "cert")
    check(refused.address is None and "--tls-ca" in refused.out,
          f"--worker-identity cert without --tls-ca is refused ({refused.out.strip()[-200:]})")
    refused.stop()
    c = Coordinator(d, "--tls-cert", "server.pem", "--tls-key", "server.key", "--tls-ca",
                    "ca.pem", "--worker-identity", "cert", "--min-workers", "1",
                    "--job-config-json", '{"steps": 2}')
    try:
        check(c.address is not None, f"a coordinator binding workers to certificates starts")
        if c.address is None:
            return

        def worker(worker_id):
            return subprocess.run(
                [str(BIN / "zeroshard-worker"), "--coordinator", c.address, "--worker-id",
                 worker_id, "--threads", "1", *client_flags(cert="worker-7")],
                cwd=d, capture_output=True, text=True, timeout=120)
        r = worker("impostor")
        out = r.stdout + r.stderr
        check(r.returncode != 0 and "not an identity of the client certificate" in out and
              "worker-7" in out, f"worker_id impostor with worker-7's certificate is refused "
                                 f"(exit {r.returncode}: {out[-300:]})")
        r = worker("worker-7")
        check(r.returncode == 0, f"worker-7 with its own certificate joins and trains "
                                 f"(exit {r.returncode}: {(r.stdout + r.stderr)[-300:]})")
    finally:
        c.stop()




def test_healthz_tls(d):
    """/healthz tells the truth about TLS: a served certificate that expired
    (clients refuse every handshake) is 503 naming it; a valid one is 200."""
    for cert, want in (("server", 200), ("expired", 503)):
        c = Coordinator(d, "--tls-cert", f"{cert}.pem", "--tls-key", f"{cert}.key", "--tls-ca",
                        "ca.pem", metrics="127.0.0.1:0")
        try:
            code, body = healthz(c) if c.metrics else (None, c.out)
            check(code == want and (want == 200 or "expired" in body),
                  f"/healthz serving {cert}.pem: {code} {body.strip()}")
        finally:
            c.stop()


def test_mtls_launch(d):
    (d / "tokens").write_text("worker worker-token-0123456789abcdef\n"
                              "reader reader-token-0123456789abcdef\n")
    (d / "tokens").chmod(0o600)
    r = subprocess.run([str(BIN / "zeroshard"), "launch", "--workers", "2", "--model", "tiny",
                        "--steps", "3", "--stage", "3", "--threads", "1", "--run-dir",
                        str(d / "run"), "--tls-ca", "ca.pem", "--tls-cert", "server.pem",
                        "--tls-key", "server.key", "--token-file", "tokens"],
                       cwd=d, capture_output=True, text=True, timeout=150)
    check(r.returncode == 0, f"mTLS + tokens `zeroshard launch` trains (exit {r.returncode}: "
                             f"{(r.stdout + r.stderr)[-600:]})")


def main():
    for tool, path in [("openssl", shutil.which("openssl")),
                       ("zeroshard", (BIN / "zeroshard").exists())]:
        if not path:
            print(f"skipped: {tool} not found")
            return 77
    with tempfile.TemporaryDirectory(prefix="zs_tls_") as tmp:
        d = certs.make_all(tmp)
        for test in (test_mtls_refusals, test_rotation, test_broken_rotation, test_slowloris,
                     test_idle_connections, test_worker_identity, test_healthz_tls, test_safe_defaults,
                     test_mtls_launch):
            print(f"== {test.__name__}", flush=True)
            test(d)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
