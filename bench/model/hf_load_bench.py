#!/usr/bin/env python3
"""Loading a model directory against a plain read of its files, same disk.

Writes a random BF16 Llama directory of about --gb GB (tests/support/
hf_synthetic.py: one safetensors shard per decoder layer behind an index),
starts a zeroshard-coordinator serving it (init pretrained, as a fine-tuning
job does), and per run, with the files evicted from the page cache first
(posix_fadvise DONTNEED) each time:
  - plain read: every file read start to end in 8 MiB blocks, one thread,
    through the page cache and again with O_DIRECT (the disk alone);
  - zeroshard: model_load_client, N ranks each loading its ZeRO-3 shard as
    fp32 master weights into arrays zeroed before the clock starts, as a
    worker loads into its engine's shards: through the coordinator's
    local-read socket (the ranks read the files with descriptors it hands
    them and widen BF16 themselves), then again all through DownloadRange
    (read, xxhash64, gRPC, the client's hash check and widening);
and prints the medians of --runs runs: seconds, GB/s of safetensors data,
and the ratios plain / zeroshard against each plain read (goal >= 0.8),
plus the coordinator's VmHWM. They alternate so machine noise falls on all.

Usage: bench/model/hf_load_bench.py [--gb 2] [--ranks 4] [--runs 3]
"""
import argparse
import json
import mmap
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))


def files_of(model):
    return sorted(os.path.join(model, f) for f in os.listdir(model) if f.endswith(".safetensors"))


def load(args, port, model, local):
    """Seconds for model_load_client's ranks to load their shards: through
    the coordinator's local-read socket (the default for ranks on its
    host), or with ZEROSHARD_LOCAL_READS=0 all through DownloadRange."""
    env = dict(os.environ)
    if not local:
        env["ZEROSHARD_LOCAL_READS"] = "0"
    out = subprocess.run(
        [os.path.join(args.bin, "model_load_client"), "--coordinator", f"127.0.0.1:{port}",
         "--model", model, "--ranks", str(args.ranks)],
        capture_output=True, text=True, check=True, timeout=3600, env=env)
    return json.loads(out.stdout)["seconds"]


def evict(model):
    for path in files_of(model):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def plain_read(model):
    start = time.perf_counter()
    for path in files_of(model):
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass
    return time.perf_counter() - start


def direct_read(model):
    """The files read with O_DIRECT, 8 MiB at a time: the disk without the page cache."""
    buf = mmap.mmap(-1, 8 << 20)  # Page-aligned, as O_DIRECT needs.
    start = time.perf_counter()
    for path in files_of(model):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            offset = 0
            while True:
                got = os.preadv(fd, [buf], offset)
                offset += got
                if got < len(buf):
                    break
        finally:
            os.close(fd)
    return time.perf_counter() - start


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) * 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--gb", type=float, default=2.0, help="safetensors size, GB (BF16)")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to write the model (default: a temp dir)")
    args = p.parse_args()
    import hf_synthetic
    import peer_bench
    with tempfile.TemporaryDirectory(prefix="hf_load.", dir=args.dir) as work:
        model = os.path.join(work, "model")
        # hidden 2048, inner 5632, 16 heads, 4 kv heads: 46.1M parameters a layer.
        layers = max(1, round(args.gb * 1e9 / 2 / 46.1e6))
        params = hf_synthetic.write_llama(model, vocab=2048, hidden=2048, inner=5632,
                                          layers=layers, heads=16, kv_heads=4)
        data = sum(os.path.getsize(f) for f in files_of(model))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        job = dict(model=model, stage=3, steps=1, seq_len=16)
        coordinator = subprocess.Popen(
            [os.path.join(args.bin, "zeroshard-coordinator"), "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", "", "--state-dir", os.path.join(work, "state"),
             "--checkpoint-dir", os.path.join(work, "ckpt"), "--job-config-json",
             json.dumps(job)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)
        plain, direct, loads, grpc_loads = [], [], [], []
        try:
            for run in range(args.runs):
                evict(model)
                plain.append(plain_read(model))
                evict(model)
                direct.append(direct_read(model))
                evict(model)
                loads.append(load(args, port, model, local=True))
                evict(model)
                grpc_loads.append(load(args, port, model, local=False))
                print(f"run {run + 1}: plain read {plain[-1]:.2f} s, O_DIRECT read {direct[-1]:.2f} s, "
                      f"zeroshard {loads[-1]:.2f} s, all through DownloadRange {grpc_loads[-1]:.2f} s",
                      file=sys.stderr, flush=True)
            hwm = vm_hwm(coordinator.pid)
        finally:
            coordinator.send_signal(signal.SIGTERM)
            coordinator.wait(timeout=30)
        pr, dr, ld = statistics.median(plain), statistics.median(direct), statistics.median(loads)
        gl = statistics.median(grpc_loads)
        print(f"model: {params / 1e9:.2f}B parameters, {data / 1e9:.2f} GB of BF16 safetensors in "
              f"{len(files_of(model))} files; {args.ranks} ranks, ZeRO-3 shards as fp32; "
              f"median of {args.runs} cold runs; CPU: {peer_bench.cpu_model()}")
        print("| what | seconds | GB/s of safetensors | page-cache read / it | O_DIRECT read / it |")
        print("| --- | --- | --- | --- | --- |")
        print(f"| plain read (page cache) | {pr:.2f} | {data / pr / 1e9:.2f} | | |")
        print(f"| plain read (O_DIRECT) | {dr:.2f} | {data / dr / 1e9:.2f} | | |")
        print(f"| zeroshard load (local reads) | {ld:.2f} | {data / ld / 1e9:.2f} | **{pr / ld:.2f}** | "
              f"**{dr / ld:.2f}** |")
        print(f"| zeroshard load, all through DownloadRange | {gl:.2f} | {data / gl / 1e9:.2f} | "
              f"{pr / gl:.2f} | {dr / gl:.2f} |")
        print(f"coordinator VmHWM while serving: {hwm / 1e6:.0f} MB; runs: plain "
              f"{[round(x, 2) for x in plain]}, O_DIRECT {[round(x, 2) for x in direct]}, "
              f"zeroshard {[round(x, 2) for x in loads]}, through DownloadRange "
              f"{[round(x, 2) for x in grpc_loads]}")


if __name__ == "__main__":
    main()
