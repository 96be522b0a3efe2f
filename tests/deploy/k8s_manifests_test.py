#!/usr/bin/env python3
"""deploy/k8s: the base and every overlay render with `kubectl kustomize`,
every rendered object passes `kubernetes-validate --strict` for current
Kubernetes versions, and the objects fit together the way zeroshard needs
(checks in k8s_checks.py): Pod Security "restricted" on every pod, one
metrics port (9464), a worker Indexed Job (or JobSet) within the
coordinator's min/max workers, its PodDisruptionBudget and probes, no GPU
outside the gpu overlay.

JobSet is a CRD, so kubernetes-validate has no schema for it (it says so
and passes it): its replicated Job templates are validated here as batch/v1
Jobs, and the JobSet's own fields are checked in Python."""
import copy
import json
import re
import subprocess
import shutil
import tempfile
import pathlib

import deploy_common as dc
import k8s_checks

# The oldest Kubernetes the manifests support (podFailurePolicy and
# unhealthyPodEvictionPolicy are GA from 1.31), kubectl's here, and the
# newest schema kubernetes-validate ships.
K8S_VERSIONS = ("1.31.0", "1.32.0", None)

c = dc.Checker("k8s_manifests_test")
yaml = dc.require_module("yaml", "pyyaml")
kv = dc.require_module("kubernetes_validate", "kubernetes-validate")
validator = shutil.which("kubernetes-validate")
if not shutil.which("kubectl"):
    dc.skip("kubectl is not installed: the overlays cannot be rendered")
if not validator:
    dc.skip("the kubernetes-validate command is not installed (pip kubernetes-validate)")
versions = [v or kv.latest_version() for v in K8S_VERSIONS]

# --- Every YAML file parses; every path a kustomization names exists. ---
for path in sorted(dc.K8S_DIR.rglob("*.yaml")):
    rel = path.relative_to(dc.K8S_DIR)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except yaml.YAMLError as e:
        c.check(False, f"{rel}: YAML does not parse: {e}")
        continue
    c.check(docs and all("kind" in d and "apiVersion" in d for d in docs),
            f"{rel}: every document needs kind and apiVersion")
    if path.name == "kustomization.yaml":
        k = docs[0]
        named = list(k.get("resources", [])) + [p["path"] for p in k.get("patches", [])
                                                 if "path" in p]
        named += [f for g in k.get("configMapGenerator", []) for f in g.get("files", [])]
        for n in named:
            c.check((path.parent / n).exists(), f"{rel} names {n}, which does not exist")
base_files = sorted(p.name for p in dc.K8S_BASE.glob("*.yaml") if p.name != "kustomization.yaml")
c.check(sorted(dc.kustomization().get("resources", [])) == base_files,
        f"base resources {dc.kustomization().get('resources')} != its manifests {base_files}")


def validate_files(texts, version):
    """(exit code, {name: output lines}) of one `kubernetes-validate --strict
    -k VERSION` run over the YAML texts {name: text}."""
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, text in texts.items():
            files[name] = pathlib.Path(d) / f"{name}.yaml"
            files[name].write_text(text)
        out = subprocess.run([validator, "--strict", "-k", version, *map(str, files.values())],
                             capture_output=True, text=True, timeout=120)
    lines = (out.stdout + out.stderr).splitlines()
    return out.returncode, {n: "\n".join(ln for ln in lines if str(f) in ln)
                            for n, f in files.items()}


def as_job(name, job_spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": job_spec}


renders = dc.render_dirs()
c.check({"base", "gpu", "jobset"} <= set(renders),
        f"base, gpu and jobset kustomizations exist (got {sorted(renders)})")
rendered, texts, want_passed = {}, {}, {}
for name, path in renders.items():
    objs = dc.render(path)
    rendered[name] = objs
    print(f"{name}: {len(objs)} objects ({', '.join(o['kind'] for o in objs)})", flush=True)
    crds = [o for o in objs if o["kind"] == "JobSet"]
    # What the validator can check: the objects plus each JobSet's Job templates as Jobs.
    extra = [as_job(f"{o['metadata']['name']}-{rj['name']}", rj["template"]["spec"])
             for o in crds for rj in o["spec"].get("replicatedJobs", [])]
    texts[name] = yaml.safe_dump_all(objs + extra)
    want_passed[name] = (len(objs) - len(crds) + len(extra), [o["kind"] for o in crds])
for version in versions:
    rc, outputs = validate_files(texts, version)
    c.check(rc == 0, f"kubernetes-validate --strict -k {version}:\n" + "\n".join(outputs.values()))
    for name, out in outputs.items():
        want, crd_kinds = want_passed[name]
        passed = len(re.findall(r"\bpassed for resource\b", out))
        c.check(passed == want, f"{name} @ {version}: {passed} objects passed, want {want}:\n{out}")
        for kind in crd_kinds:
            c.check(f"Couldn't find schema for kind {kind}" in out,
                    f"{name}: kubernetes-validate names {kind} as not validated by schema")

# The validator rejects broken objects, or the checks above prove nothing.
job = next(o for o in rendered["base"] if o["kind"] == "Job")
for what, edit in (("parallelism: 'four'", lambda j: j["spec"].update(parallelism="four")),
                   ("an unknown field", lambda j: j["spec"]["template"]["spec"]["containers"][0]
                    .update(livenessProbes={}))):
    bad = copy.deepcopy(job)
    edit(bad)
    rc, _ = validate_files({"bad": yaml.safe_dump(bad)}, versions[-1])
    c.check(rc != 0, f"kubernetes-validate --strict accepted {what}")

for name, objs in rendered.items():
    k8s_checks.check_render(c, name, objs)
k8s_checks.check_overlays(c, rendered, json.loads((dc.K8S_BASE / "job.json").read_text()))

# The alert on too few workers uses the coordinator's --min-workers.
dep = dc.find(rendered["base"], "Deployment", "zeroshard-coordinator")
min_workers = int(dc.flags_of(dc.container_argv(dc.pod_spec(dep)["containers"][0]))["--min-workers"])
alerts = yaml.safe_load((dc.DEPLOY / "prometheus" / "alerts.yml").read_text())
rule = next((r for g in alerts["groups"] for r in g["rules"]
             if r.get("alert") == "ZeroshardWorkersBelowMin"), None)
m = re.search(r"zeroshard_workers\s*<\s*(\d+)", rule["expr"] if rule else "")
c.check(m is not None and int(m.group(1)) == min_workers,
        f"ZeroshardWorkersBelowMin threshold equals --min-workers {min_workers}")
# deploy/README.md shows the elastic scale command for the Job.
readme = (dc.DEPLOY / "README.md").read_text()
c.check(re.search(r"kubectl patch job/zeroshard-worker .*parallelism.*completions", readme),
        "deploy/README.md shows `kubectl patch job/zeroshard-worker` of parallelism and completions")
c.finish()
