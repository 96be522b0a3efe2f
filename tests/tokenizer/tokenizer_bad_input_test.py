#!/usr/bin/env python3
"""Bad inputs to the tokenizer and token-data paths: each is refused with exit
2 and one line naming the file and the place.

- `zeroshard tokenize`: a truncated tokenizer.json (the byte where parsing
  stopped), a tokenizer.json of an unsupported kind (model.type), a JSONL
  line that is not JSON (FILE:LINE), a JSONL line without "text";
- `zeroshard launch --data`: a token file with a wrong header, one whose
  body is truncated, one holding an id at or above the model's vocabulary
  (the token's index and value).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from checks import check, finish  # noqa: E402
from tokenizer_assets import bytes_to_unicode  # noqa: E402

BIN = os.environ.get("ZEROSHARD_BIN_DIR", os.path.join(ROOT, "build", "bin"))


def tiny_tokenizer_json():
    """A byte-level BPE of the 256 byte tokens and one merge ("h" "i")."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    vocab["hi"] = 256
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["h i"]}}


def refused(cmd, must_contain, what):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    err = r.stderr.strip()
    lines = err.splitlines()
    check(r.returncode == 2 and len(lines) == 1 and all(s in err for s in must_contain),
          f"{what}: exit {r.returncode}, {len(lines)} line(s): {err[-300:]!r}")


def main(tmp):
    zs = os.path.join(BIN, "zeroshard")
    text = os.path.join(tmp, "a.txt")
    open(text, "w").write("hi there\n")
    good = os.path.join(tmp, "good.json")
    json.dump(tiny_tokenizer_json(), open(good, "w"))
    r = subprocess.run([zs, "tokenize", text, "--tokenizer", good, "--out",
                        os.path.join(tmp, "ok.bin")], capture_output=True, text=True)
    check(r.returncode == 0, f"the tiny tokenizer works: {r.stderr.strip()}")

    truncated = os.path.join(tmp, "truncated.json")
    open(truncated, "w").write(open(good).read()[:500])
    refused([zs, "tokenize", text, "--tokenizer", truncated, "--out", os.path.join(tmp, "x.bin")],
            [truncated, "at byte"], "truncated tokenizer.json")
    wordpiece = tiny_tokenizer_json()
    wordpiece["model"]["type"] = "WordPiece"
    wp = os.path.join(tmp, "wordpiece.json")
    json.dump(wordpiece, open(wp, "w"))
    refused([zs, "tokenize", text, "--tokenizer", wp, "--out", os.path.join(tmp, "x.bin")],
            [wp, "model.type"], "tokenizer.json of another kind")

    bad_line = os.path.join(tmp, "bad.jsonl")
    open(bad_line, "w").write('{"text": "a"}\n{"text": "b"}\n{"text": oops}\n')
    refused([zs, "tokenize", bad_line, "--tokenizer", good, "--out", os.path.join(tmp, "x.bin")],
            [f"{bad_line}:3", "not a JSON object"], "JSONL line that does not parse")
    no_text = os.path.join(tmp, "notext.jsonl")
    open(no_text, "w").write('{"prompt": "a", "completion": "b"}\n')
    refused([zs, "tokenize", no_text, "--tokenizer", good, "--out", os.path.join(tmp, "x.bin")],
            [f"{no_text}:1", '"text"'], "JSONL line without the text field")

    header = struct.pack("<256i", *([20240520, 1, 4] + [0] * 253))
    cases = {
        "header.bin": (struct.pack("<256i", *([12345, 1, 4] + [0] * 253)) + b"\0" * 8,
                       ["magic 12345 version 1"]),
        "short.bin": (header + struct.pack("<3H", 1, 2, 3), ["truncated"]),
        "vocab.bin": (header + struct.pack("<4H", 1, 2, 300, 4),
                      ["token 2 is 300", "vocabulary of 256"]),
    }
    for name, (data, words) in cases.items():
        path = os.path.join(tmp, name)
        open(path, "wb").write(data)
        refused([zs, "launch", "--model", "tiny", "--workers", "1", "--steps", "2", "--data", path,
                 "--run-dir", os.path.join(tmp, "run")], [path] + words,
                f"launch --data {name}")
    return finish()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="zs-tokbad-") as d:
        sys.exit(main(d))
