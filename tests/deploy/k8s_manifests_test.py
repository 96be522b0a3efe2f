#!/usr/bin/env python3
"""deploy/k8s: every file parses, every object is valid Kubernetes (schema
check, offline, with kubernetes-validate), and the objects fit together the
way zeroshard needs: one coordinator with Recreate, probes on the metrics
port, state and checkpoint dirs on the persistent volume, a Service that
selects it, workers that dial that Service's gRPC port with a GPU each."""
import copy
import json
import re

import deploy_common as dc

# Oldest and newest Kubernetes versions the manifests are checked against.
K8S_VERSIONS = ("1.27.0", None)  # None: the newest schema kubernetes-validate ships

c = dc.Checker("k8s_manifests_test")
yaml = dc.require_module("yaml", "pyyaml")
kv = dc.require_module("kubernetes_validate", "kubernetes-validate")

# --- Every YAML file parses; the kustomization lists exactly the manifests. ---
kust = dc.kustomization()
files = sorted(p.name for p in dc.K8S_DIR.glob("*.yaml") if p.name != "kustomization.yaml")
for name in files:
    try:
        docs = [d for d in yaml.safe_load_all((dc.K8S_DIR / name).read_text()) if d]
        c.check(docs and all("kind" in d and "apiVersion" in d for d in docs),
                f"{name}: every document needs kind and apiVersion")
    except yaml.YAMLError as e:
        c.check(False, f"{name}: YAML does not parse: {e}")
c.check(sorted(kust.get("resources", [])) == files,
        f"kustomization resources {sorted(kust.get('resources', []))} != manifests {files}")

objs, how = dc.load_resources()
print(f"loaded {len(objs)} objects via {how}")

# --- Schema validation (strict: unknown fields are errors). ---
latest = kv.latest_version()
versions = [v or latest for v in K8S_VERSIONS]


def validate(obj, version):
    try:
        kv.validate(obj, version, strict=True)
        return None
    except kv.ValidationError as e:
        return str(e).splitlines()[0]


for version in versions:
    for o in objs:
        err = validate(o, version)
        c.check(err is None,
                f"{o['kind']}/{o['metadata']['name']} invalid for Kubernetes {version}: {err}")

# The validator must reject broken objects, or the checks above prove nothing.
bad = copy.deepcopy(dc.find(objs, "StatefulSet", "zeroshard-worker"))
bad["spec"]["replicas"] = "four"
c.check(validate(bad, latest) is not None, "validator accepted replicas: 'four'")
bad = copy.deepcopy(dc.find(objs, "Deployment", "zeroshard-coordinator"))
dc.pod_spec(bad)["containers"][0]["livenessProbes"] = {}
c.check(validate(bad, latest) is not None, "strict validator accepted an unknown field")

# --- Coordinator Deployment. ---
dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
svc = dc.find(objs, "Service", "zeroshard-coordinator")
c.check(dep is not None and svc is not None, "Deployment and Service zeroshard-coordinator exist")
spec = dep["spec"]
c.check(spec.get("replicas") == 1, "coordinator Deployment runs exactly 1 replica")
c.check(spec.get("strategy", {}).get("type") == "Recreate",
        "coordinator Deployment uses the Recreate strategy (never two on one state volume)")
tmpl_labels = spec["template"]["metadata"]["labels"]
c.check(all(tmpl_labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
        "coordinator selector matches its pod template labels")
(coord,) = dc.pod_spec(dep)["containers"]
argv = dc.container_argv(coord)
flags = dc.flags_of(argv)
c.check(argv[0] == "zeroshard-coordinator", f"coordinator runs zeroshard-coordinator, not {argv[0]}")
ports = {p["name"]: p["containerPort"] for p in coord.get("ports", [])}
c.check(ports.get("grpc") == 50051 and ports.get("metrics") == 9100,
        f"coordinator container ports grpc=50051 metrics=9100 (got {ports})")
c.check(flags.get("--listen") == "0.0.0.0:50051", f"--listen 0.0.0.0:50051 (got {flags.get('--listen')})")
c.check(flags.get("--metrics-listen") == "0.0.0.0:9100",
        f"--metrics-listen 0.0.0.0:9100 (got {flags.get('--metrics-listen')})")
for flag in ("--min-workers", "--max-workers", "--lease-timeout", "--heartbeat-interval"):
    c.check(flags.get(flag), f"coordinator sets {flag}")
min_workers = int(flags.get("--min-workers") or 0)
c.check(0 < min_workers <= int(flags.get("--max-workers") or 0), "0 < --min-workers <= --max-workers")

for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = coord.get(probe, {}).get("httpGet", {})
    port = ports.get(get.get("port"), get.get("port"))
    c.check(get.get("path") == path and port == 9100,
            f"{probe} is GET {path} on the metrics port (got {get})")

annotations = spec["template"]["metadata"].get("annotations", {})
c.check(annotations.get("prometheus.io/scrape") == "true", "pod annotated prometheus.io/scrape")
c.check(annotations.get("prometheus.io/port") == str(ports.get("metrics")),
        "prometheus.io/port names the metrics port")
c.check(annotations.get("prometheus.io/path") == "/metrics", "prometheus.io/path is /metrics")

# State and checkpoint dirs live on the PersistentVolumeClaim.
volumes = {v["name"]: v for v in dc.pod_spec(dep).get("volumes", [])}
pvc_mounts = []
for m in coord.get("volumeMounts", []):
    claim = volumes.get(m["name"], {}).get("persistentVolumeClaim", {}).get("claimName")
    if claim:
        c.check(dc.find(objs, "PersistentVolumeClaim", claim) is not None,
                f"volume {m['name']} claims {claim}, which deploy/k8s defines")
        pvc_mounts.append(m["mountPath"].rstrip("/") + "/")
for flag, want in (("--state-dir", "/var/lib/zeroshard/state"),
                   ("--checkpoint-dir", "/var/lib/zeroshard/checkpoints")):
    value = flags.get(flag) or ""
    c.check(value == want, f"{flag} {want} (got {value})")
    c.check(any(value.startswith(m) for m in pvc_mounts),
            f"{flag} {value} is on a PersistentVolumeClaim mount {pvc_mounts}")
pvc = dc.find(objs, "PersistentVolumeClaim", "zeroshard-coordinator-data")
c.check(pvc is not None and "ReadWriteOnce" in pvc["spec"]["accessModes"], "PVC is ReadWriteOnce")

# --- Coordinator Service. ---
c.check(all(tmpl_labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
        "coordinator Service selects the coordinator pods")
svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
for name, number in (("grpc", 50051), ("metrics", 9100)):
    p = svc_ports.get(name, {})
    target = ports.get(p.get("targetPort"), p.get("targetPort"))
    c.check(p.get("port") == number and target == number,
            f"Service port {name} {number} -> container {number} (got {p})")

# --- Workers. ---
sts = dc.find(objs, "StatefulSet", "zeroshard-worker")
c.check(sts is not None, "StatefulSet zeroshard-worker exists")
wspec = sts["spec"]
wlabels = wspec["template"]["metadata"]["labels"]
c.check(all(wlabels.get(k) == v for k, v in wspec["selector"]["matchLabels"].items()),
        "worker selector matches its pod template labels")
c.check(not all(tmpl_labels.get(k) == v for k, v in wspec["selector"]["matchLabels"].items()),
        "worker selector does not also select the coordinator")
headless = dc.find(objs, "Service", wspec.get("serviceName"))
c.check(headless is not None and headless["spec"].get("clusterIP") == "None",
        f"serviceName {wspec.get('serviceName')} is a headless Service in deploy/k8s")
c.check(wspec.get("replicas", 1) >= min_workers,
        f"worker replicas {wspec.get('replicas')} >= --min-workers {min_workers}")
(worker,) = dc.pod_spec(sts)["containers"]
wargv = dc.container_argv(worker)
wflags = dc.flags_of(wargv)
c.check(wargv[0] == "zeroshard-worker", f"worker runs zeroshard-worker, not {wargv[0]}")
target = wflags.get("--coordinator") or ""
host, _, port = target.rpartition(":")
c.check(host == svc["metadata"]["name"] and port == str(svc_ports["grpc"]["port"]),
        f"--coordinator {target} is the coordinator Service's gRPC port")
res = worker.get("resources", {})
for part in ("requests", "limits"):
    c.check(str(res.get(part, {}).get("nvidia.com/gpu")) == "1", f"worker {part} nvidia.com/gpu: 1")
    for key in ("cpu", "memory") if part == "requests" else ("memory",):
        c.check(key in res.get(part, {}), f"worker {part} sets {key}")
env = {e["name"]: e for e in worker.get("env", [])}
pod_ip_vars = [n for n, e in env.items()
               if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP"]
c.check(pod_ip_vars, "worker env carries the pod IP (fieldRef status.podIP)")
c.check(wflags.get("--host") in [f"$({n})" for n in pod_ip_vars],
        f"worker --host is the pod IP env (got {wflags.get('--host')})")
# Kubernetes leaves $(VAR) as literal text when VAR is not in the env.
for o in objs:
    if "template" not in o.get("spec", {}):
        continue
    for ctr in dc.pod_spec(o)["containers"]:
        names = {e["name"] for e in ctr.get("env", [])}
        for ref in re.findall(r"\$\((\w+)\)", " ".join(map(str, dc.container_argv(ctr)))):
            c.check(ref in names, f"{o['metadata']['name']}: $({ref}) in args is defined in env")

# --- The job config: a ConfigMap the coordinator reads with --job-config. ---
job_path = flags.get("--job-config") or ""
job_mount = next((m for m in coord.get("volumeMounts", [])
                  if job_path.startswith(m["mountPath"].rstrip("/") + "/")), None)
c.check(job_mount is not None, f"--job-config {job_path} is on a mounted volume")
if job_mount:
    cm_name = volumes.get(job_mount["name"], {}).get("configMap", {}).get("name")
    cm = dc.find(objs, "ConfigMap", cm_name)
    key = job_path[len(job_mount["mountPath"].rstrip("/")) + 1:]
    c.check(cm is not None and key in cm.get("data", {}),
            f"ConfigMap {cm_name} (from deploy/k8s) holds {key}")
    if cm is not None and key in cm.get("data", {}):
        job = json.loads(cm["data"][key])
        # The keys the worker's JobConfig::FromJson accepts (unknown keys are an error there).
        known = set(re.findall(r'key == "(\w+)"',
                               (dc.SOURCE_DIR / "common/job_config.cc").read_text()))
        c.check(known, "JobConfig keys found in common/job_config.cc")
        c.check(set(job) <= known, f"job.json keys {sorted(set(job) - known)} are not JobConfig keys")
        c.check(job.get("backend", "gloo") in ("gloo", "nccl"), "job.json backend is gloo or nccl")
        if job.get("checkpoint_every"):
            c.check(job.get("checkpoint_dir") == flags.get("--checkpoint-dir"),
                    "job.json checkpoint_dir is the coordinator's --checkpoint-dir")
threads = wflags.get("--threads")
cpu = str(res.get("requests", {}).get("cpu", "0"))
c.check(threads is not None and int(threads) <= float(cpu.rstrip("m")) / (1000 if cpu.endswith("m") else 1),
        f"worker --threads {threads} fits its cpu request {cpu}")

# --- The alert threshold follows --min-workers. ---
alerts = yaml.safe_load((dc.DEPLOY / "prometheus" / "alerts.yml").read_text())
rule = next((r for g in alerts["groups"] for r in g["rules"]
             if r.get("alert") == "ZeroshardWorkersBelowMin"), None)
m = re.search(r"zeroshard_workers\s*<\s*(\d+)", rule["expr"] if rule else "")
c.check(m is not None and int(m.group(1)) == min_workers,
        f"ZeroshardWorkersBelowMin threshold equals --min-workers {min_workers}")

c.finish()
