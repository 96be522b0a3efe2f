#!/usr/bin/env python3
"""`zeroshard launch --sample-every K`: every K steps the model writes a short
text, into the step log and onto the console, as llm.c prints its samples.

- a `small` preset at N = 1 stage 0 and at N = 2 stage 3 samples at steps 10
  and 20, the same text at both world sizes (every rank runs the same
  forward passes over the same tokens, drawn with the job's seed and the
  step), and the console shows it;
- a Llama directory with its tokenizer samples text at N = 2 stage 3, and
  what it samples is the tokenizer's decoding (it encodes back to ids the
  model's vocabulary holds).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))


def launch(tmp, name, model, workers, stage, steps, *extra):
    run_dir = os.path.join(tmp, name)
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "launch", "--model", model, "--workers",
                        str(workers), "--stage", str(stage), "--steps", str(steps),
                        "--sample-every", "10", "--sample-tokens", "24", "--data",
                        os.path.join(ROOT, "README.md"), "--run-dir", run_dir, *extra],
                       capture_output=True, text=True, timeout=240)
    log = os.path.join(run_dir, "steps.jsonl")
    rows = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
    return r, {x["step"]: x["sample"] for x in rows if "sample" in x}


def main(tmp):
    r1, one = launch(tmp, "n1", "small", 1, 0, 20)
    r2, two = launch(tmp, "n2", "small", 2, 3, 20)
    check(sorted(one) == [10, 20] and all(one.values()),
          f"samples at steps 10 and 20: {one} {r1.stderr[-300:]}")
    check(one == two, f"the same samples at N = 1 stage 0 and N = 2 stage 3: {one} vs {two}")
    check("sample at step 10:" in r1.stdout, "the console shows the sample")
    try:
        from hf_synthetic import write_llama
        import tokenizer_assets as assets
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"note: the Llama case skipped: {e}")
        return finish()
    model = os.path.join(tmp, "llama")
    write_llama(model, vocab=1024, hidden=64, inner=128, layers=2, heads=4, kv_heads=2,
                max_positions=64)
    assets.trained_bpe([open(os.path.join(ROOT, "README.md")).read()], model, vocab_size=1000)
    r, got = launch(tmp, "llama", model, 2, 3, 10, "--seq-len", "48")
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    text = got.get(10, "")
    check(r.returncode == 0 and text and tok.encode(text).ids,
          f"a Llama directory samples its tokenizer's text: {text!r} {r.stderr[-300:]}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-sample-") as d:
        sys.exit(main(d))
