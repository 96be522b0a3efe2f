#!/usr/bin/env python3
"""`zeroshard generate` against transformers' generate on the same model
directory and tokenizer:

- greedy (--temperature 0): the same 64 new token ids as
  generate(do_sample=False), for a Llama (GQA), a Qwen2 (q/k/v bias, tied
  head) and a Qwen3 (QK-norm, explicit head_dim) model built at random here,
  through the KV cache (the prompt once, then a token at a time);
- the printed text is the tokenizer's decoding of those ids (HF tokenizers);
- sampling with a seed repeats exactly, and another seed gives other tokens;
- a prompt the context cannot hold is refused (exit 2, one line).

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
    code, _, err = generate(model, "--max-new-tokens", "4", prompt="word " * 400)
    check(code == 2 and len(err.strip().splitlines()) == 1 and "context" in err,
          f"a prompt the context cannot hold is refused: {err.strip()[-200:]}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-generate-") as d:
        sys.exit(main(d))
