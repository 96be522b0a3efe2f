#!/usr/bin/env python3
"""`zeroshard checkpoint export --format hf-gpt2` against Hugging Face transformers.

Trains the tiny preset for a few steps over 3 workers (ZeRO-3, so the
checkpoint is sharded with padding), exports the committed checkpoint with
--format hf-gpt2, and loads the directory with
transformers.GPT2LMHeadModel.from_pretrained. Passes when:
  - loading reports no missing, unexpected or mismatched keys and no error,
    and transformers logs no warning about weights;
  - every parameter of the loaded model came from the file (the LM head is
    tied to wte);
  - its logits on a batch of byte tokens equal zeroshard's own C++ forward
    (tests/server/checkpoint/gpt_logits_tool, GptModel over the checkpoint's unit
    files, no export code) within 1e-4 in max absolute difference;
  - a negative control: swapping the q and k thirds of one c_attn makes the
    logits differ by more than 1e-3, so the comparison can fail.
Also: a bad --format is one line and exit 2.
Exits 77 with the reason when torch or transformers is missing
(scripts/setup-test-tools.sh installs them; scripts/test.sh runs it).
"""
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77
TOLERANCE = 1e-4  # Max absolute logit difference.
BIN = Path(os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"))


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
        print(f"FAIL: {message}", flush=True)
    return cond


def run(argv, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=150,
                          **kw)


def train_and_export(tmp):
    launch = run([BIN / "zeroshard", "launch", "--model", "tiny", "--workers", 3, "--stage", 3,
                  "--steps", 4, "--global-batch", 6, "--micro-batch", 2, "--threads", 1,
                  "--lr", 0.03, "--warmup-steps", 1, "--eval-every", 0, "--seed", 7,
                  "--checkpoint-dir", tmp / "ckpt", "--checkpoint-every", 4,
                  "--run-dir", tmp / "run"])
    if launch.returncode != 0:
        print(launch.stdout, launch.stderr)
        sys.exit("FAIL: zeroshard launch (tiny, 4 steps) failed")
    export = run([BIN / "zeroshard", "checkpoint", "export", "--format", "hf-gpt2",
                  "--checkpoint", tmp / "ckpt", "--out", tmp / "hf"])
    if export.returncode != 0:
        sys.exit(f"FAIL: export --format hf-gpt2 failed: {export.stderr.strip()}")
    print(export.stdout.strip())


def load_strictly(transformers, out_dir):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    transformers.logging.set_verbosity_warning()
    handler = Keep(level=logging.WARNING)
    logging.getLogger("transformers").addHandler(handler)
    model, info = transformers.GPT2LMHeadModel.from_pretrained(out_dir, output_loading_info=True)
    logging.getLogger("transformers").removeHandler(handler)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        check(not info.get(key), f"from_pretrained {key}: {info.get(key)}")
    for message in records:
        print(f"transformers warning: {message}")
        check(not any(w in message.lower() for w in ("weight", "initiali", "not used", "key")),
              f"transformers warned about weights: {message}")
    return model.eval()


def check_all_weights_from_file(model, out_dir):
    from safetensors import safe_open
    with safe_open(str(out_dir / "model.safetensors"), framework="pt") as f:
        stored = set(f.keys())
    params = {name for name, _ in model.named_parameters()}  # Tied: lm_head not listed.
    check(params == stored, f"model parameters {sorted(params ^ stored)} differ from the file")
    check(model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(),
          "lm_head is not tied to wte")


def zeroshard_logits(np, tmp, tokens):
    tokens.astype("<i4").tofile(tmp / "tokens.i32")
    res = run([BIN / "gpt_logits_tool", "--checkpoint", tmp / "ckpt", "--model", "tiny",
               "--tokens", tmp / "tokens.i32", "--batch", tokens.shape[0],
               "--out", tmp / "logits.f32"])
    if res.returncode != 0:
        sys.exit(f"FAIL: gpt_logits_tool: {res.stderr.strip()}")
    return np.fromfile(tmp / "logits.f32", dtype="<f4").reshape(*tokens.shape, 256)


def compare_logits(torch, np, model, tmp):
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 256, size=(3, 16), dtype=np.int64)  # B 3, T = n_ctx 16.
    want = zeroshard_logits(np, tmp, tokens)
    with torch.no_grad():
        got = model(torch.from_numpy(tokens)).logits.numpy()
    diff = float(np.abs(got - want).max())
    scale = float(np.abs(want).max())
    print(f"logits [3, 16, 256]: max |hf - zeroshard| = {diff:.3g} (max |logit| {scale:.3g})")
    check(scale > 1e-2, f"logits are near zero ({scale}); the comparison would be empty")
    check(diff <= TOLERANCE, f"logits differ by {diff} > {TOLERANCE}")
    # Negative control: q and k swapped in block 0 changes the function.
    w = model.transformer.h[0].attn.c_attn.weight
    with torch.no_grad():
        C = w.shape[0]
        w[:, :2 * C] = torch.cat([w[:, C:2 * C], w[:, :C]], dim=1).clone()
        swapped = model(torch.from_numpy(tokens)).logits.numpy()
    control = float(np.abs(swapped - want).max())
    check(control > 1e-3, f"swapping q and k changed the logits by only {control}")


def check_bad_format():
    res = run([BIN / "zeroshard", "checkpoint", "export", "--format", "onnx", "--checkpoint",
               "x", "--out", "y"])
    check(res.returncode == 2, f"--format onnx: exit {res.returncode}, want 2")
    lines = res.stderr.strip().splitlines()
    check(len(lines) == 1 and "--format" in res.stderr, f"--format onnx said {res.stderr!r}")


def main():
    try:
        import numpy as np
        import torch
        import transformers
    except ImportError as e:
        skip(f"python module {e.name} is missing (scripts/setup-test-tools.sh installs torch "
             "and transformers; scripts/test.sh runs it)")
    for tool in ("zeroshard", "gpt_logits_tool"):
        if not (BIN / tool).exists():
            skip(f"{BIN / tool} is not built")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="zs_hf_export_") as d:
        tmp = Path(d)
        train_and_export(tmp)
        model = load_strictly(transformers, tmp / "hf")
        check_all_weights_from_file(model, tmp / "hf")
        compare_logits(torch, np, model, tmp)
    check_bad_format()
    print(f"hf_gpt2_export_test: {0 if failures else 1} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
