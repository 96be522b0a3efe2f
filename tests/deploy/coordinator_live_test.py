#!/usr/bin/env python3
"""Runs the built zeroshard-coordinator with the exact flags of
deploy/k8s/coordinator-deployment.yaml (addresses moved to 127.0.0.1 port 0,
state and checkpoint dirs moved to a fresh temporary "volume", as an empty
PersistentVolumeClaim would be, and the mounted Secrets' files to generated
certificates and tokens, k8s_local.py's "secret" kind) and checks what Kubernetes and Prometheus
will see: it starts, creates its dirs, answers the liveness and readiness
probe paths, and its /metrics declares every metric the dashboard and the
alerts use. Skipped (77) when the coordinator is not built or cannot serve
metrics yet."""
import json
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import pathlib
import urllib.error
import urllib.request

import deploy_common as dc
import k8s_local as kl

START_DEADLINE_S = 15
STOP_DEADLINE_S = 10

c = dc.Checker("coordinator_live_test")
binary = dc.BIN_DIR / "zeroshard-coordinator"
if not binary.is_file():
    dc.skip(f"{binary} not built")
help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                           timeout=30).stdout
if "--metrics-listen" not in help_text:
    dc.skip("this zeroshard-coordinator has no --metrics-listen yet")

objs, _ = dc.load_resources()
dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
(container,) = dc.pod_spec(dep)["containers"]
mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "data")
# ConfigMap mounts: mount path -> the folder of the files the kustomization
# generates them from (deploy/k8s/base).
config_mounts = [m["mountPath"].rstrip("/") for m in container["volumeMounts"]
                 if any(v["name"] == m["name"] and "configMap" in v
                        for v in dc.pod_spec(dep)["volumes"])]


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def read_ports(proc, deadline):
    """Reads stdout until the line naming the bound gRPC and metrics ports."""
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
            m = re.search(r":(\d+) \(grpc\).*:(\d+) \(metrics\)", line)
            if m:
                return int(m.group(1)), int(m.group(2)), seen
        elif proc.poll() is not None:
            break
    return None, None, seen


with tempfile.TemporaryDirectory() as volume, tempfile.TemporaryDirectory() as secrets:
    (pathlib.Path(secrets) / "pki").mkdir()
    secret_mounts = kl.mount_secrets(secrets, kl.secret_contents(pathlib.Path(secrets) / "pki"),
                                     container, dep, "coord")
    argv = [str(binary)]
    for flag, value in dc.flags_of(dc.container_argv(container)[1:]).items():
        if value and kl.on_secret(value, secret_mounts) != value:
            value = kl.on_secret(value, secret_mounts)
        elif flag in ("--listen", "--metrics-listen"):
            value = "127.0.0.1:0"
        elif value and value.startswith(mount.rstrip("/") + "/"):
            value = volume + value[len(mount.rstrip("/")):]  # same path on the fake volume
        elif value and any(value.startswith(m + "/") for m in config_mounts):
            value = str(dc.K8S_BASE / value.rsplit("/", 1)[1])  # the ConfigMap's source file
        argv.append(f"{flag}={value}" if value is not None else flag)
    print("running:", " ".join(argv), flush=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        grpc_port, metrics_port, out = read_ports(proc, time.monotonic() + START_DEADLINE_S)
        c.check(metrics_port is not None,
                f"coordinator started with the manifest's flags and printed its ports "
                f"(exit {proc.poll()}; stdout {out!r}; stderr "
                f"{proc.stderr.read() if proc.poll() is not None else ''!r})")
        if metrics_port is None:
            c.finish()
        flags = dc.flags_of(argv[1:])
        for flag in ("--state-dir", "--checkpoint-dir"):
            if flags.get(flag):
                c.check(pathlib.Path(flags[flag]).is_dir(),
                        f"{flag} {flags[flag]} exists after start (created on an empty volume)")

        status, body = http_get(metrics_port, container["livenessProbe"]["httpGet"]["path"])
        c.check(status == 200, f"liveness probe path answers 200 (got {status} {body!r})")
        status, body = http_get(metrics_port, container["readinessProbe"]["httpGet"]["path"])
        c.check(status in (200, 503), f"readiness probe path answers (got {status} {body!r})")
        status, text = http_get(metrics_port, "/metrics")
        c.check(status == 200, f"/metrics answers 200 (got {status})")

        declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        print(f"/metrics declares {len(declared)} families", flush=True)
        promtool = shutil.which("promtool")
        if promtool:
            lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                                  text=True, timeout=30)
            c.check(lint.returncode == 0, f"promtool check metrics: {lint.stdout}{lint.stderr}")

        dash = json.loads((dc.DEPLOY / "grafana" / "zeroshard-dashboard.json").read_text())
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        yaml = dc.require_module("yaml", "pyyaml")
        alerts = yaml.safe_load((dc.DEPLOY / "prometheus" / "alerts.yml").read_text())
        exprs += [r["expr"] for g in alerts["groups"] for r in g["rules"]]
        for name in sorted(set().union(*(dc.promql_metric_names(e) for e in exprs)) - {"up"}):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            c.check(name in declared or declared.get(base) == "histogram",
                    f"live /metrics declares {name}, which the dashboard or alerts use")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_DEADLINE_S)
            c.check(proc.returncode == 0, f"coordinator exits 0 on SIGTERM (got {proc.returncode})")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_DEADLINE_S)
            c.check(False, f"coordinator did not stop within {STOP_DEADLINE_S}s of SIGTERM")

c.finish()
