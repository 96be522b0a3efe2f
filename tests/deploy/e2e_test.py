#!/usr/bin/env python3
"""The deploy/k8s job on loopback: the coordinator runs with the Deployment's
flags and the worker StatefulSet's pods run as processes with their args
($(ZEROSHARD_POD_IP) -> 127.0.0.1, $(ZEROSHARD_POD_NAME) ->
zeroshard-worker-<i>), --min-workers of them, on deploy/k8s/job.json shrunk
to 2 steps with a checkpoint at step 2. Passes when every worker finishes,
the coordinator reports step 2 with a finite loss, and a checkpoint landed
on the "volume". Changed from the manifests only to fit a 2-core test:
addresses (port 0), paths, --settle 0, --threads 1, steps and batch.
Skipped (77) when the binaries or the job's data are missing."""
import json
import math
import pathlib
import re
import select
import signal
import subprocess
import tempfile
import time
import urllib.request

import deploy_common as dc

DEADLINE_S = 45

c = dc.Checker("e2e_test")
for b in ("zeroshard-coordinator", "zeroshard-worker"):
    if not (dc.BIN_DIR / b).is_file():
        dc.skip(f"{dc.BIN_DIR / b} not built")

objs, _ = dc.load_resources()
dep = dc.find(objs, "Deployment", "zeroshard-coordinator")
sts = dc.find(objs, "StatefulSet", "zeroshard-worker")
(coord,) = dc.pod_spec(dep)["containers"]
(worker,) = dc.pod_spec(sts)["containers"]
data_mount = next(m["mountPath"].rstrip("/") for m in coord["volumeMounts"] if m["name"] == "data")
cflags = dc.flags_of(dc.container_argv(coord)[1:])
job = json.loads((dc.K8S_DIR / "job.json").read_text())
missing = [p for p in job.get("data", []) if not pathlib.Path(p).exists()]
if missing:
    dc.skip(f"job.json data {missing} not on this machine")


def stop(proc, name):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            c.check(False, f"{name} did not stop within 10 s of SIGTERM")


with tempfile.TemporaryDirectory() as volume:
    def on_volume(path):
        return volume + path[len(data_mount):] if path.startswith(data_mount + "/") else path

    job.update(steps=2, global_batch=4, micro_batch=2, threads=1, eval_every=0,
               checkpoint_every=2, checkpoint_dir=on_volume(job.get("checkpoint_dir", "")))
    job_file = pathlib.Path(volume) / "job.json"
    job_file.write_text(json.dumps(job))
    argv = [str(dc.BIN_DIR / "zeroshard-coordinator")]
    for flag, value in cflags.items():
        value = {"--listen": "127.0.0.1:0", "--metrics-listen": "127.0.0.1:0",
                 "--settle": "0", "--job-config": str(job_file)}.get(flag, value)
        argv.append(f"{flag}={on_volume(value)}")
    coordinator = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
    workers = []
    try:
        ports, out, deadline = None, "", time.monotonic() + 15
        while ports is None and time.monotonic() < deadline and coordinator.poll() is None:
            if select.select([coordinator.stdout], [], [], 0.2)[0]:
                out += coordinator.stdout.readline()
                ports = re.search(r":(\d+) \(grpc\).*:(\d+) \(metrics\)", out)
        c.check(ports is not None, f"coordinator started: {out!r}")
        if ports is None:
            c.finish()
        grpc_port, metrics_port = ports.group(1), ports.group(2)

        min_workers = int(cflags["--min-workers"])
        for i in range(min_workers):
            env = {"ZEROSHARD_POD_IP": "127.0.0.1", "ZEROSHARD_POD_NAME": f"zeroshard-worker-{i}"}
            wargv = [str(dc.BIN_DIR / "zeroshard-worker")]
            for flag, value in dc.flags_of(dc.container_argv(worker)[1:]).items():
                value = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], value or "")
                if flag == "--coordinator":
                    value = f"127.0.0.1:{grpc_port}"
                elif flag == "--threads":
                    value = "1"
                wargv.append(f"{flag}={value}")
            workers.append(subprocess.Popen(wargv, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True))
        print("worker 0:", " ".join(workers[0].args), flush=True)
        deadline = time.monotonic() + DEADLINE_S
        for i, w in enumerate(workers):
            try:
                log, _ = w.communicate(timeout=max(1, deadline - time.monotonic()))
                c.check(w.returncode == 0, f"worker {i} exits 0 (got {w.returncode}): {log[-400:]}")
            except subprocess.TimeoutExpired:
                c.check(False, f"worker {i} did not finish within {DEADLINE_S} s")

        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        values = dict(re.findall(r"^(zeroshard_\w+) (\S+)$", text, re.M))
        c.check(values.get("zeroshard_step") == "2", f"coordinator reports step 2 "
                f"(got {values.get('zeroshard_step')})")
        loss = float(values.get("zeroshard_loss", "nan"))
        c.check(math.isfinite(loss) and 0 < loss < 10, f"finite loss reported (got {loss})")
        c.check(int(float(values.get("zeroshard_generation", "0"))) >= 1, "a generation formed")
        checkpoints = pathlib.Path(job["checkpoint_dir"])
        c.check(checkpoints.is_dir() and any(checkpoints.iterdir()),
                f"a checkpoint landed in {checkpoints} on the volume")
        state = pathlib.Path(on_volume(cflags["--state-dir"]))
        c.check(state.is_dir() and any(state.iterdir()), f"durable state written in {state}")
    finally:
        for i, w in enumerate(workers):
            stop(w, f"worker {i}")
        stop(coordinator, "coordinator")

c.finish()
