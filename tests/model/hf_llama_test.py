#!/usr/bin/env python3
"""zeroshard's llama-family model against Hugging Face transformers.

Builds tiny random models offline with transformers (from a config, no
download), perturbs every parameter so norms and biases matter, saves them
with save_pretrained (some sharded behind model.safetensors.index.json, one
in BF16, one with a hand-written config.json in transformers 4's key style),
and runs tests/model/hf_model_tool (LlamaModel over zeroshard's own loaders)
on the same token ids. Passes when, for every model:
  - zeroshard's fp32 logits equal transformers' within 1e-4 of their largest
    magnitude;
  - the mean cross-entropy equals torch's within 1e-5 relative, and every
    parameter's gradient equals torch autograd's within 1e-5 of that
    gradient's largest magnitude (tied models: the embedding's gradient
    holds both uses, as torch's does);
  - a head split into chunks of 5 tokens gives the same logits and
    gradients as one chunk (1e-6);
and the negative control holds: transformers with another rope_theta gives
logits more than 1e-3 away, so the comparison can fail.
Exits 77 with the reason when torch or transformers is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
from checks import check, finish, skip  # noqa: E402

BIN = Path(os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"))
B, T = 2, 11


try:
    import torch
    import transformers
    from safetensors.torch import load_file
except ImportError as e:  # scripts/setup-test-tools.sh installs them.
    skip(f"torch, transformers or safetensors missing ({e})")
transformers.logging.set_verbosity_error()
torch.manual_seed(0)

SMALL = dict(vocab_size=96, hidden_size=64, intermediate_size=88, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=64)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
MODELS = {
    "llama-gqa-llama3": (transformers.LlamaConfig, dict(num_key_value_heads=2,
                                                        rope_scaling=LLAMA3)),
    "llama32-tied": (transformers.LlamaConfig, dict(num_key_value_heads=1, rope_scaling=LLAMA3,
                                                    tie_word_embeddings=True,
                                                    rope_theta=500000.0)),
    "qwen2-bias-tied": (transformers.Qwen2Config, dict(num_key_value_heads=2,
                                                       tie_word_embeddings=True)),
    "qwen3-qknorm": (transformers.Qwen3Config, dict(num_key_value_heads=2, head_dim=24)),
    "mistral": (transformers.MistralConfig, dict(num_key_value_heads=2, sliding_window=None)),
}


def perturbed(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    return model


def build(tmp, name, cls_config, extra, dtype=torch.float32, shard="40KB"):
    config = cls_config(**SMALL, **extra)
    model = perturbed(transformers.AutoModelForCausalLM.from_config(config)).to(dtype)
    if config.tie_word_embeddings:
        model.tie_weights()
    out = tmp / name
    model.save_pretrained(out, max_shard_size=shard)
    return out


def older_style(path):
    """Rewrites config.json in transformers 4's keys (rope_theta, rope_scaling, torch_dtype)."""
    cfg = json.loads((path / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = dict(rope, type=rope.pop("rope_type"))
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    (path / "config.json").write_text(json.dumps(cfg, indent=2))


def reference(path, tokens, edit=None):
    config = transformers.AutoConfig.from_pretrained(path)
    if edit is not None:
        edit(config)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=config,
                                                              dtype=torch.float32)
    model.eval()
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def zeroshard(path, tokens, tmp, chunk=0):
    tok_file, out = tmp / "tokens.bin", tmp / f"out{chunk}.safetensors"
    tokens.to(torch.int32).numpy().tofile(tok_file)
    argv = [BIN / "hf_model_tool", "--model", path, "--tokens", tok_file, "--batch", B,
            "--out", out, "--head-chunk", chunk]
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        check(False, f"{path.name}: hf_model_tool exit {r.returncode}: {r.stderr.strip()}")
        return None
    return load_file(out)


def rel(a, b):
    return float((a - b).abs().max() / max(b.abs().max(), 1e-30))


def compare(name, path, tmp, tokens):
    logits, loss, grads = reference(path, tokens)
    z = zeroshard(path, tokens, tmp)
    if z is None:
        return
    check(rel(z["logits"], logits) <= 1e-4, f"{name}: logits within 1e-4 ({rel(z['logits'], logits):.2e})")
    check(rel(z["loss"], loss.reshape(1)) <= 1e-5, f"{name}: loss {float(z['loss'][0]):.7f} vs torch {float(loss):.7f}")
    worst = max((rel(z["grad." + n], g), n) for n, g in grads.items() if "grad." + n in z)
    missing = [n for n in grads if "grad." + n not in z]
    check(not missing, f"{name}: every torch parameter has a zeroshard gradient (missing {missing})")
    check(worst[0] <= 1e-5, f"{name}: every gradient within 1e-5 (worst {worst[0]:.2e}, {worst[1]})")
    return z


def main():
    if not (BIN / "hf_model_tool").exists():
        skip(f"{BIN}/hf_model_tool is not built")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tokens = torch.randint(0, SMALL["vocab_size"], (B, T + 1))
        for name, (cls, extra) in MODELS.items():
            path = build(tmp, name, cls, extra)
            z = compare(name, path, tmp, tokens)
            if name == "llama-gqa-llama3":
                check(len(list(path.glob("model-*.safetensors"))) > 1,
                      f"{name}: saved as several shards behind an index")
                chunked = zeroshard(path, tokens, tmp, chunk=5)
                if z is not None and chunked is not None:
                    worst = max(rel(chunked[k], z[k]) for k in z)
                    check(worst <= 1e-6, f"{name}: head chunks of 5 tokens = one chunk ({worst:.2e})")
                logits, _, _ = reference(
                    path, tokens, edit=lambda c: c.rope_parameters.update(rope_theta=20000.0))
                if z is not None:
                    check(rel(z["logits"], logits) > 1e-3,
                          f"control: another rope_theta moves the logits ({rel(z['logits'], logits):.2e})")
        bf16 = build(tmp, "llama-bf16", transformers.LlamaConfig,
                     dict(num_key_value_heads=2), dtype=torch.bfloat16, shard="10GB")
        check(json.loads((bf16 / "config.json").read_text()).get("dtype") == "bfloat16",
              "bf16 model saved in BF16")
        compare("llama-bf16", bf16, tmp, tokens)
        old = build(tmp, "llama-older-keys", transformers.LlamaConfig,
                    dict(num_key_value_heads=2, rope_scaling=LLAMA3))
        older_style(old)
        compare("llama-older-keys", old, tmp, tokens)
    sys.exit(finish())


main()
