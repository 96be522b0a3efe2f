#!/usr/bin/env python3
"""deploy/prometheus: promtool accepts the scrape config and the alert rules,
the alerts fire when they should (tests/deploy/alerts_test.yml through
`promtool test rules`), and the Kubernetes scrape job's relabelling, applied
to the coordinator pod from deploy/k8s, keeps exactly its metrics port.

Debian's promtool is built without Kubernetes service discovery, so when it
refuses `kubernetes_sd_configs` the config is checked without that job and
the job itself is checked here by simulating its relabel rules."""
import re
import shutil
import subprocess
import tempfile
import pathlib

import deploy_common as dc

PROM_DIR = dc.DEPLOY / "prometheus"
HERE = pathlib.Path(__file__).resolve().parent

c = dc.Checker("prometheus_test")
yaml = dc.require_module("yaml", "pyyaml")
promtool = shutil.which("promtool")
if not promtool:
    dc.skip("promtool is not installed (Debian package prometheus; scripts/setup-test-tools.sh installs it)")


def run(*args, cwd=None):
    out = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60, cwd=cwd)
    return out.returncode, (out.stdout + out.stderr).strip()


def promtool_has_kubernetes_sd():
    with tempfile.TemporaryDirectory() as d:
        probe = pathlib.Path(d) / "probe.yml"
        probe.write_text("scrape_configs:\n  - job_name: p\n    kubernetes_sd_configs:\n"
                         "      - role: pod\n")
        return run("check", "config", str(probe))[0] == 0


# --- promtool check config: the local config as it is (Debian's Prometheus
# must start with it), the Kubernetes one as far as this promtool allows. ---
local = yaml.safe_load((PROM_DIR / "prometheus-local.yml").read_text())
config = yaml.safe_load((PROM_DIR / "prometheus-k8s.yml").read_text())
c.check(all("kubernetes_sd_configs" not in j for j in local["scrape_configs"]),
        "prometheus-local.yml has no kubernetes_sd job (Debian's Prometheus refuses them)")
local_targets = [t for j in local["scrape_configs"] for s in j.get("static_configs", [])
                 for t in s["targets"]]
c.check(local_targets == ["127.0.0.1:9464"],
        f"the local config scrapes the coordinator's default metrics port (got {local_targets})")
rc, out = run("check", "config", str(PROM_DIR / "prometheus-local.yml"))
c.check(rc == 0, f"promtool check config prometheus-local.yml:\n{out}")
jobs = {j["job_name"]: j for j in config["scrape_configs"]}
k8s_jobs = [j for j in jobs.values() if "kubernetes_sd_configs" in j]
c.check(len(k8s_jobs) == 1 and len(jobs) == 1, "prometheus-k8s.yml has one kubernetes_sd job")
if promtool_has_kubernetes_sd():
    rc, out = run("check", "config", str(PROM_DIR / "prometheus-k8s.yml"))
    c.check(rc == 0, f"promtool check config prometheus-k8s.yml:\n{out}")
else:
    print("note: this promtool has no kubernetes_sd_configs; checking prometheus-k8s.yml without "
          f"{[j['job_name'] for j in k8s_jobs]} and simulating that job's relabelling below")
    with tempfile.TemporaryDirectory() as d:
        trimmed = dict(config, scrape_configs=[])
        (pathlib.Path(d) / "prometheus.yml").write_text(yaml.safe_dump(trimmed))
        for rule_file in config.get("rule_files", []):
            shutil.copy(PROM_DIR / rule_file, pathlib.Path(d) / rule_file)
        rc, out = run("check", "config", str(pathlib.Path(d) / "prometheus.yml"))
        c.check(rc == 0, f"promtool check config (prometheus-k8s.yml without kubernetes_sd):\n{out}")
for name, cfg in (("prometheus-local.yml", local), ("prometheus-k8s.yml", config)):
    c.check(cfg.get("rule_files") == ["alerts.yml"], f"{name} loads alerts.yml")

# --- promtool check rules + rule unit tests. ---
rc, out = run("check", "rules", str(PROM_DIR / "alerts.yml"))
c.check(rc == 0, f"promtool check rules alerts.yml:\n{out}")
rc, out = run("test", "rules", "alerts_test.yml", cwd=HERE)
c.check(rc == 0, f"promtool test rules alerts_test.yml:\n{out}")
alerts = yaml.safe_load((PROM_DIR / "alerts.yml").read_text())
names = {r["alert"] for g in alerts["groups"] for r in g["rules"] if "alert" in r}
tested = set(re.findall(r"alertname:\s*(\S+)", (HERE / "alerts_test.yml").read_text()))
c.check(names <= tested, f"alerts without a promtool unit test: {sorted(names - tested)}")
for want in ("ZeroshardNoStepProgress", "ZeroshardGenerationChurn", "ZeroshardWorkersBelowMin"):
    c.check(want in names, f"alert {want} exists")


# --- Simulated kubernetes_sd relabelling against the manifests' pods. ---
def meta_labels(pod_template, namespace, pod_name, port):
    """The __meta_kubernetes_pod_* labels role: pod gives one container port."""
    def sanitize(key):
        return re.sub(r"[^a-zA-Z0-9_]", "_", key)
    meta = pod_template["metadata"]
    labels = {
        "__address__": f"10.0.0.7:{port['containerPort']}",
        "__metrics_path__": "/metrics",
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": pod_name,
        "__meta_kubernetes_pod_ip": "10.0.0.7",
        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
        "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
    }
    for k, v in meta.get("labels", {}).items():
        labels["__meta_kubernetes_pod_label_" + sanitize(k)] = v
    for k, v in meta.get("annotations", {}).items():
        labels["__meta_kubernetes_pod_annotation_" + sanitize(k)] = v
    return labels


def relabel(labels, rules):
    """Prometheus relabelling (keep, drop, replace) as documented: regexes are
    fully anchored, source values joined with ';'. None means dropped."""
    labels = dict(labels)
    for r in rules:
        action = r.get("action", "replace")
        value = r.get("separator", ";").join(labels.get(s, "") for s in r.get("source_labels", []))
        m = re.fullmatch(r.get("regex", "(.*)"), value)
        if action == "keep" and not m:
            return None
        if action == "drop" and m:
            return None
        if action == "replace" and m:
            repl = re.sub(r"\$\{?(\d+)\}?", lambda g: m.group(int(g.group(1))) or "",
                          r.get("replacement", "$1"))
            if repl:
                labels[r["target_label"]] = repl
            else:
                labels.pop(r["target_label"], None)
    return labels


for job in k8s_jobs:
    for r in job.get("relabel_configs", []):
        c.check(r.get("action", "replace") in ("keep", "drop", "replace"),
                f"relabel action {r.get('action')} is one this test simulates")
objs, _ = dc.load_resources()
targets = []
for o in objs:
    if o["kind"] not in ("Deployment", "Job"):
        continue
    for container in dc.pod_spec(o)["containers"]:
        for port in container.get("ports", []) or [{"containerPort": 0}]:
            labels = meta_labels(o["spec"]["template"], "ml", o["metadata"]["name"] + "-0", port)
            for job in k8s_jobs:
                kept = relabel(labels, job.get("relabel_configs", []))
                if kept is not None:
                    targets.append((o["metadata"]["name"], kept))
c.check(len(targets) == 1, f"kubernetes_sd keeps exactly one target per coordinator pod "
        f"(kept {[(n, t.get('__address__')) for n, t in targets]})")
if targets:
    name, t = targets[0]
    c.check(name == "zeroshard-coordinator", f"the kept target is the coordinator (got {name})")
    c.check(t["__address__"] == "10.0.0.7:9464", f"scrapes the metrics port (got {t['__address__']})")
    c.check(t["__metrics_path__"] == "/metrics", f"scrapes /metrics (got {t['__metrics_path__']})")
    c.check(t.get("namespace") == "ml" and t.get("pod", "").startswith("zeroshard-coordinator"),
            "target carries namespace and pod labels")

c.finish()
