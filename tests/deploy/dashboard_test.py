#!/usr/bin/env python3
"""deploy/grafana/zeroshard-dashboard.json: parses, is a Grafana dashboard
bound to the ${DS_PROMETHEUS} datasource variable, has the panels users
need, every query is valid PromQL (promtool), and every metric a query or an
alert uses is one the coordinator's code registers (server/, common/).

The metric check fails loudly when a name is missing from the code: a
dashboard panel over a metric nobody exports is always empty."""
import json
import re
import shutil
import subprocess
import tempfile
import pathlib

import deploy_common as dc

DASHBOARD = dc.DEPLOY / "grafana" / "zeroshard-dashboard.json"

# Queries users asked for: (what, a fragment the panel's queries must contain).
REQUIRED = [
    ("memory by kind per rank", "zeroshard_memory_bytes"),
    ("peak memory beside current", "zeroshard_peak_memory_bytes"),
    ("comm bytes/s per rank and op", "sum by (rank, op) (rate(zeroshard_comm_bytes_total"),
    ("achieved bandwidth per rank and op", "sum by (rank, op) (rate(zeroshard_comm_seconds_total"),
    ("time in collectives per rank (stragglers)", "sum by (rank) (rate(zeroshard_comm_seconds_total"),
    ("step time quantiles", "histogram_quantile("),
    ("step time histogram", "zeroshard_step_seconds_bucket"),
    ("tokens/s from the token counter", "rate(zeroshard_tokens_total"),
    ("loss", "zeroshard_loss"),
    ("grad norm before clipping", "zeroshard_grad_norm{"),
    ("grad norm after clipping", "zeroshard_grad_norm_clipped"),
    ("clipped steps", "zeroshard_grad_clips_total"),
    ("job state", "zeroshard_job_state"),
    ("checkpoints committed", "zeroshard_checkpoint_saves_total"),
    ("checkpoint failures", "zeroshard_checkpoint_failures_total"),
    ("checkpoint save time", "zeroshard_checkpoint_save_seconds_bucket"),
    ("last committed checkpoint", "zeroshard_checkpoint_last_step"),
    ("rank to worker and pod", "zeroshard_rank_info"),
    ("worker RSS", "zeroshard_worker_rss_bytes"),
    ("coordinator process", "process_resident_memory_bytes"),
    ("generation", "zeroshard_generation{"),
    ("generation changes by reason", "increase(zeroshard_generation_changes_total"),
    ("workers", "zeroshard_workers"),
]

c = dc.Checker("dashboard_test")
yaml = dc.require_module("yaml", "pyyaml")

try:
    dash = json.loads(DASHBOARD.read_text())
except json.JSONDecodeError as e:
    c.check(False, f"{DASHBOARD.name} does not parse: {e}")
    c.finish()

# --- Dashboard shape. ---
c.check(dash.get("schemaVersion", 0) >= 36, f"schemaVersion >= 36 (got {dash.get('schemaVersion')})")
c.check(dash.get("title") and dash.get("uid"), "dashboard has a title and uid")
variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
ds_var = variables.get("DS_PROMETHEUS", {})
c.check(ds_var.get("type") == "datasource" and ds_var.get("query") == "prometheus",
        "templating variable DS_PROMETHEUS is a Prometheus datasource variable")

panels = []
for p in dash.get("panels", []):
    panels.append(p)
    panels.extend(p.get("panels", []))  # panels inside collapsed rows
ids = [p.get("id") for p in panels]
c.check(len(ids) == len(set(ids)), f"panel ids are unique ({ids})")

# Panels tile the 24-column grid without overlapping.
cells = {}
for p in panels:
    g = p.get("gridPos", {})
    c.check(g.get("x", 0) + g.get("w", 0) <= 24, f"panel '{p.get('title')}' fits 24 columns")
    for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
        for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
            other = cells.setdefault((x, y), p.get("title"))
            if other != p.get("title"):
                c.check(False, f"panels '{other}' and '{p.get('title')}' overlap at {(x, y)}")
                break

queries = []  # (panel title, expr)
legends = []  # (panel title, expr, legendFormat)
for p in panels:
    if p.get("type") == "row":
        continue
    c.check(p.get("datasource", {}).get("uid") == "${DS_PROMETHEUS}",
            f"panel '{p.get('title')}' uses ${{DS_PROMETHEUS}}")
    c.check(p.get("targets"), f"panel '{p.get('title')}' has queries")
    for t in p.get("targets", []):
        c.check(t.get("datasource", {}).get("uid") == "${DS_PROMETHEUS}",
                f"query {t.get('refId')} of '{p.get('title')}' uses ${{DS_PROMETHEUS}}")
        queries.append((p.get("title"), t.get("expr", "")))
        legends.append((p.get("title"), t.get("expr", ""), t.get("legendFormat", "")))
all_exprs = "\n".join(e for _, e in queries)
for what, fragment in REQUIRED:
    c.check(fragment in all_exprs, f"a panel shows {what} (a query containing '{fragment}')")
memory = [p for p in panels if any("zeroshard_memory_bytes" in t.get("expr", "")
                                   for t in p.get("targets", []))]
c.check(any(p["fieldConfig"]["defaults"].get("custom", {}).get("stacking", {}).get("mode")
            == "normal" and p["fieldConfig"]["defaults"].get("unit") == "bytes" for p in memory),
        "memory panel is stacked, in bytes")
# Memory per rank must be readable: one panel per rank (repeated over the
# rank variable) and a table with current beside peak, not 16 stacked series.
c.check(variables.get("rank", {}).get("type") == "query"
        and "rank)" in variables.get("rank", {}).get("definition", ""),
        "a rank template variable (label_values(..., rank))")
c.check(any(p.get("repeat") == "rank" and "$rank" in p.get("title", "") for p in memory),
        "a memory panel repeated per rank")
c.check(any(p.get("type") == "table" and {"zeroshard_memory_bytes", "zeroshard_peak_memory_bytes"}
            <= set(re.findall(r"zeroshard_\w+", " ".join(t.get("expr", "") for t in p["targets"])))
            for p in memory), "a table of memory per rank with current beside peak")
for title, expr, legend in legends:
    if "by (rank, op)" in expr:
        c.check("{{rank}}" in legend and "{{op}}" in legend,
                f"'{title}' names rank and op in its legend (got {legend!r})")
# A query that sums over ranks hides a straggler: comm panels keep the rank.
for title, expr in queries:
    if "zeroshard_comm_" in expr:
        c.check("rank" in expr, f"'{title}' keeps ranks apart: `{expr}`")

# --- Every query is valid PromQL: promtool parses them as recording rules. ---
promtool = shutil.which("promtool")
if promtool:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e.replace("$instance", ".*").replace("$rank", ".*")}
        for i, (_, e) in enumerate(queries)]}]}
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "dashboard_rules.yml"
        path.write_text(yaml.safe_dump(rules))
        out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True, timeout=60)
        c.check(out.returncode == 0, f"dashboard queries are valid PromQL:\n{out.stdout}{out.stderr}")
else:
    print("note: promtool absent; PromQL syntax of the dashboard queries not checked")

# --- Every metric used is registered in the code, with the labels used. ---
# Labels Prometheus attaches to every scraped series (target labels).
TARGET_LABELS = {"instance", "job", "namespace", "pod", "deployment"}
metrics, files = dc.registered_metrics()
registered = set(metrics)
print(f"metric names registered in {', '.join(dc.METRIC_CODE_DIRS)}: {sorted(registered)} "
      f"(from {files})")
c.check(registered, "the coordinator's code registers zeroshard_* metrics (none found in "
        f"{'/, '.join(dc.METRIC_CODE_DIRS)}/: is the coordinator's metrics code there yet?)")
alerts = yaml.safe_load((dc.DEPLOY / "prometheus" / "alerts.yml").read_text())
for r in (r for g in alerts["groups"] for r in g["rules"]):
    queries.append((f"alert {r.get('alert')}", r["expr"]))
used = {}
for title, expr in queries:
    for name in dc.promql_metric_names(expr):
        used.setdefault(name, set()).add(title)
c.check(used, "queries select metrics")
for name, where in sorted(used.items()):
    if name == "up":  # Prometheus's own per-target series
        continue
    c.check(dc.series_is_registered(name, registered),
            f"metric {name} (used by {sorted(where)}) is not registered anywhere in "
            f"{'/, '.join(dc.METRIC_CODE_DIRS)}/")



def labels_of(name):
    """Labels a series of a registered metric can carry (None: unknown)."""
    if name in metrics:
        return metrics[name]
    for suffix, extra in (("_bucket", {"le"}), ("_sum", set()), ("_count", set())):
        if name.endswith(suffix) and name[: -len(suffix)] in metrics:
            return metrics[name[: -len(suffix)]] | extra
    return None


alert_queries = [(t, e, "") for t, e in queries[len(legends):]]  # appended after the panels'
for title, expr, legend in legends + alert_queries:
    available = set(TARGET_LABELS)
    for name in dc.promql_metric_names(expr):
        available |= labels_of(name) or set()
    wanted = dc.promql_label_names(expr) | set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    c.check(wanted <= available,
            f"'{title}': labels {sorted(wanted - available)} of `{expr}` are not labels the "
            f"code registers for its metrics ({sorted(available - TARGET_LABELS)})")

c.finish()
