#!/usr/bin/env python3
"""Fine-tune a Hugging Face model directory with zeroshard, resume, export, load.

Two tiny random models saved by transformers (offline, from a config): a
Llama with grouped-query attention and llama3 rope scaling, untied, and a
Qwen2 with q/k/v biases and a tied head. For each, zeroshard launch trains
it from its weights (--model DIR, 2 workers, ZeRO-3, a checkpoint at steps
3 and 6). Passes when:
  - a second launch resumed from step 3 gives steps 4-6 the same losses to
    the last bit;
  - `zeroshard checkpoint export --format hf` (shards under a small
    --max-shard-size, so with an index) loads in transformers'
    AutoModelForCausalLM with no missing, unexpected or mismatched keys;
  - its logits equal zeroshard's own forward over the checkpoint
    (tests/server/checkpoint/gpt_logits_tool: LlamaModel over the unit files, no
    export code) within 1e-4 of their largest magnitude, and differ from
    the model before fine-tuning by more than 1e-3 (training moved it);
  - the tied model stays tied: no lm_head.weight written, the config says
    tie_word_embeddings, and transformers' head is its embedding;
  - --dtype bf16 writes BF16 tensors whose logits stay within 2e-2.
Exits 77 with the reason when torch or transformers is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from checks import check, finish, skip  # noqa: E402

BIN = Path(os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"))
T = 16

try:
    import numpy as np
    import torch
    import transformers
    from safetensors import safe_open
except ImportError as e:
    skip(f"torch, transformers, numpy or safetensors missing ({e})")
transformers.logging.set_verbosity_error()


def run(argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=200)


def build(path, cls, **extra):
    torch.manual_seed(1)
    config = cls(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                 **extra)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path, max_shard_size="60KB")
    return model


def launch(model_dir, ckpt, run_dir, extra=()):
    r = run([BIN / "zeroshard", "launch", "--model", model_dir, "--workers", 2, "--stage", 3,
             "--steps", 6, "--seq-len", T, "--global-batch", 4, "--micro-batch", 2,
             "--threads", 1, "--lr", 3e-3, "--warmup-steps", 1, "--eval-every", 0,
             "--checkpoint-dir", ckpt, "--checkpoint-every", 3, "--run-dir", run_dir, *extra])
    if not check(r.returncode == 0, f"launch {model_dir.name} {' '.join(extra)}: exit "
                 f"{r.returncode}"):
        print(r.stdout[-3000:], r.stderr[-3000:])
        return {}
    with open(run_dir / "steps.jsonl") as f:
        return {rec["step"]: rec["loss"] for rec in map(json.loads, f) if "loss" in rec}


def export(ckpt, out, dtype="fp32"):
    r = run([BIN / "zeroshard", "checkpoint", "export", "--checkpoint", ckpt, "--format", "hf",
             "--out", out, "--max-shard-size", "40KB", "--dtype", dtype])
    check(r.returncode == 0, f"export --dtype {dtype}: {r.stdout.strip()} {r.stderr.strip()}")


def load(out):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        out, output_loading_info=True, dtype=torch.float32)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        check(not info.get(key), f"{out.name}: from_pretrained {key}: {info.get(key)}")
    return model.eval()


def stored_names(out):
    names = {}
    for f in out.glob("model*.safetensors"):
        with safe_open(str(f), framework="pt") as s:
            for k in s.keys():
                names[k] = s.get_slice(k).get_dtype()
    return names


def zeroshard_logits(ckpt, tmp, tokens):
    tokens.astype("<i4").tofile(tmp / "tokens.i32")
    r = run([BIN / "gpt_logits_tool", "--checkpoint", ckpt, "--tokens", tmp / "tokens.i32",
             "--batch", tokens.shape[0], "--out", tmp / "logits.f32"])
    check(r.returncode == 0, f"gpt_logits_tool: {r.stderr.strip()}")
    return np.fromfile(tmp / "logits.f32", dtype="<f4").reshape(*tokens.shape, -1)


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def case(tmp, name, cls, tied, **extra):
    src = tmp / name
    before = build(src, cls, tie_word_embeddings=tied, **extra).eval()
    ckpt = tmp / f"{name}-ckpt"
    full = launch(src, ckpt, tmp / f"{name}-run")
    resumed = launch(src, ckpt, tmp / f"{name}-resume", ("--resume-step", "3"))
    check(len(full) == 6 and all(resumed.get(s) == full.get(s) for s in (4, 5, 6)),
          f"{name}: resumed steps 4-6 bit-equal ({[resumed.get(s) for s in (4, 5, 6)]} vs "
          f"{[full.get(s) for s in (4, 5, 6)]})")
    out = tmp / f"{name}-hf"
    export(ckpt, out)
    check((out / "model.safetensors.index.json").exists() and
          len(list(out.glob("model-*.safetensors"))) > 1, f"{name}: sharded behind an index")
    model = load(out)
    tokens = np.random.default_rng(5).integers(0, 320, size=(2, T), dtype=np.int64)
    want = zeroshard_logits(ckpt, tmp, tokens)
    with torch.no_grad():
        got = model(torch.from_numpy(tokens)).logits.numpy()
        untrained = before(torch.from_numpy(tokens)).logits.numpy()
    check(rel(got, want) <= 1e-4, f"{name}: exported logits = zeroshard's ({rel(got, want):.2e})")
    check(rel(untrained, want) > 1e-3, f"{name}: fine-tuning moved the logits "
          f"({rel(untrained, want):.2e})")
    names = stored_names(out)
    if tied:
        check("lm_head.weight" not in names, f"{name}: tied, no lm_head.weight written")
        check(json.loads((out / "config.json").read_text())["tie_word_embeddings"] is True,
              f"{name}: config keeps tie_word_embeddings")
        check(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
              f"{name}: transformers ties the head to the embedding")
    bf16 = tmp / f"{name}-hf-bf16"
    export(ckpt, bf16, "bf16")
    check(set(stored_names(bf16).values()) == {"BF16"}, f"{name}: --dtype bf16 writes BF16")
    with torch.no_grad():
        half = load(bf16)(torch.from_numpy(tokens)).logits.numpy()
    check(rel(half, want) <= 2e-2, f"{name}: bf16 logits within 2e-2 ({rel(half, want):.2e})")


def main():
    if not (BIN / "zeroshard").exists() or not (BIN / "gpt_logits_tool").exists():
        skip(f"{BIN}/zeroshard or gpt_logits_tool is not built")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        case(tmp, "llama", transformers.LlamaConfig, False,
             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
        case(tmp, "qwen2", transformers.Qwen2Config, True)
    sys.exit(finish())


main()
