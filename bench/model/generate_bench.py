#!/usr/bin/env python3
"""Generation speed with the KV cache: `zeroshard generate` ms per new token
after prompts of 64, 256 and 1,024 tokens (so the cache holds that many
positions), greedy, 32 new tokens, against transformers' generate (its own
KV cache, PyTorch on the CPU, the same threads) on the same random Llama
directory. Per-token time should stay flat as the position grows, the
attention's reads of the cache aside. Medians of --runs runs.

Usage: bench/model/generate_bench.py [--bin build/bin] [--runs 3]
       [--hidden 512] [--layers 8] [--threads 1]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def ours(bin_dir, model, prompt_ids, new, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    prompt = " ".join(["word"] * 1)
    r = subprocess.run([os.path.join(bin_dir, "zeroshard"), "generate", "--model", model,
                        "--prompt-file", prompt_ids, "--temperature", "0",
                        "--max-new-tokens", str(new), "--ids"], capture_output=True, text=True,
                       env=env, check=True)
    m = re.search(r"prompt (\d+) tokens .* then (\d+) tokens at ([0-9.]+) ms/token", r.stderr)
    return int(m.group(1)), float(m.group(3))


def reference(model, ids, new, threads):
    import torch
    import transformers
    torch.set_num_threads(threads)
    m = transformers.AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    x = torch.tensor([ids])
    with torch.no_grad():
        t0 = time.perf_counter()
        m.generate(x, max_new_tokens=1, do_sample=False, pad_token_id=0)
        t1 = time.perf_counter()
        m.generate(x, max_new_tokens=new + 1, do_sample=False, pad_token_id=0, min_new_tokens=new + 1)
        t2 = time.perf_counter()
    return ((t2 - t1) - (t1 - t0)) / new * 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--new", type=int, default=32)
    a = p.parse_args()
    from hf_synthetic import write_llama
    import tokenizer_assets as assets
    import transformers
    transformers.logging.set_verbosity_error()
    print(f"CPU: {cpu_model()}; Llama width {a.hidden}, {a.layers} layers, vocab 4096, "
          f"{a.threads} thread(s), {a.new} new tokens, median of {a.runs}")
    with tempfile.TemporaryDirectory(prefix="zs-genbench-") as tmp:
        model = os.path.join(tmp, "llama")
        write_llama(model, vocab=4096, hidden=a.hidden, inner=a.hidden * 8 // 3, layers=a.layers,
                    heads=a.hidden // 64, kv_heads=max(1, a.hidden // 256),
                    max_positions=2048)
        text = open(os.path.join(os.path.dirname(os.__file__), "argparse.py")).read()
        assets.trained_bpe([text], model, vocab_size=4000)
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        all_ids = tok.encode(text).ids
        print(f"{'prompt':>7} {'zeroshard ms/token':>19} {'transformers ms/token':>22} {'ratio':>6}")
        for n in (64, 256, 1024):
            ids = all_ids[:n]
            prompt_file = os.path.join(tmp, f"p{n}.txt")
            with open(prompt_file, "w") as f:
                f.write(tok.decode(ids))
            z = statistics.median(ours(a.bin, model, prompt_file, a.new, a.threads)[1]
                                  for _ in range(a.runs))
            r = statistics.median(reference(model, tok.encode(tok.decode(ids)).ids, a.new,
                                            a.threads) for _ in range(a.runs))
            print(f"{n:>7} {z:>19.2f} {r:>22.2f} {r / z:>6.2f}")


if __name__ == "__main__":
    main()
