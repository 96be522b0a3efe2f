"""Structural checks of one rendered deploy/k8s kustomization (used by
k8s_manifests_test.py): Pod Security "restricted", the coordinator and its
metrics port, the worker Job/JobSet, PodDisruptionBudget, probes, GPU
settings. Each check_* takes a deploy_common.Checker."""
import json
import re

import deploy_common as dc

METRICS_PORT = 9464
# Volume types Pod Security "restricted" allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
JOBSET_SPEC_KEYS = {"replicatedJobs", "network", "successPolicy", "failurePolicy",
                    "startupPolicy", "suspend", "coordinator", "managedBy",
                    "ttlSecondsAfterFinished"}


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_restricted(c, where, tmpl):
    """Pod Security Standard "restricted" (and the project's own rules:
    no API token, read-only root, every writable path a volume)."""
    spec = tmpl["spec"]
    psc = spec.get("securityContext", {})
    c.check(spec.get("automountServiceAccountToken") is False,
            f"{where}: automountServiceAccountToken: false")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        c.check(not spec.get(key), f"{where}: no {key}")
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        c.check(kinds <= RESTRICTED_VOLUMES, f"{where}: volume {v['name']} type {kinds} "
                "is not allowed by the restricted profile")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for ctr in spec.get("containers", []) + spec.get("initContainers", []):
        csc = ctr.get("securityContext", {})
        cw = f"{where} container {ctr['name']}"
        c.check(csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{cw}: runAsNonRoot")
        c.check(csc.get("runAsUser", psc.get("runAsUser", 1)) != 0, f"{cw}: runAsUser is not 0")
        seccomp = csc.get("seccompProfile", psc.get("seccompProfile", {}))
        c.check(seccomp.get("type") == "RuntimeDefault", f"{cw}: seccompProfile RuntimeDefault")
        c.check(csc.get("allowPrivilegeEscalation") is False,
                f"{cw}: allowPrivilegeEscalation: false")
        c.check(not csc.get("privileged"), f"{cw}: not privileged")
        caps = csc.get("capabilities", {})
        c.check(caps.get("drop") == ["ALL"] and not caps.get("add"),
                f"{cw}: capabilities drop [ALL], add none (got {caps})")
        c.check(csc.get("readOnlyRootFilesystem") is True, f"{cw}: readOnlyRootFilesystem")
        for m in ctr.get("volumeMounts", []):
            vol = volumes.get(m["name"], {})
            writable = not m.get("readOnly") and ("configMap" not in vol)
            if writable:
                c.check("emptyDir" in vol or "persistentVolumeClaim" in vol,
                        f"{cw}: writable mount {m['mountPath']} is an emptyDir or a claim")
        names = {e["name"] for e in ctr.get("env", [])}
        for ref in re.findall(r"\$\((\w+)\)", " ".join(map(str, dc.container_argv(ctr)))):
            c.check(ref in names, f"{cw}: $({ref}) in args is defined in env")


def check_coordinator(c, name, objs):
    dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
    svc = dc.find(objs, "Service", "zeroshard-coordinator")
    c.check(dep is not None and svc is not None, f"{name}: coordinator Deployment and Service")
    if dep is None or svc is None:
        return None
    spec = dep["spec"]
    c.check(spec.get("replicas") == 1 and spec.get("strategy", {}).get("type") == "Recreate",
            f"{name}: coordinator runs 1 replica with Recreate (never two on one volume)")
    labels = spec["template"]["metadata"]["labels"]
    c.check(selects(spec["selector"]["matchLabels"], labels), f"{name}: coordinator selector")
    (coord,) = dc.pod_spec(dep)["containers"]
    flags = dc.flags_of(dc.container_argv(coord))
    ports = {p["name"]: p["containerPort"] for p in coord.get("ports", [])}
    c.check(ports.get("grpc") == 50051 and ports.get("metrics") == METRICS_PORT,
            f"{name}: coordinator ports grpc 50051, metrics {METRICS_PORT} (got {ports})")
    c.check(flags.get("--metrics-listen") == f"0.0.0.0:{METRICS_PORT}",
            f"{name}: --metrics-listen 0.0.0.0:{METRICS_PORT}")
    c.check(flags.get("--listen") == "0.0.0.0:50051", f"{name}: --listen 0.0.0.0:50051")
    notes = spec["template"]["metadata"].get("annotations", {})
    c.check(notes.get("prometheus.io/scrape") == "true"
            and notes.get("prometheus.io/port") == str(METRICS_PORT),
            f"{name}: coordinator pod annotated prometheus.io/scrape \"true\", port "
            f"\"{METRICS_PORT}\" (got {notes})")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = coord.get(probe, {}).get("httpGet", {})
        c.check(get.get("path") == path and ports.get(get.get("port"), get.get("port"))
                == METRICS_PORT, f"{name}: coordinator {probe} GET {path} on the metrics port")
    volumes = {v["name"]: v for v in dc.pod_spec(dep).get("volumes", [])}
    claims = [m["mountPath"].rstrip("/") + "/" for m in coord.get("volumeMounts", [])
              if "persistentVolumeClaim" in volumes.get(m["name"], {})]
    for flag in ("--state-dir", "--checkpoint-dir"):
        c.check(any((flags.get(flag) or "").startswith(m) for m in claims),
                f"{name}: {flag} {flags.get(flag)} is on the PersistentVolumeClaim")
    sports = {p["name"]: p for p in svc["spec"]["ports"]}
    c.check(selects(svc["spec"]["selector"], labels), f"{name}: Service selects the coordinator")
    for port_name, number in (("grpc", 50051), ("metrics", METRICS_PORT)):
        p = sports.get(port_name, {})
        c.check(p.get("port") == number and ports.get(p.get("targetPort")) == number,
                f"{name}: Service port {port_name} {number} -> container {number} (got {p})")
    c.check(int(flags.get("--min-workers") or 0) >= 1
            and int(flags["--min-workers"]) <= int(flags.get("--max-workers") or 0),
            f"{name}: 1 <= --min-workers <= --max-workers")
    return dep, svc, coord, flags


def check_worker_job_spec(c, where, job_spec, min_workers, max_workers):
    c.check(job_spec.get("completionMode") == "Indexed", f"{where}: completionMode Indexed")
    n = job_spec.get("parallelism")
    c.check(n == job_spec.get("completions") and min_workers <= (n or 0) <= max_workers,
            f"{where}: parallelism == completions within [--min-workers {min_workers}, "
            f"--max-workers {max_workers}] (got {n}, {job_spec.get('completions')})")
    c.check(int(job_spec.get("backoffLimit", 6)) >= 1, f"{where}: backoffLimit >= 1")
    rules = job_spec.get("podFailurePolicy", {}).get("rules", [])
    c.check(any(r["action"] == "Ignore" and any(p.get("type") == "DisruptionTarget"
                                                 for p in r.get("onPodConditions", []))
                for r in rules),
            f"{where}: podFailurePolicy ignores evictions (DisruptionTarget)")
    for r in rules:
        codes = r.get("onExitCodes", {})
        c.check(r["action"] == "Ignore" or codes.get("operator") != "NotIn",
                f"{where}: no NotIn rule that would fail or count exit 0 as a crash")
    tmpl = job_spec["template"]
    (ctr,) = tmpl["spec"]["containers"]
    leave = int(dc.flags_of(dc.container_argv(ctr)[1:]).get("--leave-exit-code", 0))
    c.check(leave not in (0, 1, 2), f"{where}: a graceful leave exits with its own code, not 0 "
            f"(which would complete the index for good) nor 1/2 (got {leave})")
    c.check(any(r["action"] == "Ignore" and r.get("onExitCodes", {}).get("operator") == "In"
                and leave in r["onExitCodes"].get("values", []) for r in rules),
            f"{where}: podFailurePolicy ignores the leave's exit {leave}, so the index gets a "
            "new pod without counting a failure")
    c.check(tmpl["spec"].get("restartPolicy") == "Never",
            f"{where}: restartPolicy Never (podFailurePolicy needs it)")


def check_worker_pod(c, where, tmpl, svc, coord_labels):
    spec = tmpl["spec"]
    labels = tmpl["metadata"]["labels"]
    c.check(not selects({k: coord_labels[k] for k in coord_labels}, labels),
            f"{where}: worker labels differ from the coordinator's")
    (worker,) = spec["containers"]
    argv = dc.container_argv(worker)
    flags = dc.flags_of(argv)
    c.check(argv[0] == "zeroshard-worker", f"{where}: runs zeroshard-worker")
    target = flags.get("--coordinator") or ""
    grpc = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc")
    c.check(target == f"{svc['metadata']['name']}:{grpc}",
            f"{where}: --coordinator {target} is the coordinator Service's gRPC port")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in worker.get("env", [])}
    c.check(env.get("POD_NAME") == "metadata.name", f"{where}: POD_NAME from metadata.name")
    c.check(flags.get("--host") == "$(POD_IP)" and env.get("POD_IP") == "status.podIP",
            f"{where}: --host is the pod IP (status.podIP)")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    c.check(60 <= grace <= 600, f"{where}: terminationGracePeriodSeconds {grace} covers a "
            "step plus the SIGTERM handoff")
    health = flags.get("--health-listen") or ":"
    ports = {p["name"]: p["containerPort"] for p in worker.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = worker.get(probe, {}).get("httpGet", {})
        port = ports.get(get.get("port"), get.get("port"))
        c.check(get.get("path") == path and str(port) == health.rsplit(":", 1)[1],
                f"{where}: worker {probe} GET {path} on the --health-listen port ({get})")
    spread = spec.get("topologySpreadConstraints", [])
    c.check(any(t["topologyKey"] == "kubernetes.io/hostname"
                and selects(t.get("labelSelector", {}).get("matchLabels"), labels)
                for t in spread), f"{where}: topologySpreadConstraints over nodes")
    cpu = str(worker.get("resources", {}).get("requests", {}).get("cpu", "0"))
    cores = float(cpu.rstrip("m")) / (1000 if cpu.endswith("m") else 1)
    c.check(0 < int(flags.get("--threads") or 0) <= cores,
            f"{where}: --threads {flags.get('--threads')} fits the cpu request {cpu}")
    return worker, flags


def check_jobset(c, where, js):
    """JobSet (CRD, no schema in kubernetes-validate): its own fields."""
    c.check(js["apiVersion"] == "jobset.x-k8s.io/v1alpha2", f"{where}: jobset.x-k8s.io/v1alpha2")
    spec = js["spec"]
    c.check(set(spec) <= JOBSET_SPEC_KEYS, f"{where}: unknown JobSet fields "
            f"{sorted(set(spec) - JOBSET_SPEC_KEYS)}")
    names = []
    for rj in spec.get("replicatedJobs", []):
        c.check(set(rj) <= {"name", "replicas", "template", "dependsOn"},
                f"{where}: unknown replicatedJob fields {sorted(set(rj))}")
        c.check(isinstance(rj.get("replicas", 1), int) and rj.get("replicas", 1) == 1,
                f"{where}: replicatedJob {rj.get('name')} has 1 replica (one worker Job)")
        c.check(set(rj["template"]) <= {"metadata", "spec"}, f"{where}: template has a spec")
        names.append(rj["name"])
    c.check(len(names) == 1, f"{where}: one replicatedJob (got {names})")
    sp = spec.get("successPolicy", {})
    c.check(sp.get("operator") == "All" and set(sp.get("targetReplicatedJobs", [])) == set(names),
            f"{where}: successPolicy All over the worker Job (got {sp})")
    fp = spec.get("failurePolicy", {})
    c.check(isinstance(fp.get("maxRestarts"), int) and fp["maxRestarts"] >= 0,
            f"{where}: failurePolicy.maxRestarts is a count (got {fp})")


def check_render(c, name, objs):
    """Everything one rendered kustomization must satisfy on its own."""
    yaml = dc.require_module("yaml", "pyyaml")
    c.check(not any(o["kind"] == "StatefulSet" for o in objs), f"{name}: no StatefulSet")
    for o in objs:
        for i, tmpl in enumerate(dc.pod_templates(o)):
            check_restricted(c, f"{name}: {o['kind']}/{o['metadata']['name']}[{i}]", tmpl)
    got = check_coordinator(c, name, objs)
    if got is None:
        return
    dep, svc, coord, flags = got
    lo, hi = int(flags["--min-workers"]), int(flags["--max-workers"])
    workloads = [o for o in objs if o["kind"] in ("Job", "JobSet")]
    c.check(len(workloads) == 1 and workloads[0]["metadata"]["name"] == "zeroshard-worker",
            f"{name}: one worker Job or JobSet zeroshard-worker "
            f"(got {[(o['kind'], o['metadata']['name']) for o in workloads]})")
    coord_labels = dep["spec"]["template"]["metadata"]["labels"]
    for w in workloads:
        specs = ([w["spec"]] if w["kind"] == "Job" else
                 [rj["template"]["spec"] for rj in w["spec"].get("replicatedJobs", [])])
        if w["kind"] == "JobSet":
            check_jobset(c, f"{name}: JobSet", w)
        for s in specs:
            check_worker_job_spec(c, f"{name}: {w['kind']}", s, lo, hi)
            check_worker_pod(c, f"{name}: {w['kind']} pod", s["template"], svc, coord_labels)
    tmpl = dc.worker_pod_template(objs)
    pdbs = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    c.check(len(pdbs) == 1, f"{name}: one PodDisruptionBudget")
    for pdb in pdbs:
        sel = pdb["spec"]["selector"]["matchLabels"]
        c.check(tmpl is not None and selects(sel, tmpl["metadata"]["labels"]),
                f"{name}: the PodDisruptionBudget selects the worker pods")
        c.check(not selects(sel, coord_labels), f"{name}: the PDB does not select the coordinator")
        c.check(pdb["spec"].get("minAvailable") == lo,
                f"{name}: PDB minAvailable {pdb['spec'].get('minAvailable')} == --min-workers {lo}")
    job = job_config(c, name, objs, coord)
    if job is not None and job.get("checkpoint_every"):
        c.check(job.get("checkpoint_dir") == flags.get("--checkpoint-dir"),
                f"{name}: job.json checkpoint_dir is the coordinator's --checkpoint-dir")
    if "gpu" not in name:
        c.check("nvidia.com/gpu" not in yaml.safe_dump_all(objs),
                f"{name}: no nvidia.com/gpu anywhere in a CPU render")
        c.check(job is None or (job.get("device") == "cpu" and job.get("backend") == "gloo"),
                f"{name}: CPU job config: device cpu, backend gloo")


def job_config(c, name, objs, coord):
    """The job config JSON the coordinator reads (--job-config on a ConfigMap)."""
    flags = dc.flags_of(dc.container_argv(coord))
    path = flags.get("--job-config") or ""
    dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
    volumes = {v["name"]: v for v in dc.pod_spec(dep).get("volumes", [])}
    mount = next((m for m in coord.get("volumeMounts", [])
                  if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
    cm_name = volumes.get(mount["name"], {}).get("configMap", {}).get("name") if mount else None
    cm = dc.find(objs, "ConfigMap", cm_name) if cm_name else None
    key = path.rsplit("/", 1)[-1]
    if not c.check(cm is not None and key in cm.get("data", {}),
                   f"{name}: --job-config {path} is a key of a ConfigMap in the render"):
        return None
    job = json.loads(cm["data"][key])
    # The keys ParseFields knows: its branches (`key == "x"`) and its table
    # of plain fields (`{"x", &JobConfig::x}`).
    source = (dc.SOURCE_DIR / "common/model/job_config.cc").read_text()
    known = set(re.findall(r'key == "(\w+)"', source)) | set(
        re.findall(r'\{"(\w+)", &JobConfig::', source))
    c.check(known and set(job) <= known,
            f"{name}: job.json keys {sorted(set(job) - known)} are not JobConfig keys")
    return job


def check_finetune(c, rendered, base_job):
    """finetune: the model volume is the coordinator's alone, read-only, and
    the job config is the base's with a model directory on it."""
    ft = rendered["finetune"]
    dep = dc.find(ft, "Deployment", "zeroshard-coordinator")
    (coord,) = [k for k in dc.pod_spec(dep)["containers"] if k["name"] == "coordinator"]
    mounts = [m for m in coord.get("volumeMounts", []) if m["mountPath"] == "/models"]
    c.check(len(mounts) == 1 and mounts[0].get("readOnly") is True,
            "finetune: the coordinator mounts /models read-only")
    worker = dc.worker_pod_template(ft)
    c.check(not any(v.get("persistentVolumeClaim", {}).get("claimName") == "zeroshard-models"
                    for v in worker["spec"].get("volumes", [])),
            "finetune: no worker pod mounts the model volume")
    job = job_config(c, "finetune", ft, coord)
    c.check(job is not None and str(job.get("model", "")).startswith("/models/"),
            "finetune: the job's model is a directory on the model volume")
    rest = {k: v for k, v in (job or {}).items() if k not in ("model", "seq_len", "lr")}
    base = {k: v for k, v in base_job.items() if k not in ("model", "seq_len", "lr")}
    c.check(rest == base, "finetune: the job config is the base's but for model, seq_len, lr")


def check_overlays(c, rendered, base_job):
    """How the overlays differ from the base: gpu adds the GPU, jobset swaps
    the Job for a JobSet with the same Job spec."""
    base = rendered["base"]
    base_job_obj = next(o for o in base if o["kind"] == "Job")
    gpu = rendered["gpu"]
    tmpl = dc.worker_pod_template(gpu)
    (worker,) = tmpl["spec"]["containers"]
    res = worker.get("resources", {})
    for part in ("requests", "limits"):
        c.check(str(res.get(part, {}).get("nvidia.com/gpu")) == "1",
                f"gpu: worker {part} nvidia.com/gpu: 1")
    volumes = {v["name"]: v for v in tmpl["spec"].get("volumes", [])}
    shm = [m for m in worker.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]
    c.check(shm and volumes.get(shm[0]["name"], {}).get("emptyDir", {}).get("medium") == "Memory",
            "gpu: /dev/shm is a memory-backed emptyDir")
    c.check(any(e["name"] == "NCCL_SOCKET_IFNAME" for e in worker.get("env", [])),
            "gpu: NCCL_SOCKET_IFNAME is set")
    dep = dc.find(gpu, "Deployment", "zeroshard-coordinator")
    job = job_config(c, "gpu", gpu, dc.pod_spec(dep)["containers"][0])
    want = dict(base_job, device="cuda", backend="nccl")
    c.check(job == want, f"gpu: job config is the base's with device cuda, backend nccl "
            f"(differs in {sorted(k for k in set(job or {}) | set(want) if (job or {}).get(k) != want.get(k))})")
    check_finetune(c, rendered, base_job)
    js = next((o for o in rendered["jobset"] if o["kind"] == "JobSet"), None)
    c.check(js is not None and js["spec"]["replicatedJobs"][0]["template"]["spec"]
            == base_job_obj["spec"], "jobset: the JobSet's Job spec is the base Job's")
    strip = [o for o in base if o["kind"] != "Job"]
    c.check(strip == [o for o in rendered["jobset"] if o["kind"] != "JobSet"],
            "jobset: every other object is the base's")
