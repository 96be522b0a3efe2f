#!/usr/bin/env python3
"""A broken Hugging Face model directory stops `zeroshard launch` (and
`zeroshard plan`) before any worker starts: exit 2 and one line on stderr
naming what is wrong.

Each case starts from a valid tiny BF16 Llama directory (tests/support/
hf_synthetic.py, sharded behind an index) and breaks one thing: a missing
tensor, a tensor of the wrong shape, an unsupported config key (hidden_act,
rope type, a sliding window shorter than the context, an unknown
model_type), a truncated safetensors file, an index naming a shard that is
missing. The valid directory itself launches (exit 0), so each refusal is
the break's doing. Needs numpy (exit 77 without).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from checks import check, finish  # noqa: E402
BIN = os.environ.get("ZEROSHARD_BIN_DIR", "build/bin")


def launch(model, work, tag):
    return subprocess.run(
        [os.path.join(BIN, "zeroshard"), "launch", "--model", model, "--workers", "1",
         "--steps", "1", "--global-batch", "1", "--micro-batch", "1", "--seq-len", "8",
         "--eval-every", "0", "--threads", "1", "--run-dir", os.path.join(work, tag)],
        capture_output=True, text=True, timeout=120)


def edit_config(path, **changes):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(changes)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)


def rewrite_first_shard(path, fn):
    """Applies fn(tensors) to the first shard (a dict of uint16 arrays) and writes it back."""
    import numpy as np
    import hf_synthetic
    name = "model-00001-of-00003.safetensors"
    with open(os.path.join(path, name), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                                dtype=np.uint16).reshape(v["shape"])
               for k, v in header.items() if k != "__metadata__"}
    fn(tensors)
    hf_synthetic._write_bf16(os.path.join(path, name), tensors)


def truncate(path):
    f = os.path.join(path, "model-00002-of-00003.safetensors")
    os.truncate(f, os.path.getsize(f) - 100)


def main():
    try:
        import numpy  # noqa: F401
        import hf_synthetic
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    with tempfile.TemporaryDirectory(prefix="hf_bad.") as work:
        good = os.path.join(work, "good")
        hf_synthetic.write_llama(good, vocab=300, hidden=32, inner=48, layers=2, heads=2,
                                 kv_heads=1, max_positions=64)
        r = launch(good, work, "good")
        check(r.returncode == 0, f"the valid directory launches (exit {r.returncode}) "
              f"{r.stderr.strip()[-300:]}")
        up = "model.layers.0.mlp.up_proj.weight"
        cases = [
            ("missing tensor", lambda p: rewrite_first_shard(p, lambda t: t.pop(up)), up),
            ("wrong shape", lambda p: rewrite_first_shard(
                p, lambda t: t.update({up: t[up][:40]})), up),
            ("hidden_act", lambda p: edit_config(p, hidden_act="gelu"), "hidden_act"),
            ("rope type", lambda p: edit_config(
                p, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "yarn"),
            ("sliding window", lambda p: edit_config(p, sliding_window=4), "sliding_window"),
            ("model_type", lambda p: edit_config(p, model_type="gemma"), "model_type"),
            ("truncated file", truncate, "model-00002-of-00003.safetensors"),
            ("missing shard", lambda p: os.remove(
                os.path.join(p, "model-00003-of-00003.safetensors")),
             "model-00003-of-00003.safetensors"),
        ]
        for name, break_it, named in cases:
            bad = os.path.join(work, name.replace(" ", "_"))
            shutil.copytree(good, bad)
            break_it(bad)
            r = launch(bad, work, name.replace(" ", "_") + "-run")
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and len(lines) == 1 and named in r.stderr,
                  f"{name}: exit {r.returncode}, {len(lines)} line(s) naming {named!r}: "
                  f"{r.stderr.strip()[:300]}")
            check("generation" not in r.stdout and not os.path.exists(
                os.path.join(work, name.replace(" ", "_") + "-run", "worker-0.log")),
                  f"{name}: no worker started")
        plan = subprocess.run([os.path.join(BIN, "zeroshard"), "plan", "--model",
                               os.path.join(work, "hidden_act")], capture_output=True, text=True,
                              timeout=60)
        check(plan.returncode == 2 and "hidden_act" in plan.stderr + plan.stdout,
              f"plan: exit {plan.returncode} naming hidden_act")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
