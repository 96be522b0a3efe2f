#!/usr/bin/env python3
"""Text given to `zeroshard launch --data` with a model directory is read by
the model's own tokenizer: training on the text directly gives, step for
step, the losses of training on the shard `zeroshard tokenize` wrote from
the same text (the same ids in the same order, so bit-equal), at N = 2,
stage 3. As controls: `--tokenizer bytes` (each byte a token, as before
tokenizers) gives other losses, and a tokenizer whose ids the model's
vocabulary cannot hold is refused, naming the file.

The model is a small random Llama directory (tests/support/hf_synthetic.py)
with a byte-level BPE trained here beside it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))


def launch(tmp, name, model, data, *extra):
    run_dir = os.path.join(tmp, "run-" + name)
    cmd = [os.path.join(BIN, "zeroshard"), "launch", "--model", model, "--workers", "2",
           "--stage", "3", "--steps", "4", "--global-batch", "4", "--micro-batch", "2",
           "--seq-len", "32", "--data", data, "--run-dir", run_dir, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    log = os.path.join(run_dir, "steps.jsonl")
    losses = []
    if os.path.exists(log):
        losses = [json.loads(line)["loss"] for line in open(log) if '"loss"' in line]
    return r, losses


def main(tmp):
    try:
        import numpy  # noqa: F401
        from hf_synthetic import write_llama
        import tokenizer_assets as assets
    except ImportError as e:
        skip(f"a test tool is missing: {e}")
    text_dir = os.path.join(tmp, "text")
    os.makedirs(text_dir)
    sources = sorted(os.path.join(os.path.dirname(os.__file__), f)
                     for f in ("os.py", "json/decoder.py", "json/encoder.py"))
    texts = []
    for i, src in enumerate(sources):
        texts.append(open(src, encoding="utf-8").read())
        shutil.copy(src, os.path.join(text_dir, f"{i}.py"))
    model = os.path.join(tmp, "llama")
    write_llama(model, vocab=1024, hidden=64, inner=128, layers=2, heads=4, kv_heads=2,
                max_positions=64)
    try:
        assets.trained_bpe(texts, model, vocab_size=1000)
    except assets.Unavailable as e:
        skip(str(e))

    shard = os.path.join(tmp, "text.bin")
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "tokenize", text_dir, "--model", model,
                        "--out", shard], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"tokenize: {r.stdout.strip()} {r.stderr.strip()}")
    r_text, from_text = launch(tmp, "text", model, text_dir)
    r_shard, from_shard = launch(tmp, "shard", model, shard)
    check(len(from_text) == 4 and from_text == from_shard,
          f"text through the model's tokenizer trains as its shard: {from_text} vs {from_shard}"
          f" {r_text.stderr[-300:]}{r_shard.stderr[-300:]}")
    _, as_bytes = launch(tmp, "bytes", model, text_dir, "--tokenizer", "bytes")
    check(len(as_bytes) == 4 and as_bytes != from_text,
          f"control: --tokenizer bytes trains on other tokens: {as_bytes}")

    small = os.path.join(tmp, "small")
    write_llama(small, vocab=512, hidden=64, inner=128, layers=2, heads=4, kv_heads=2,
                max_positions=64)
    r, _ = launch(tmp, "small", small, text_dir, "--tokenizer", model)
    check(r.returncode == 2 and "outside the model's vocabulary of 512" in r.stderr,
          f"a tokenizer larger than the model is refused: exit {r.returncode}: "
          f"{r.stderr.strip()[-300:]}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-textlaunch-") as d:
        sys.exit(main(d))
