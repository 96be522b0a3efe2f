"""Varied text for the tokenizer tests and bench, made deterministically
from a seed: source code (this Python's standard library), English prose
(its docstrings and Debian's docs), synthetic prose in several scripts
(Latin with diacritics, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai,
CJK, Hangul, some of it decomposed so NFC has work), emoji (skin tones, ZWJ
sequences, flags), whitespace runs (spaces, tabs, CR LF, no-break and
ideographic spaces), digit runs, contractions and special-token strings.

Only code points assigned by Unicode 13 are drawn, so the regex engines'
Unicode tables (PCRE2's, Oniguruma's) agree on them.
"""
import glob
import json
import os
import random
import sysconfig
import unicodedata

SCRIPTS = [
    ("latin", [(0x61, 0x7A), (0xE0, 0xFF), (0x100, 0x17F)]),
    ("greek", [(0x3B1, 0x3C9)]),
    ("cyrillic", [(0x430, 0x44F)]),
    ("arabic", [(0x621, 0x64A)]),
    ("hebrew", [(0x5D0, 0x5EA)]),
    ("devanagari", [(0x905, 0x939), (0x93E, 0x94C)]),
    ("thai", [(0xE01, 0xE30)]),
    ("cjk", [(0x4E00, 0x9FA5)]),
    ("hangul", [(0xAC00, 0xD7A3)]),
]
EMOJI = ["😀", "🚀", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "🧑‍🤝‍🧑", "🎉", "🐍", "✨"]
SPECIALS = ["<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>",
            "<s>", "</s>", "<|extra_7|>"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "    \n\t "]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re"]


def _word(rng, ranges):
    lo, hi = rng.choice(ranges)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9)))


def _synthetic(rng, size):
    out, n = [], 0
    while n < size:
        r = rng.random()
        if r < 0.55:
            piece = _word(rng, rng.choice(SCRIPTS)[1])
            if rng.random() < 0.1:
                piece = unicodedata.normalize("NFD", piece)
        elif r < 0.62:
            piece = rng.choice(EMOJI)
        elif r < 0.70:
            piece = str(rng.randint(0, 10 ** rng.randint(1, 14)))
        elif r < 0.74:
            piece = rng.choice(SPECIALS)
        elif r < 0.80:
            piece = rng.choice(CONTRACTIONS)
        elif r < 0.88:
            piece = rng.choice(".,;:!?()[]{}-—–…\"'/\\@#$%^&*_+=<>|~`")
        else:
            piece = rng.choice(SPACES)
        out.append(piece)
        if rng.random() < 0.7:
            out.append(" ")
        n += len(piece.encode()) + 1
    return "".join(out)


def _files(patterns, limit):
    texts, n = [], 0
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            try:
                with open(path, encoding="utf-8") as f:
                    t = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            if t:
                texts.append(t)
                n += len(t.encode())
            if n >= limit:
                return texts
    return texts


def documents(total_bytes=10_500_000, seed=37):
    """A list of documents (str) of about total_bytes UTF-8 bytes."""
    rng = random.Random(seed)
    stdlib = sysconfig.get_paths()["stdlib"]
    code = _files([os.path.join(stdlib, "*.py"), os.path.join(stdlib, "*/*.py")],
                  total_bytes * 4 // 10)
    prose = _files(["/usr/share/doc/*/README*", "/usr/share/doc/*/*.txt",
                    "/usr/share/common-licenses/*"], total_bytes * 2 // 10)
    docs = code + prose
    n = sum(len(d.encode()) for d in docs)
    while n < total_bytes:
        d = _synthetic(rng, rng.randint(200, 20000))
        docs.append(d)
        n += len(d.encode())
    rng.shuffle(docs)
    return docs


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
