#!/usr/bin/env python3
"""The rendered deploy/k8s base run as local processes, as Kubernetes would
run it: the coordinator container's command line and the worker Job's pods'
command lines, each with its args and env, from $ZEROSHARD_BIN_DIR.

Only what a cluster provides is substituted (k8s_local.py, and asserted
below flag by flag): the Downward API env (POD_IP -> 127.0.0.1, POD_NAME,
the completion index), the coordinator Service's DNS name and the listen
addresses (-> 127.0.0.1 and free ports), and volume paths (the claim and
the /tmp emptyDir -> temp dirs; the ConfigMap mount -> a temp job.json).
The job config in that ConfigMap is the one thing edited: a tiny model and
a few steps so that 2 cores finish in time; the manifests stay as shipped.

Scenario, as `kubectl patch job/zeroshard-worker` of parallelism and
completions would drive it: start `parallelism` indexes; scale down to
--min-workers (the highest indexes get SIGTERM: they hand off and exit with
the manifest's --leave-exit-code); scale up by one (a new pod for the next
index); SIGTERM one pod as a drain would (it exits with the leave code,
which the Job's podFailurePolicy ignores, so the index gets a new pod that
rejoins); then the operator ends the job with `zeroshard stop` (the job's
steps are far more than the scenario could train, so no pace of the
machine lets it end on its own first): the ranks save a checkpoint at their
next step and complete the job there, the coordinator reports completed,
every remaining worker exits 0, and a late worker of the completed job
exits 0 at once. Skipped (77) without the binaries, kubectl or the job's
data."""
import json
import math
import pathlib
import tempfile
import time

import deploy_common as dc
import k8s_local as kl

DEADLINE_S = 150     # Whole scenario, generous for a loaded 2-core machine.
STEPS = 10_000_000  # Never reached: `zeroshard stop` ends the job (checked).

c = dc.Checker("k8s_local_test")
for b in ("zeroshard-coordinator", "zeroshard-worker"):
    if not (dc.BIN_DIR / b).is_file():
        dc.skip(f"{dc.BIN_DIR / b} not built")
objs, how = dc.load_resources()
if how != "kubectl kustomize":
    dc.skip("kubectl is not installed: cannot render deploy/k8s/base")
job_obj = dc.find(objs, "Job", "zeroshard-worker")
dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
svc = dc.find(objs, "Service", "zeroshard-coordinator")
(coord_ctr,) = dc.pod_spec(dep)["containers"]
(worker_ctr,) = dc.pod_spec(job_obj)["containers"]
cflags = dc.flags_of(dc.container_argv(coord_ctr)[1:])
min_workers, parallelism = int(cflags["--min-workers"]), job_obj["spec"]["parallelism"]
LEAVE_CODE = int(dc.flags_of(dc.container_argv(worker_ctr)[1:]).get("--leave-exit-code", 0))
c.check(parallelism > min_workers, f"the Job's parallelism {parallelism} > --min-workers "
        f"{min_workers}, so there is room to scale down")

with tempfile.TemporaryDirectory() as root:
    cluster = kl.LocalCluster(pathlib.Path(root), objs, dep, svc, job_obj)
    job = cluster.job_config()
    if not all(pathlib.Path(p).exists() for p in job.get("data", [])):
        dc.skip(f"job.json data {job.get('data')} not on this machine")
    job.update(model="tiny", steps=STEPS, global_batch=8, micro_batch=2, eval_every=0,
               checkpoint_every=0)
    argv = cluster.start_coordinator(job)
    c.check(cluster.coordinator_argv_honest(c, argv), "coordinator argv keeps every other flag")
    deadline = time.monotonic() + DEADLINE_S
    try:
        c.check(cluster.wait_ready(deadline), f"coordinator serving: {cluster.coord_log()}")
        for i in range(parallelism):
            pod = cluster.start_pod(i)
            cluster.worker_argv_honest(c, pod)
        c.check(cluster.wait_for(lambda m: m["workers"] == parallelism and m["step"] >= 1,
                                 deadline), f"a generation of {parallelism} trains: "
                f"{cluster.metrics()}")
        for pod in cluster.running_pods():
            c.check(kl.http_status(pod.health_port, "/healthz") == 200,
                    f"{pod.name}: /healthz 200 while training")
        # Readiness follows the heartbeat replies (every --heartbeat-interval).
        ready_by = time.monotonic() + 10
        while time.monotonic() < ready_by and not all(
                kl.http_status(p.health_port, "/readyz") == 200 for p in cluster.running_pods()):
            time.sleep(0.3)
        c.check(all(kl.http_status(p.health_port, "/readyz") == 200
                    for p in cluster.running_pods()), "every training worker's /readyz is 200")

        # kubectl patch ... parallelism=completions=min_workers: the highest
        # indexes' pods are deleted (SIGTERM) and leave gracefully.
        for pod in cluster.scale_to(min_workers):
            c.check(pod.wait(60) == LEAVE_CODE,
                    f"{pod.name} (scaled down) exits {LEAVE_CODE}: {pod.tail()}")
        step = cluster.metrics()["step"]
        c.check(cluster.wait_for(lambda m: m["workers"] == min_workers and m["step"] > step,
                                 deadline), f"training goes on with {min_workers} workers: "
                f"{cluster.metrics()}")

        # Scale up by one: a new pod for index min_workers joins.
        cluster.scale_to(min_workers + 1)
        cluster.worker_argv_honest(c, cluster.pods[-1])
        step = cluster.metrics()["step"]
        c.check(cluster.wait_for(lambda m: m["workers"] == min_workers + 1 and m["step"] > step,
                                 deadline), f"the scaled-up generation of {min_workers + 1} "
                f"trains: {cluster.metrics()}")

        # A drain: SIGTERM to index 1's pod; it hands off and exits with the
        # leave code. Exit 0 would complete index 1 for good (the Job would
        # go on one worker short); the policy must give the index a new pod.
        drained = cluster.pod_of(1)
        drained.terminate()
        c.check(LEAVE_CODE != 0, "a graceful leave does not exit 0 (it would complete the index)")
        c.check(drained.wait(60) == LEAVE_CODE,
                f"{drained.name} exits {LEAVE_CODE} on SIGTERM: {drained.tail()}")
        action, replacement = cluster.replace_failed(drained)
        c.check(action == "Ignore", f"podFailurePolicy ignores exit {LEAVE_CODE} (got {action})")
        if replacement:
            cluster.worker_argv_honest(c, replacement)
            step = cluster.metrics()["step"]
            c.check(cluster.wait_for(lambda m: m["workers"] == min_workers + 1
                                     and m["step"] > step, deadline),
                    f"index 1's new pod rejoins: {cluster.metrics()}")
        print(f"after the drain: {cluster.metrics()} of {STEPS} steps", flush=True)
        c.check(cluster.metrics()["job_completed"] == 0,
                f"the job outlasted the scale events: {cluster.metrics()}")

        # The operator stops the job: the ranks save at their next step and
        # complete the job there; every remaining worker exits 0.
        stop = cluster.operator("stop")
        c.check(stop.returncode == 0 and "stop requested" in stop.stdout,
                f"zeroshard stop is taken: rc {stop.returncode}, {stop.stdout} {stop.stderr}")
        for pod in cluster.running_pods():
            rc = pod.wait(max(1, deadline - time.monotonic()))
            c.check(rc == 0, f"{pod.name} exits 0 when the job completes (got {rc}): "
                    f"{pod.tail()}")
        m = cluster.metrics()
        c.check(m["job_completed"] == 1, f"coordinator reports the job completed: {m}")
        status = cluster.operator("status", "--json")
        reason = json.loads(status.stdout).get("job_state_reason", "") if status.returncode == 0 \
            else status.stderr
        c.check(reason == f"stopped by request at step {m['step']}",
                f"zeroshard status gives the stop as the reason, at the last step: {reason!r}")
        again = cluster.operator("stop")
        c.check(again.returncode == 1 and "already ended" in again.stderr,
                f"a second stop is refused: rc {again.returncode}, {again.stderr}")
        c.check(math.isfinite(m["loss"]) and 0 < m["loss"] < 10, f"finite loss: {m}")
        # Job success: every index 0..completions-1 has a pod that exited 0.
        done = cluster.succeeded_indexes()
        c.check(done == set(range(min_workers + 1)),
                f"every index of the Job succeeded (exit 0 per index: {sorted(done)})")
        # A late pod of the completed job (a scale-up after the end, or an
        # index replaced after a crash) exits 0 at once.
        late = cluster.start_pod(min_workers + 1)
        cluster.worker_argv_honest(c, late)
        t0 = time.monotonic()
        rc = late.wait(30)
        c.check(rc == 0 and time.monotonic() - t0 < 20,
                f"a late worker of a completed job exits 0 at once (got {rc} after "
                f"{time.monotonic() - t0:.1f} s): {late.tail()}")
        checkpoints = pathlib.Path(cluster.on_volume(job["checkpoint_dir"]))
        saved = sorted(p.name for p in checkpoints.glob("step-*")) if checkpoints.is_dir() else []
        c.check(f"step-{m['step']:08d}" in saved,
                f"the stop's checkpoint (step {m['step']}) landed on the claim: {saved}")
        print(f"scenario took {DEADLINE_S - (deadline - time.monotonic()):.1f} s", flush=True)
    finally:
        cluster.stop_all(c)

c.finish()
