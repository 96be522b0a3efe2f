"""A rendered deploy/k8s kustomization run as local processes (used by
k8s_local_test.py): the coordinator Deployment's container and the worker
Job's pods, each started from its container's command, args and env.

What a cluster would provide is the only thing replaced, and each
replacement has a named kind that the *_argv_honest checks hold every
launched command line to:
- "downward": env from the Downward API (status.podIP -> 127.0.0.1,
  metadata.name -> a pod name, the completion index annotation -> the
  index), then $(VAR) in args expanded as the kubelet does;
- "service": the coordinator Service's DNS name -> 127.0.0.1 and the port
  the local coordinator serves gRPC on;
- "listen": a bind address (0.0.0.0:PORT) -> 127.0.0.1 and a free port;
- "volume": a path on the claim (PVC) -> the same path under a temp dir,
  the ConfigMap's job.json -> a temp file; /tmp (emptyDir) -> a temp dir as
  TMPDIR and HOME;
- "secret": a path in a mounted Secret (the manifests mount Secrets they do
  not define: the operator or cert-manager creates them) -> the same item
  under a temp dir, filled as deploy/README.md says: TLS Secrets with
  tls.crt, tls.key, ca.crt (certificates made by tests/security/certs.py: a
  CA, the coordinator's certificate, a client certificate for workers), the
  token Secret with `tokens` ("role token" lines) and `worker-token`.
"""
import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import deploy_common as dc

sys.path.insert(0, str(dc.SOURCE_DIR / "tests" / "security"))
import certs  # noqa: E402  (tests/security/certs.py)


def http_status(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def expand(value, env):
    """Kubernetes $(VAR) expansion (an undefined VAR stays as written)."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def secret_contents(root):
    """The Secrets the manifests mount, by name: {key: file text}."""
    d = certs.make_all(root)

    def tls(leaf):
        return {"tls.crt": (d / f"{leaf}.pem").read_text(),
                "tls.key": (d / f"{leaf}.key").read_text(), "ca.crt": (d / "ca.pem").read_text()}
    worker = secrets.token_hex(16)
    tokens = (f"worker {worker}\nreader {secrets.token_hex(16)}\n"
              f"admin {secrets.token_hex(16)}\n")
    return {"zeroshard-coordinator-tls": tls("server"), "zeroshard-worker-tls": tls("client"),
            "zeroshard-tokens": {"tokens": tokens, "worker-token": worker + "\n"}}


def mount_secrets(root, contents, ctr, obj, name):
    """Writes `ctr`'s Secret volumes (their items, else every key; contents
    from secret_contents) under `root`, read-only; returns {mountPath: dir}."""
    volumes = {v["name"]: v for v in dc.pod_spec(obj).get("volumes", [])}
    out = {}
    for m in ctr.get("volumeMounts", []):
        sec = volumes[m["name"]].get("secret")
        if sec is None:
            continue
        data = contents[sec["secretName"]]
        items = sec.get("items") or [{"key": k, "path": k} for k in data]
        d = pathlib.Path(root) / f"secret-{name}-{m['name']}"
        d.mkdir()
        for it in items:
            (d / it["path"]).write_text(data[it["key"]])
            (d / it["path"]).chmod(0o440)
        out[m["mountPath"].rstrip("/")] = str(d)
    return out


def on_secret(path, mounts):
    """`path` in a mounted Secret -> the same item under its temp dir."""
    for mount, d in mounts.items():
        if path.startswith(mount + "/"):
            return d + path[len(mount):]
    return path


def argv_of(flags):
    return [f"{k}={v}" if v is not None else k for k, v in flags.items()]


class Pod:
    def __init__(self, index, name, argv, env, health_port, log):
        self.index, self.name, self.argv, self.env = index, name, argv, env
        self.health_port, self.log = health_port, log
        self.out_of_range = False  # Deleted by a scale-down: its exit does not count.
        self.proc = subprocess.Popen(argv, env=env, stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT)

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, n=600):
        return pathlib.Path(self.log).read_text(errors="replace")[-n:]


class LocalCluster:
    def __init__(self, root, objs, dep, svc, job_obj):
        self.root, self.objs, self.svc, self.job_obj = root, objs, svc, job_obj
        (self.coord,) = dc.pod_spec(dep)["containers"]
        (self.worker,) = dc.pod_spec(job_obj)["containers"]
        self.volumes = {v["name"]: v for v in dc.pod_spec(dep).get("volumes", [])}
        self.claim_mounts = [m["mountPath"].rstrip("/") for m in self.coord["volumeMounts"]
                             if "persistentVolumeClaim" in self.volumes[m["name"]]]
        self.claim = root / "claim"
        self.claim.mkdir()
        (root / "pki").mkdir()
        self.secrets = secret_contents(root / "pki")
        self.coord_secrets = mount_secrets(root, self.secrets, self.coord, dep, "coord")
        self.worker_secrets = mount_secrets(root, self.secrets, self.worker, job_obj, "worker")
        self.pods = []
        self.coordinator = None
        self.grpc_port = self.metrics_port = None

    # --- the coordinator ---------------------------------------------------
    def on_volume(self, path):
        for m in self.claim_mounts:
            if path.startswith(m + "/"):
                return str(self.claim) + path[len(m):]
        return path

    def job_config(self):
        """The job.json of the ConfigMap the coordinator's --job-config reads."""
        path = dc.flags_of(dc.container_argv(self.coord))["--job-config"]
        cm_name = next(self.volumes[m["name"]]["configMap"]["name"]
                       for m in self.coord["volumeMounts"]
                       if path.startswith(m["mountPath"].rstrip("/") + "/"))
        cm = dc.find(self.objs, "ConfigMap", cm_name)
        return json.loads(cm["data"][path.rsplit("/", 1)[1]])

    def start_coordinator(self, job):
        job = dict(job, checkpoint_dir=self.on_volume(job.get("checkpoint_dir", "")))
        job_file = self.root / "job.json"
        job_file.write_text(json.dumps(job))
        argv = dc.container_argv(self.coord)
        flags = dc.flags_of(argv[1:])
        # Port 0: the coordinator picks both ports and names them in its log
        # (wait_ready reads them); a port chosen here could be taken meanwhile.
        self.grpc_port = self.metrics_port = None
        for flag, value in flags.items():
            if flag in ("--listen", "--metrics-listen"):
                flags[flag] = "127.0.0.1:0"
            elif flag == "--job-config":
                flags[flag] = str(job_file)
            elif value is not None:
                flags[flag] = self.on_volume(on_secret(value, self.coord_secrets))
        launched = [str(dc.BIN_DIR / argv[0])] + argv_of(flags)
        print("coordinator:", " ".join(launched), flush=True)
        self.coord_log_path = self.root / "coordinator.log"
        self.coordinator = subprocess.Popen(launched, env=self.pod_env(self.coord, {}, "coord"),
                                            stdout=open(self.coord_log_path, "w"),
                                            stderr=subprocess.STDOUT)
        return launched

    def operator(self, *args, timeout=30):
        """`zeroshard ARGS` as an operator runs it against the coordinator
        (through kubectl exec or a port-forward): with the admin token of the
        tokens Secret and a client certificate of its CA. Returns the
        CompletedProcess."""
        d = self.root / "operator"
        if not d.is_dir():
            d.mkdir()
            for key, text in self.secrets["zeroshard-worker-tls"].items():
                (d / key).write_text(text)
            tokens = self.secrets["zeroshard-tokens"]["tokens"].splitlines()
            (d / "token").write_text(next(t.split()[1] for t in tokens
                                          if t.startswith("admin ")) + "\n")
            for f in d.iterdir():
                f.chmod(0o600)
        argv = [str(dc.BIN_DIR / "zeroshard"), *args, f"--coordinator=127.0.0.1:{self.grpc_port}",
                f"--tls-ca={d / 'ca.crt'}", f"--tls-cert={d / 'tls.crt'}",
                f"--tls-key={d / 'tls.key'}", f"--token-file={d / 'token'}"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def coord_log(self):
        return self.coord_log_path.read_text(errors="replace")[-800:]

    def pod_env(self, ctr, downward, name):
        """The container's env (Downward API fields resolved from
        `downward`), plus TMPDIR/HOME for its /tmp emptyDir."""
        tmp = self.root / f"tmp-{name}"
        tmp.mkdir(exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(tmp),
               "HOME": str(tmp)}
        for e in ctr.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            else:
                env[e["name"]] = downward[e["valueFrom"]["fieldRef"]["fieldPath"]]
        return env

    def coordinator_argv_honest(self, c, launched):
        want = dc.flags_of(dc.container_argv(self.coord)[1:])
        got = dc.flags_of(launched[1:])
        ok = c.check(list(got) == list(want), f"coordinator flags {list(got)} == the "
                     f"manifest's {list(want)}")
        for flag, value in want.items():
            kind = ("listen" if flag in ("--listen", "--metrics-listen") else
                    "volume" if flag == "--job-config" or self.on_volume(value or "") != value
                    else "secret" if on_secret(value or "", self.coord_secrets) != value
                    else None)
            if kind == "secret":
                ok &= c.check(got[flag] == on_secret(value, self.coord_secrets),
                              f"coordinator {flag}: Secret item -> temp dir ({got[flag]})")
            elif kind == "listen":
                ok &= c.check(got[flag].startswith("127.0.0.1:") and value.startswith("0.0.0.0:"),
                              f"coordinator {flag}: bind address -> loopback ({got[flag]})")
            elif kind == "volume":
                ok &= c.check(got[flag].startswith(str(self.root)),
                              f"coordinator {flag}: volume path -> temp dir ({got[flag]})")
            else:
                ok &= c.check(got.get(flag) == value,
                              f"coordinator {flag} is the manifest's {value!r} ({got.get(flag)!r})")
        return ok

    def wait_ready(self, deadline):
        """Until the coordinator's start line names its ports and /readyz answers 200."""
        while time.monotonic() < deadline and self.coordinator.poll() is None:
            if self.metrics_port is None:
                m = re.search(r":(\d+) \(grpc\), [0-9.]+:(\d+) \(metrics\)",
                              self.coord_log_path.read_text(errors="replace"))
                if m:
                    self.grpc_port, self.metrics_port = int(m.group(1)), int(m.group(2))
            if self.metrics_port is not None and http_status(self.metrics_port, "/readyz") == 200:
                return True
            time.sleep(0.2)
        return False

    def metrics(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {"workers": -1, "step": -1, "loss": math_nan(), "job_completed": -1}

        def value(pattern, default):
            m = re.search(rf"^{pattern} (\S+)$", text, re.M)
            return float(m.group(1)) if m else default
        return {"workers": int(value("zeroshard_workers", -1)),
                "step": int(value("zeroshard_step", -1)),
                "generation": int(value("zeroshard_generation", -1)),
                "loss": value("zeroshard_loss", math_nan()),
                "job_completed": int(value(r'zeroshard_job_state\{state="completed"\}', -1))}

    def wait_for(self, predicate, deadline):
        while time.monotonic() < deadline:
            if predicate(self.metrics()):
                return True
            time.sleep(0.3)
        return False

    # --- worker pods -------------------------------------------------------
    def start_pod(self, index):
        name = f"{self.job_obj['metadata']['name']}-{index}-{os.urandom(3).hex()[:5]}"
        downward = {"metadata.name": name, "status.podIP": "127.0.0.1",
                    "metadata.annotations['batch.kubernetes.io/job-completion-index']":
                        str(index)}
        env = self.pod_env(self.worker, downward, name)
        argv = dc.container_argv(self.worker)
        flags = {k: expand(v, env) if v is not None else None
                 for k, v in dc.flags_of(argv[1:]).items()}
        health = dc.free_port()
        flags["--coordinator"] = f"127.0.0.1:{self.grpc_port}"
        flags["--health-listen"] = f"127.0.0.1:{health}"
        flags = {k: on_secret(v, self.worker_secrets) if v is not None else None
                 for k, v in flags.items()}
        launched = [str(dc.BIN_DIR / argv[0])] + argv_of(flags)
        pod = Pod(index, name, launched, env, health, self.root / f"{name}.log")
        self.pods.append(pod)
        return pod

    def worker_argv_honest(self, c, pod):
        want = dc.flags_of(dc.container_argv(self.worker)[1:])
        got = dc.flags_of(pod.argv[1:])
        c.check(list(got) == list(want), f"{pod.name}: flags {list(got)} == the manifest's")
        svc = f"{self.svc['metadata']['name']}:"
        for flag, value in want.items():
            if value.startswith(svc):
                c.check(got[flag] == f"127.0.0.1:{self.grpc_port}",
                        f"{pod.name} {flag}: Service DNS name -> loopback ({got[flag]})")
            elif value.startswith("0.0.0.0:"):
                c.check(got[flag].startswith("127.0.0.1:"),
                        f"{pod.name} {flag}: bind address -> loopback ({got[flag]})")
            elif on_secret(value, self.worker_secrets) != value:
                c.check(got[flag] == on_secret(value, self.worker_secrets),
                        f"{pod.name} {flag}: Secret item -> temp dir ({got[flag]})")
            else:
                c.check(got[flag] == expand(value, pod.env),
                        f"{pod.name} {flag} is the manifest's {value!r} with the Downward API "
                        f"env expanded ({got[flag]!r})")

    def running_pods(self):
        return [p for p in self.pods if p.proc.poll() is None]

    def pod_of(self, index):
        return next(p for p in self.running_pods() if p.index == index)

    def succeeded_indexes(self):
        """Indexes the Job controller counts as succeeded: a pod exited 0
        while its index was in range (pods a scale-down deleted do not count)."""
        return {p.index for p in self.pods if p.proc.poll() == 0 and not p.out_of_range}

    def failure_action(self, exit_code):
        """What the Job's podFailurePolicy does with a pod that exited
        `exit_code` (non-zero), as the Job controller reads its onExitCodes
        rules in order: "Ignore", "FailJob", "FailIndex", or "Count" (no rule
        matched: the failure counts against backoffLimit; the index is
        retried either way unless the Job fails)."""
        for rule in self.job_obj["spec"].get("podFailurePolicy", {}).get("rules", []):
            codes = rule.get("onExitCodes")
            if not codes or codes.get("containerName", self.worker["name"]) != self.worker["name"]:
                continue
            inside = exit_code in codes["values"]
            if inside == (codes["operator"] == "In"):
                return rule["action"]
        return "Count"

    def replace_failed(self, pod):
        """The Job controller's answer to a failed pod of an index in range:
        a new pod for the index unless the policy fails the Job or index.
        Returns (action, the new pod or None)."""
        action = self.failure_action(pod.proc.returncode)
        if action in ("Ignore", "Count") and not pod.out_of_range:
            return action, self.start_pod(pod.index)
        return action, None

    def scale_to(self, n):
        """parallelism = completions = n, as the Job controller applies it:
        pods of indexes >= n are deleted (SIGTERM; returned) and do not
        count; each index < n without a running or succeeded pod gets one."""
        removed = [p for p in self.running_pods() if p.index >= n]
        for p in self.pods:
            p.out_of_range |= p.index >= n
        for p in removed:
            p.terminate()
        for i in range(n):
            if i not in self.succeeded_indexes() and not any(
                    p.index == i for p in self.running_pods()):
                self.start_pod(i)
        return removed

    def stop_all(self, c):
        for p in self.running_pods() + ([self.coordinator] if self.coordinator else []):
            proc = p.proc if isinstance(p, Pod) else p
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
                    c.check(False, f"{proc.args[0]} did not stop within 15 s of SIGTERM")


def math_nan():
    return float("nan")
