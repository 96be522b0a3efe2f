#!/usr/bin/env python3
"""Debian's Prometheus against a real run: the coordinator and workers run on
loopback, Prometheus scrapes them with deploy/prometheus/prometheus-local.yml
(only its target port, the scrape interval and the rule file's path
changed), and every dashboard query and alert expression is evaluated
through Prometheus's HTTP API.

The run: 2 workers train the tiny model with checkpoints and gradient
clipping; a third joins, one leaves by SIGTERM, one is killed (-9), one more
joins. Fails when a query is malformed, when one that should return series
returns none, when an alert expression fires or stays quiet against what the
run did (the checkpoint alert against the failed-save counter: the churn may
abort a save), or when increase(zeroshard_generation_changes_total) differs from
the coordinator's own count of generations formed. Skipped (77) when the
binaries, Prometheus or the job's data are missing."""
import json
import pathlib
import shutil
import signal
import tempfile
import time

import deploy_common as dc
import live_job as lj

c = dc.Checker("prometheus_live_test")
yaml = dc.require_module("yaml", "pyyaml")
for b in ("zeroshard-coordinator", "zeroshard-worker", "zeroshard"):
    if not (dc.BIN_DIR / b).is_file():
        dc.skip(f"{dc.BIN_DIR / b} not built")
if not shutil.which("prometheus"):
    dc.skip("prometheus is not installed (Debian package prometheus; scripts/test.sh installs it)")
# The training data the shipped job config names (Python's standard library).
DATA = json.loads(sorted(dc.K8S_DIR.rglob("job.json"))[0].read_text())["data"]
if not all(pathlib.Path(p).exists() for p in DATA):
    dc.skip(f"training data {DATA} not on this machine")
PROM = dc.DEPLOY / "prometheus"
DASHBOARD = json.loads((dc.DEPLOY / "grafana" / "zeroshard-dashboard.json").read_text())
# Dashboard variables as Grafana's "All" sends them.
VARIABLES = {"$instance": ".*", "$rank": ".*"}
JOB = {"model": "tiny", "stage": 3, "steps": 100_000_000, "global_batch": 4, "micro_batch": 2,
       "data": DATA, "threads": 1, "eval_every": 25, "checkpoint_every": 40,
       "max_grad_norm": 0.05, "max_failures": 10}


def prometheus_config(tmp, metrics_port):
    """prometheus-local.yml with the test's target port, 1 s scrapes and
    evaluations, and the rule file by absolute path; nothing else changed."""
    config = yaml.safe_load((PROM / "prometheus-local.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(PROM / f) for f in config["rule_files"]]
    (job,) = config["scrape_configs"]
    (static,) = job["static_configs"]
    c.check(static["targets"] == ["127.0.0.1:9464"], f"local target is :9464 ({static})")
    static["targets"] = [f"127.0.0.1:{metrics_port}"]
    path = pathlib.Path(tmp) / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def step_of(coord):
    return int(lj.field(coord.status(), "step") or 0)


def advance(coord, what, steps=15, timeout=60):
    """Waits until a generation with workers runs and the step moved on."""
    start = step_of(coord)
    lj.wait_for(f"{what}: {steps} more steps",
                lambda: step_of(coord) >= start + steps, timeout)


def world_size(coord):
    return int(lj.field(coord.status(), "world_size") or 0)


def scraped_workers(prom):
    """zeroshard_workers as Prometheus last scraped it (-1: no sample)."""
    r = prom.query("max(zeroshard_workers)")
    result = r.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else -1


def run_scenario(coord, tmp):
    """Join, leave, failure, join. Returns the workers still running."""
    workers = [lj.start_worker(coord, f"w{i}", tmp) for i in range(2)]
    lj.wait_for("2 workers train", lambda: world_size(coord) == 2, 60)
    advance(coord, "2 workers")
    workers.append(lj.start_worker(coord, "w2", tmp))
    lj.wait_for("the joiner admitted", lambda: world_size(coord) == 3, 60)
    advance(coord, "3 workers")
    leaver = workers.pop(0)
    leaver.send_signal(signal.SIGTERM)
    c.check(leaver.wait(timeout=60) == 0, "a worker sent SIGTERM exits 0")
    lj.wait_for("2 workers after the leave", lambda: world_size(coord) == 2, 60)
    advance(coord, "after the leave")
    workers.pop(0).kill()
    lj.wait_for("1 worker after the kill", lambda: world_size(coord) == 1, 60)
    advance(coord, "after the kill", steps=5)
    workers.append(lj.start_worker(coord, "w3", tmp))
    lj.wait_for("the second joiner admitted", lambda: world_size(coord) == 2, 60)
    advance(coord, "2 workers again", steps=45)
    return workers


def dashboard_queries():
    out = []
    for p in DASHBOARD["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for var, value in VARIABLES.items():
                expr = expr.replace(var, value)
            out.append((p["title"], expr))
    return out


def check_dashboard(prom, at, start):
    for title, expr in dashboard_queries():
        r = prom.query(expr, at=at)
        if not c.check(r.get("status") == "success", f"'{title}': `{expr}` fails: {r.get('error')}"):
            continue
        c.check(r["data"]["result"], f"'{title}': `{expr}` returns nothing during the run")
        rr = prom.api("query_range", query=expr, start=f"{start:.3f}", end=f"{at:.3f}", step="2")
        c.check(rr.get("status") == "success",
                f"'{title}': `{expr}` fails over the run's range: {rr.get('error')}")


def alert_rules():
    groups = yaml.safe_load((PROM / "alerts.yml").read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def check_alerts(prom, at, expect_firing):
    rules = prom.api("rules").get("data", {}).get("groups", [])
    loaded = {r["name"]: r for g in rules for r in g["rules"]}
    for rule in alert_rules():
        name = rule["alert"]
        live = loaded.get(name)
        if not c.check(live is not None, f"Prometheus loaded alert {name}"):
            continue
        c.check(live.get("health") == "ok", f"alert {name} evaluates: {live.get('lastError')}")
        r = prom.query(rule["expr"], at=at)
        if not c.check(r.get("status") == "success", f"alert {name}: {r.get('error')}"):
            continue
        firing = bool(r["data"]["result"])
        c.check(firing == (name in expect_firing),
                f"alert {name} expression {'fires' if firing else 'is quiet'} at the end of the "
                f"run; expected {'firing' if name in expect_firing else 'quiet'}")
        for metric in dc.promql_metric_names(rule["expr"]):
            q = prom.query(f'count({{__name__="{metric}"}})', at=at)
            c.check(q.get("data", {}).get("result"), f"alert {name}: {metric} has no series")


def checkpoint_failures(prom, at):
    """Failed saves by reason as Prometheus saw them at `at`; their sum."""
    r = prom.query("sum by (reason) (zeroshard_checkpoint_failures_total)", at=at)
    by_reason = {x["metric"].get("reason"): float(x["value"][1]) for x in r["data"]["result"]}
    print(f"checkpoint saves failed: {by_reason}")
    return sum(by_reason.values())


def check_generation_count(prom, coord, start):
    """increase() over the whole run, evaluated at the counter's last sample,
    against the coordinator's own count of generations formed."""
    truth = int(lj.field(coord.status(), "generation_changes") or 0)
    stamp = prom.query("max(timestamp(zeroshard_generation_changes_total))")
    last = float(stamp["data"]["result"][0]["value"][1])
    window = int(last - start) + 10
    r = prom.query(f"sum(increase(zeroshard_generation_changes_total[{window}s]))", at=last)
    got = float(r["data"]["result"][0]["value"][1]) if r["data"]["result"] else -1
    print(f"generations formed: {truth} (coordinator), {got} (Prometheus increase)")
    c.check(truth >= 4, f"the run formed at least 4 generations (coordinator says {truth})")
    c.check(abs(got - truth) < 1e-9,
            f"increase(zeroshard_generation_changes_total) = {got}, true count {truth}")
    return truth


def main(tmp):
    (pathlib.Path(tmp) / "job.json").write_text(json.dumps(JOB))
    coord = lj.Coordinator(
        [f"--state-dir={tmp}/state", f"--checkpoint-dir={tmp}/checkpoints",
         f"--job-config={tmp}/job.json", "--min-workers=1", "--max-workers=3", "--settle=0.5",
         "--heartbeat-interval=0.5", "--lease-timeout=3", "--handoff-grace=10"],
        f"{tmp}/coordinator.log")
    prom = lj.Prometheus(prometheus_config(tmp, coord.metrics_port), f"{tmp}/tsdb",
                         f"{tmp}/prom.log")
    workers = []
    try:
        lj.wait_for("Prometheus scrapes the coordinator", prom.up, 60)
        start = time.time()
        workers = run_scenario(coord, tmp)
        # The alerts are judged on the final state as Prometheus scraped it:
        # the second joiner can be admitted and its 45 steps run within one
        # 1 s scrape, so the last sample may still count 1 worker.
        lj.wait_for("Prometheus sees the 2 workers", lambda: scraped_workers(prom) == 2, 30)
        at = time.time()
        # Two more scrapes and rule evaluations (1 s apart) after `at`.
        lj.wait_for("Prometheus scrapes and evaluates twice more",
                    lambda: prom.evaluated_since(at + 1.0), 30)
        changes = check_generation_count(prom, coord, start)
        # The dashboard is read after those scrapes, the workers still
        # training: the last generation's per-rank series are cleared when
        # it forms and set again by its first step reports, and with the
        # tiny model its last 45 steps can all fall between two 1 s scrapes.
        check_dashboard(prom, time.time(), start)
        expect = {"ZeroshardGenerationChurn"} if changes > 3 else set()
        # A save in flight when a generation ends is aborted, and one still
        # open when the next begins is abandoned: with the tiny model's
        # hundreds of steps a second and a save every 40, the churn above
        # may or may not catch one. The alert must agree with its counter.
        if checkpoint_failures(prom, at) > 0:
            expect.add("ZeroshardCheckpointFailing")
        check_alerts(prom, at, expect)
    except TimeoutError as e:
        c.check(False, f"timed out waiting for {e}")
        print((pathlib.Path(tmp) / "coordinator.log").read_text()[-3000:])
    finally:
        for w in workers:
            lj.stop(w)
        prom.stop()
        coord.stop()


with tempfile.TemporaryDirectory() as tmp:
    main(tmp)
c.finish()
