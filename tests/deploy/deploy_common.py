"""Shared helpers for the deploy/ tests: paths, loading manifests, reading
container flags, and the metric names the project's C++ code registers.

Every test script exits 0 (pass), 1 (fail) or 77 (skipped, with a printed
reason); CTest maps 77 to "skipped" through SKIP_RETURN_CODE.
"""
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys

SKIP = 77

SOURCE_DIR = pathlib.Path(
    os.environ.get("ZEROSHARD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BIN_DIR = pathlib.Path(os.environ.get("ZEROSHARD_BIN_DIR", SOURCE_DIR / "build" / "bin"))
DEPLOY = SOURCE_DIR / "deploy"
K8S_DIR = DEPLOY / "k8s"
K8S_BASE = K8S_DIR / "base"


class Checker:
    """Collects failures so one run reports all of them, not just the first."""

    def __init__(self, name):
        self.name = name
        self.failures = []
        self.passed = 0

    def check(self, cond, message):
        if cond:
            self.passed += 1
        else:
            self.failures.append(message)
            print(f"FAIL: {message}", flush=True)
        return cond

    def finish(self):
        failed = len(self.failures)
        print(f"{self.name}: {self.passed} passed, {failed} failed", flush=True)
        sys.exit(1 if failed else 0)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def require_module(name, pip_name):
    try:
        return __import__(name)
    except ImportError:
        skip(f"python module {name} is missing (scripts/setup-test-tools.sh installs {pip_name})")


def kustomization(path=None):
    yaml = require_module("yaml", "pyyaml")
    with open(pathlib.Path(path or K8S_BASE) / "kustomization.yaml") as f:
        return yaml.safe_load(f)


def render_dirs():
    """{name: folder} of every kustomization a user applies: the base and
    each overlay directly under deploy/k8s/overlays (their own helper
    folders, like overlays/jobset/with-job, are not listed)."""
    dirs = {"base": K8S_BASE}
    for d in sorted((K8S_DIR / "overlays").iterdir()):
        if (d / "kustomization.yaml").is_file():
            dirs[d.name] = d
    return dirs


def render(path):
    """`kubectl kustomize PATH` (what `kubectl apply -k PATH` sends) as a
    list of objects; None when kubectl is not installed."""
    yaml = require_module("yaml", "pyyaml")
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True,
                         text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: kubectl kustomize {path}: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def load_resources(path=None):
    """The objects deploy/k8s/base (or the kustomization at `path`) applies:
    `kubectl kustomize` output when kubectl is here, else (base only) the
    kustomization's resource files read directly. Returns (objects, how)."""
    yaml = require_module("yaml", "pyyaml")
    path = pathlib.Path(path or K8S_BASE)
    objs = render(path)
    if objs is not None:
        return objs, "kubectl kustomize"
    if path != K8S_BASE:
        skip(f"kubectl is not installed: cannot render {path}")
    docs = []
    for res in kustomization(path)["resources"]:
        with open(path / res) as f:
            docs.extend(d for d in yaml.safe_load_all(f) if d)
    return docs, "resource files (kubectl absent)"


def pod_templates(obj):
    """Pod templates ({metadata, spec}) an object creates pods from:
    spec.template of a Deployment/Job/StatefulSet, and the Job template of
    every replicated Job of a JobSet."""
    spec = obj.get("spec", {})
    if obj.get("kind") == "JobSet":
        return [rj["template"]["spec"]["template"] for rj in spec.get("replicatedJobs", [])]
    return [spec["template"]] if "template" in spec else []


def worker_pod_template(objs):
    """The worker pod template: the Job's, or the JobSet's (one of them)."""
    for o in objs:
        if o["kind"] in ("Job", "JobSet") and o["metadata"]["name"] == "zeroshard-worker":
            return pod_templates(o)[0]
    return None


def find(objs, kind, name):
    for o in objs:
        if o.get("kind") == kind and o["metadata"]["name"] == name:
            return o
    return None


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def container_argv(container):
    return list(container.get("command", [])) + list(container.get("args", []))


def flags_of(argv):
    """{flag: value-or-None} from argv written as `--f=v` or `--f v`."""
    flags = {}
    i = 0
    while i < len(argv):
        tok = str(argv[i])
        if tok.startswith("--"):
            if "=" in tok:
                k, v = tok.split("=", 1)
                flags[k] = v
            elif i + 1 < len(argv) and not str(argv[i + 1]).startswith("-"):
                flags[tok] = str(argv[i + 1])
                i += 1
            else:
                flags[tok] = None
        i += 1
    return flags


# Quoted string literals that are whole metric names, e.g. "zeroshard_loss".
_METRIC_LITERAL = re.compile(r'"((?:zeroshard|process)_[a-z0-9_]+)"')
METRIC_CODE_DIRS = ("server", "common")


def registered_metric_names():
    """Metric names the C++ code registers: every quoted "zeroshard_..."
    string literal in server/ and common/ sources. Returns (names, files)."""
    metrics, files = registered_metrics()
    return set(metrics), files


def _call_arguments(text, start):
    """The text from `start` to the parenthesis that closes the call `start`
    is inside of."""
    depth, i = 1, start
    while i < len(text) and depth:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
    return text[start:i - 1]


_STRING_LIST = re.compile(r'\{\s*((?:"[^"]*"\s*,?\s*)*)\}')


def registered_metrics():
    """{metric name: set of label names} for every "zeroshard_..." literal in
    server/ and common/ sources; the labels are the string-list argument
    ({"rank", "kind"}) of the registering call, empty when it has none.
    Returns (metrics, files)."""
    metrics, files = {}, set()
    for d in METRIC_CODE_DIRS:
        for path in sorted((SOURCE_DIR / d).rglob("*")):
            if path.suffix not in (".cc", ".h", ".cpp", ".hpp"):
                continue
            text = path.read_text(errors="replace")
            for m in _METRIC_LITERAL.finditer(text):
                args = _call_arguments(text, m.end())
                labels = set()
                for group in _STRING_LIST.finditer(args):
                    labels.update(re.findall(r'"([^"]*)"', group.group(1)))
                metrics.setdefault(m.group(1), set()).update(labels)
                files.add(str(path.relative_to(SOURCE_DIR)))
    return metrics, sorted(files)


_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_PROMQL_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_PROMQL_MATCHERS = re.compile(r"\{[^}]*\}")
_PROMQL_RANGE = re.compile(r"\[[^\]]*\]")
# Numbers and durations ("5m", "0.99", "1e3") first, so "5m" is not read as "m".
_PROMQL_TOKEN = re.compile(r"(?P<num>\d[A-Za-z0-9_.]*)|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)")
_PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                 "group_left", "group_right", "inf", "nan", "Inf", "NaN", "atan2"}


_PROMQL_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_PROMQL_MATCHER_NAMES = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def promql_label_names(expr):
    """Label names an expression groups by or matches on."""
    s = _PROMQL_STRING.sub('""', expr)
    names = set()
    for group in _PROMQL_LABEL_LISTS.finditer(s):
        names.update(n.strip() for n in group.group(1).split(",") if n.strip())
    for block in _PROMQL_MATCHERS.finditer(s):
        names.update(_PROMQL_MATCHER_NAMES.findall(block.group(0)))
    return names


def promql_metric_names(expr):
    """Metric names a PromQL expression selects (not functions, aggregation
    operators, label names or keywords)."""
    s = _PROMQL_STRING.sub('""', expr)
    s = _PROMQL_MATCHERS.sub(" ", s)
    s = _PROMQL_GROUPING.sub(" ", s)
    s = _PROMQL_RANGE.sub(" ", s)
    names = set()
    for m in _PROMQL_TOKEN.finditer(s):
        word = m.group("ident")
        if word is None:
            continue
        rest = s[m.end():].lstrip()
        if rest.startswith("(") or word in _PROMQL_WORDS:
            continue  # a function or aggregation call, or a keyword
        if s[:m.start()].rstrip().endswith(("$", "{{", ".")):
            continue
        names.add(word)
    return names


def series_is_registered(name, registered):
    """True when `name` is a registered metric or a series a registered
    histogram/summary exposes (_bucket, _sum, _count)."""
    if name in registered:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in registered:
            return True
    return False
