#!/usr/bin/env python3
"""Prompt/completion fine-tuning counts the completion only, as PyTorch does:

- the first step's loss (the model as loaded, before any update) equals the
  transformers model's cross entropy on the same batch with the prompt and
  padding positions ignored (ignore_index, labels = -100), within 1e-5
  relative. The batch is rebuilt here as zeroshard's sampler draws it
  (SplitMix64 over seed, split, step and sample; worker/data/batch_sampler.h)
  from the pairs tokenized by HF tokenizers, which equal zeroshard's ids
  (tokenizer_parity_test);
- N = 1, 2 and 4 at stages 0-3 give every step the losses of N = 1 stage 0
  within 1e-5 relative, and the same counted tokens, fewer than batch x
  context (the prompts and padding do not count);
- a prompt that leaves no completion token inside the context, and a line
  without "completion", are refused naming FILE:LINE.

A small random Llama directory (tests/support/hf_synthetic.py, fp32 read
back by transformers) with a byte-level BPE trained here. Skipped (77)
without torch, transformers or tokenizers.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))
T, G, SEED, STEPS = 32, 4, 1234, 3
M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_words(words):
    h = 0x6A09E667F3BCC908
    for w in words:
        h = splitmix64(h ^ splitmix64(w))
    return h


def launch(tmp, model, data, workers, stage, steps=STEPS):
    run_dir = os.path.join(tmp, f"run-{workers}-{stage}")
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "launch", "--model", model, "--workers",
                        str(workers), "--stage", str(stage), "--steps", str(steps),
                        "--global-batch", str(G), "--micro-batch", "2", "--seq-len", str(T),
                        "--data", data, "--run-dir", run_dir], capture_output=True, text=True,
                       timeout=240)
    log = os.path.join(run_dir, "steps.jsonl")
    rows = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
    return r, [(x["loss"], x.get("counted_tokens")) for x in rows if "loss" in x]


def write_pairs(path, seed, n=40):
    rng = random.Random(seed)
    words = "the of and to in is was that for on with as by at from it be".split()
    pairs = []
    with open(path, "w") as f:
        for _ in range(n):
            p = "Q: " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\nA:"
            c = " " + " ".join(rng.choice(words) for _ in range(rng.randint(2, 24)))
            pairs.append((p, c))
            f.write(json.dumps({"prompt": p, "completion": c}) + "\n")
    return pairs


def reference_first_loss(model_dir, pairs):
    """transformers' loss on step 0's batch, prompts and padding ignored."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    samples = []
    for p, c in pairs:
        pi, ci = tok.encode(p).ids, tok.encode(c).ids
        samples.append((pi + ci + [eos], max(len(pi), 1)))
    n_val = max(1, int(len(samples) * 0.05))
    train = samples[:len(samples) - n_val]
    inputs, targets = [], []
    for i in range(G):
        ids, counted_from = train[hash_words([SEED, 0, 0, i]) % len(train)]
        n = min(len(ids), T + 1)
        inputs.append([ids[t] if t < n else 0 for t in range(T)])
        targets.append([ids[t + 1] if t + 1 < n and t + 1 >= counted_from else -100
                        for t in range(T)])
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.double()
    labels = torch.tensor(targets)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                             ignore_index=-100)
    return float(loss), int((labels != -100).sum())


def main(tmp):
    try:
        import torch  # noqa: F401
        import transformers
        from hf_synthetic import write_llama
        import tokenizer_assets as assets
    except ImportError as e:
        skip(f"a reference is missing: {e}")
    transformers.logging.set_verbosity_error()
    model = os.path.join(tmp, "llama")
    write_llama(model, vocab=512, hidden=64, inner=128, layers=2, heads=4, kv_heads=2,
                max_positions=64)
    data = os.path.join(tmp, "pairs.jsonl")
    pairs = write_pairs(data, 5)
    words = [p + c for p, c in pairs]
    assets.trained_bpe(words * 4, model, vocab_size=400)

    r, base = launch(tmp, model, data, 1, 0)
    check(r.returncode == 0 and len(base) == STEPS, f"N=1 stage 0 trains: {r.stderr[-300:]}")
    if not base:
        return finish()
    ref, counted = reference_first_loss(model, pairs)
    rel = abs(base[0][0] - ref) / abs(ref)
    check(rel <= 1e-5 and base[0][1] == counted,
          f"step 0: loss {base[0][0]:.7f} vs transformers {ref:.7f} (relative {rel:.1e}), "
          f"counted tokens {base[0][1]} vs {counted} of {G * T}")
    check(all(c < G * T for _, c in base), f"prompts and padding are not counted: {base}")
    for workers, stage in ((2, 1), (2, 3), (4, 2), (4, 3)):
        _, got = launch(tmp, model, data, workers, stage)
        worst = max((abs(a[0] - b[0]) / abs(b[0]) for a, b in zip(got, base)), default=1.0)
        check(len(got) == STEPS and worst <= 1e-5 and [c for _, c in got] == [c for _, c in base],
              f"N={workers} stage {stage}: worst relative difference {worst:.1e}")

    long_prompt = os.path.join(tmp, "long.jsonl")
    with open(long_prompt, "w") as f:
        f.write(json.dumps({"prompt": "a", "completion": "b"}) + "\n")
        f.write(json.dumps({"prompt": " the" * 200, "completion": " of"}) + "\n")
    r, _ = launch(tmp, model, long_prompt, 1, 0, steps=1)
    check(r.returncode == 2 and f"{long_prompt}:2" in r.stderr and "context" in r.stderr,
          f"a prompt longer than the context is refused: {r.stderr.strip()[-300:]}")
    no_completion = os.path.join(tmp, "nocompletion.jsonl")
    with open(no_completion, "w") as f:
        f.write(json.dumps({"prompt": "a"}) + "\n")
    r, _ = launch(tmp, model, no_completion, 1, 0, steps=1)
    check(r.returncode == 2 and f"{no_completion}:1" in r.stderr and '"completion"' in r.stderr,
          f"a line without completion is refused: {r.stderr.strip()[-300:]}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-masked-") as d:
        sys.exit(main(d))
