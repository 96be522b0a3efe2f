#!/usr/bin/env python3
"""`zeroshard generate` against transformers' generate on the same model
directory and tokenizer:

- greedy (--temperature 0): the same 64 new token ids as
  generate(do_sample=False), for a Llama (GQA), a Qwen2 (q/k/v bias, tied
  head) and a Qwen3 (QK-norm, explicit head_dim) model built at random here,
  through the KV cache (the prompt once, then a token at a time);
- the printed text is the tokenizer's decoding of those ids (HF tokenizers);
- sampling with a seed repeats exactly, and another seed gives other tokens;
- a prompt the context cannot hold is refused (exit 2, one line);
- --checkpoint: a `small` preset (bytes, 200 steps) and a Llama directory
  (2 steps), each trained at N = 2 with a checkpoint, give the greedy ids
  transformers generates from the checkpoint's export (--format hf).

The tokenizer is a byte-level BPE trained here. Skipped (77) without torch,
transformers or tokenizers.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))
PROMPT = "def main(argv):\n    "


def generate(model, *args, prompt=PROMPT):
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "generate", "--model", model,
                        "--prompt", prompt, *args], capture_output=True, timeout=120)
    return r.returncode, r.stdout.decode("utf-8", errors="replace"), r.stderr.decode()


def reference(model_dir, tok, n):
    import torch
    import transformers
    ids = tok.encode(PROMPT).ids
    m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    eos = tok.token_to_id("<|endoftext|>")
    out = m.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                     eos_token_id=eos, pad_token_id=eos)
    return out[0][len(ids):].tolist()


def make_models(tmp, texts):
    import torch
    import transformers
    import tokenizer_assets as assets
    from hf_synthetic import write_llama
    llama = os.path.join(tmp, "llama")
    write_llama(llama, vocab=1024, hidden=64, inner=128, layers=2, heads=4, kv_heads=2,
                max_positions=256, seed=3)
    assets.trained_bpe(texts, llama, vocab_size=1000)
    torch.manual_seed(5)
    qwen = os.path.join(tmp, "qwen2")
    config = transformers.Qwen2Config(vocab_size=1024, hidden_size=64, intermediate_size=96,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=256,
                                      tie_word_embeddings=True)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(qwen)
    assets.trained_bpe(texts, qwen, vocab_size=1000)
    qwen3 = os.path.join(tmp, "qwen3")
    config = transformers.Qwen3Config(vocab_size=1024, hidden_size=64, intermediate_size=96,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=24,
                                      max_position_embeddings=256, tie_word_embeddings=False)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(qwen3)
    assets.trained_bpe(texts, qwen3, vocab_size=1000)
    return {"Llama": llama, "Qwen2": qwen, "Qwen3": qwen3}


def check_checkpoints(tmp, llama):
    """generate --checkpoint against transformers on the checkpoint's export."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    zs = os.path.join(BIN, "zeroshard")
    for name, model in (("small", "small"), ("llama", llama)):
        ck, hf = os.path.join(tmp, f"ck-{name}"), os.path.join(tmp, f"hf-{name}")
        # The preset trains long enough to say more than one byte over and over.
        steps = "2" if name == "llama" else "200"
        seq = ["--seq-len", "64"] if name == "llama" else []
        subprocess.run([zs, "launch", "--model", model, "--workers", "2", "--steps", steps, *seq,
                        "--data", os.path.join(ROOT, "README.md"), "--checkpoint-dir", ck,
                        "--checkpoint-every", steps, "--run-dir", os.path.join(tmp, f"run-{name}")],
                       capture_output=True, timeout=240, check=True)
        subprocess.run([zs, "checkpoint", "export", "--checkpoint", ck, "--format", "hf", "--out", hf],
                       capture_output=True, timeout=120, check=True)
        prompt = "The coordinator " if name == "small" else PROMPT  # Prose for README's model.
        r = subprocess.run([zs, "generate", "--checkpoint", ck, "--prompt", prompt, "--temperature",
                            "0", "--max-new-tokens", "40", "--ids"], capture_output=True,
                           text=True, timeout=120)
        got = [int(x) for x in r.stdout.split()]
        ids = (list(prompt.encode()) if name == "small" else
               Tokenizer.from_file(os.path.join(llama, "tokenizer.json")).encode(prompt).ids)
        m = transformers.AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32)
        want = m.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False,
                          pad_token_id=0, eos_token_id=None)[0][len(ids):].tolist()
        if name == "llama":  # Ours stops at the tokenizer's EOS; HF was told of none.
            eos = Tokenizer.from_file(os.path.join(llama, "tokenizer.json")).token_to_id("<|endoftext|>")
            want = want[:want.index(eos) + 1] if eos in want else want
        check(r.returncode == 0 and got == want and len(set(got)) > 1,
              f"--checkpoint ({name}): greedy ids equal transformers' on its export "
              f"({len(got)} tokens){'' if got == want else f': {got[:10]} vs {want[:10]}'} "
              f"{r.stderr[-200:]}")


def main(tmp):
    try:
        import torch  # noqa: F401
        import transformers
        from tokenizers import Tokenizer
    except ImportError as e:
        skip(f"a reference is missing: {e}")
    transformers.logging.set_verbosity_error()
    texts = [open(os.path.join(os.path.dirname(os.__file__), f)).read()
             for f in ("os.py", "argparse.py")]
    for name, model in make_models(tmp, texts).items():
        tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        want = reference(model, tok, 64)
        code, out, err = generate(model, "--temperature", "0", "--max-new-tokens", "64", "--ids")
        got = [int(x) for x in out.split()]
        check(code == 0 and got == want, f"{name}: greedy ids equal transformers' generate "
              f"({len(want)} tokens){'' if got == want else f': {got[:12]} vs {want[:12]}'} {err[-200:]}")
        code, text, _ = generate(model, "--temperature", "0", "--max-new-tokens", "64")
        eos = tok.token_to_id("<|endoftext|>")
        expected = tok.decode([i for i in want if i != eos], skip_special_tokens=False)
        check(code == 0 and text == expected + "\n", f"{name}: the text is their decoding")
    model = os.path.join(tmp, "llama")
    runs = [generate(model, "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95",
                     "--seed", s, "--ids", "--max-new-tokens", "48")[1] for s in ("7", "7", "8")]
    check(runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0].split()) > 0,
          "sampling with a seed repeats; another seed differs")
    check_checkpoints(tmp, model)
    code, _, err = generate(model, "--max-new-tokens", "4", prompt="word " * 400)
    check(code == 2 and len(err.strip().splitlines()) == 1 and "context" in err,
          f"a prompt the context cannot hold is refused: {err.strip()[-200:]}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-generate-") as d:
        sys.exit(main(d))
