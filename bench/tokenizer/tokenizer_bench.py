#!/usr/bin/env python3
"""Tokenizer speed: `zeroshard tokenize` against HF `tokenizers` (its batch
encode) and `tiktoken` (its batch encode) on the same 10.5 MB of varied text
(tests/support/tokenizer_corpus.py), in the same run, at 1 thread and at
every thread. Each figure is the median of --runs runs; each tool's time
covers encoding only (vocabulary loading excluded: zeroshard's own timer
starts after it loads, and the references are loaded before timing).

Vocabularies (tests/support/tokenizer_assets.py, fetched into a cache):
Llama 3's tokenizer.json for zeroshard and HF, the same ranks for tiktoken
(Llama 3's pattern and specials); GPT-2's likewise.

Usage: bench/tokenizer/tokenizer_bench.py [--bin build/bin] [--runs 3]
       [--vocab llama3,gpt2]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import tokenizer_assets as assets  # noqa: E402
import tokenizer_corpus as corpus  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def ours(bin_dir, tok_dir, jsonl, threads, tmp):
    """(tokens, encode seconds) from zeroshard tokenize's own summary."""
    r = subprocess.run([os.path.join(bin_dir, "zeroshard"), "tokenize", jsonl, "--tokenizer",
                        tok_dir, "--out", os.path.join(tmp, "b.bin"), "--threads", str(threads)],
                       capture_output=True, text=True, check=True)
    m = re.search(r"(\d+) tokens .* in ([0-9.]+) s", r.stdout)
    return int(m.group(1)), float(m.group(2))


def run_py(code, args, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    r = subprocess.run([sys.executable, "-c", code] + args, capture_output=True, text=True,
                       env=env, check=True)
    n, s = r.stdout.split()
    return int(n), float(s)


HF_CODE = ("import sys, time, json\nfrom tokenizers import Tokenizer\n"
           "t = Tokenizer.from_file(sys.argv[1]); docs = json.load(open(sys.argv[2]))\n"
           "s = time.perf_counter(); n = sum(len(e.ids) for e in t.encode_batch(docs))\n"
           "print(n, time.perf_counter() - s)")
TIKTOKEN_CODE = (
    "import sys, time, json, tiktoken\n"
    "spec = json.load(open(sys.argv[1])); docs = json.load(open(sys.argv[2]))\n"
    "sys.path.insert(0, sys.argv[5]); import tokenizer_assets as a\n"
    "u2b = {v: k for k, v in a.bytes_to_unicode().items()}\n"
    "ranks = {bytes(u2b[c] for c in t): i for t, i in spec['model']['vocab'].items()}\n"
    "sp = {t['content']: t['id'] for t in spec['added_tokens']}\n"
    "e = tiktoken.Encoding('x', pat_str=sys.argv[3], mergeable_ranks=ranks, special_tokens=sp)\n"
    "s = time.perf_counter()\n"
    "n = sum(len(x) for x in e.encode_batch(docs, num_threads=int(sys.argv[4]),"
    " allowed_special='all'))\n"
    "print(n, time.perf_counter() - s)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--vocab", default="llama3,gpt2")
    a = p.parse_args()
    docs = corpus.documents()
    size = sum(len(d.encode()) for d in docs)
    cores = os.cpu_count()
    print(f"CPU: {cpu_model()}, {cores} cores; text {size / 1e6:.1f} MB, {len(docs)} documents,"
          f" median of {a.runs} runs")
    with tempfile.TemporaryDirectory(prefix="zs-tokbench-") as tmp:
        jsonl = os.path.join(tmp, "c.jsonl")
        corpus.write_jsonl(jsonl, docs)
        docs_json = os.path.join(tmp, "docs.json")
        json.dump(docs, open(docs_json, "w"))
        fetch = {"llama3": (assets.llama3, LLAMA3_PATTERN), "gpt2": (assets.gpt2, assets.GPT2_PATTERN)}
        print(f"{'vocab':7} {'threads':>7} {'zeroshard Mtok/s':>17} {'HF tokenizers':>14} "
              f"{'tiktoken':>9} {'vs HF':>6} {'vs tiktoken':>11}")
        for name in a.vocab.split(","):
            tok_dir = fetch[name][0]()
            spec = os.path.join(tok_dir, "tokenizer.json")
            for threads in (1, cores):
                def med(fn):
                    runs = [fn() for _ in range(a.runs)]
                    return runs[0][0] / statistics.median(r[1] for r in runs) / 1e6
                z = med(lambda: ours(a.bin, tok_dir, jsonl, threads, tmp))
                h = med(lambda: run_py(HF_CODE, [spec, docs_json], threads))
                t = med(lambda: run_py(TIKTOKEN_CODE, [spec, docs_json, fetch[name][1],
                                                       str(threads),
                                                       os.path.join(ROOT, "tests", "support")],
                                       threads))
                print(f"{name:7} {threads:>7} {z:>17.2f} {h:>14.2f} {t:>9.2f} {z / h:>6.2f} "
                      f"{z / t:>11.2f}")


if __name__ == "__main__":
    main()
