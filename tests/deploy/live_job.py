"""A coordinator, workers and a Prometheus server on loopback, for the live
deploy tests: start them, scale the workers, read `zeroshard status --json`,
and query Prometheus's HTTP API. Every process is started here and stopped
by PID (SIGTERM, then SIGKILL after a bounded wait)."""
import datetime
import json
import re
import select
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import deploy_common as dc


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    return proc.returncode


def wait_for(what, predicate, timeout, poll=0.25):
    """Polls predicate() until it returns something truthy; raises
    TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"{what} within {timeout} s")


class Coordinator:
    """zeroshard-coordinator on 127.0.0.1 with gRPC and metrics ports it
    picks itself (port 0), both read back from its start line: a port chosen
    here and handed over could be taken meanwhile by another test's server."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [str(dc.BIN_DIR / "zeroshard-coordinator"), "--listen=127.0.0.1:0",
             "--metrics-listen=127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.grpc_port, self.metrics_port = self._read_ports()

    def _read_ports(self):
        seen, deadline = "", time.monotonic() + 15
        while time.monotonic() < deadline and self.proc.poll() is None:
            if select.select([self.proc.stdout], [], [], 0.2)[0]:
                line = self.proc.stdout.readline()
                self.log.write(line)
                seen += line
                m = re.search(r":(\d+) \(grpc\), [0-9.]+:(\d+) \(metrics\)", seen)
                if m:
                    return int(m.group(1)), int(m.group(2))
        raise RuntimeError(f"coordinator did not start: {seen!r}")

    @property
    def address(self):
        return f"127.0.0.1:{self.grpc_port}"

    def status(self):
        out = subprocess.run([str(dc.BIN_DIR / "zeroshard"), "status", "--json",
                              f"--coordinator={self.address}"],
                             capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else {}

    def stop(self):
        rc = stop(self.proc)
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        self.log.write(rest)
        self.log.close()
        return rc


def start_worker(coordinator, name, log_dir, extra=()):
    log = open(f"{log_dir}/{name}.log", "w")
    return subprocess.Popen([str(dc.BIN_DIR / "zeroshard-worker"),
                             f"--coordinator={coordinator.address}", f"--worker-id={name}",
                             *extra], stdout=log, stderr=subprocess.STDOUT)


def field(status, snake):
    """A status field by its proto name, whichever JSON spelling is used."""
    camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), snake)
    return status.get(snake, status.get(camel))


class Prometheus:
    """Debian's Prometheus on loopback with a given config file."""

    def __init__(self, config_path, data_dir, log_path):
        self.port = dc.free_port()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config_path}", f"--storage.tsdb.path={data_dir}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422: a bad query, with its error
            body = e.read()
            try:
                return json.loads(body or b"{}")
            except json.JSONDecodeError:  # 503 and plain text while Prometheus starts
                return {"status": "error", "error": f"HTTP {e.code}: {body[:200]!r}"}
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError) as e:
            return {"status": "error", "error": str(e)}

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("query", **params)

    def evaluated_since(self, t):
        """Whether every target was scraped and every rule group evaluated
        at or after `t` (seconds since the epoch), by the API's own
        lastScrape and lastEvaluation stamps."""
        targets = self.api("targets").get("data", {}).get("activeTargets", [])
        groups = self.api("rules").get("data", {}).get("groups", [])
        stamps = [x.get("lastScrape") for x in targets] + [g.get("lastEvaluation") for g in groups]
        return bool(targets and groups) and all(
            s and datetime.datetime.fromisoformat(s).timestamp() >= t for s in stamps)

    def up(self):
        r = self.query("up")
        return r.get("status") == "success" and any(
            s["value"][1] == "1" for s in r["data"]["result"])

    def stop(self):
        rc = stop(self.proc)
        self.log.close()
        return rc
