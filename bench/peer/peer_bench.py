#!/usr/bin/env python3
"""zeroshard against the same GPT in PyTorch (CPU), both in the same run.

For each model and world size N, each ZeRO stage runs as `zeroshard launch`
and as its PyTorch peer (peer_train.py: DDP, DDP + ZeroRedundancyOptimizer,
FSDP2 without and with resharding), from the same initial weights over the
same batches (peer_fixture), gloo on 127.0.0.1, --threads compute threads
per process. The two systems alternate run by run, so machine noise falls
on both. A run's figure is the median step time over the steps after
--skip; a cell's is the median over --runs runs; tokens/s = global batch x
n_ctx / that time. Each cell also shows the step-1 loss of both (the same
weights and batch: they must agree to float summation order) and the last
step's loss of both (the same schedule: they must stay close).

Prints one markdown table per model. PyTorch comes from PyPI through
scripts/setup-test-tools.sh (never a dependency of the product).

Usage: bench/peer/peer_bench.py [--models small,medium] [--workers 1,2,4]
       [--stages 0,1,2,3] [--steps 60] [--skip 10] [--runs 5] [--threads 1]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_model():
    """The processor's model name (/proc/cpuinfo), printed beside the figures."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def summarise(records, skip):
    """(median step seconds after `skip`, step-1 loss, last loss)."""
    records = sorted(records, key=lambda r: r["step"])
    times = [r["step_seconds"] for r in records if r["step"] > skip]
    return statistics.median(times), records[0]["loss"], records[-1]["loss"]


def run_zeroshard(args, model, workers, stage, work):
    log = os.path.join(work, "zeroshard.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(args.bin, "zeroshard"), "launch", "--workers", str(workers),
           "--stage", str(stage), "--model", model, "--steps", str(args.steps),
           "--global-batch", str(args.global_batch), "--micro-batch", str(args.micro_batch),
           "--eval-every", "0", "--threads", str(args.threads),
           "--run-dir", os.path.join(work, "run"), "--log", log]
    if getattr(args, "seq_len", 0):
        cmd += ["--seq-len", str(args.seq_len)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=args.timeout)
    return read_log(log)


def run_peer(args, fixture, workers, stage, work):
    """Runs the peer's ranks; once more on a new port if the first one was
    taken between free_port() and the store's bind (a race, not a failure)."""
    try:
        return run_peer_once(args, fixture, workers, stage, work)
    except RuntimeError as e:
        if "address already in use" not in str(e).lower():
            raise
        return run_peer_once(args, fixture, workers, stage, work)


def run_peer_once(args, fixture, workers, stage, work):
    log = os.path.join(work, "peer.jsonl")
    port = free_port()
    procs = []
    for rank in range(workers):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(workers),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS=str(args.threads), PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, os.path.join(HERE, "peer_train.py"), "--fixture", fixture,
               "--stage", str(stage), "--threads", str(args.threads), "--log", log]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE))
    failed = []
    for rank, p in enumerate(procs):
        try:
            _, err = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError(f"peer N={workers} stage {stage}: timed out")
        if p.returncode != 0:
            failed.append(f"rank {rank} exit {p.returncode}: {err.decode()[-2000:]}")
    if failed:
        raise RuntimeError(f"peer N={workers} stage {stage} failed:\n" + "\n".join(failed))
    return read_log(log)


def make_fixture(args, model, work):
    fixture = os.path.join(work, f"fixture-{os.path.basename(model.rstrip('/'))}")
    cmd = [os.path.join(args.bin, "peer_fixture"), "--out", fixture, "--model", model,
           "--steps", str(args.steps), "--global-batch", str(args.global_batch),
           "--micro-batch", str(args.micro_batch)]
    if getattr(args, "seq_len", 0):
        cmd += ["--seq-len", str(args.seq_len)]
    subprocess.run(cmd, check=True)
    with open(os.path.join(fixture, "job.json")) as f:
        return fixture, json.load(f)


def cell(args, model, fixture, workers, stage, work):
    zs, pt = [], []
    for run in range(args.runs):
        pt.append(summarise(run_peer(args, fixture, workers, stage, work), args.skip))
        zs.append(summarise(run_zeroshard(args, model, workers, stage, work), args.skip))
        print(f"{model} N={workers} stage {stage} run {run + 1}: step s PyTorch {pt[-1][0]:.4f}, "
              f"zeroshard {zs[-1][0]:.4f}", file=sys.stderr, flush=True)
    return {"zeroshard_s": statistics.median(r[0] for r in zs),
            "torch_s": statistics.median(r[0] for r in pt),
            "zeroshard_loss1": zs[0][1], "torch_loss1": pt[0][1],
            "zeroshard_loss_last": zs[0][2], "torch_loss_last": pt[0][2]}


def print_table(model, job, rows, args):
    tokens = job["global_batch"] * job["n_ctx"]
    print(f"\n{model}: {job['n_layer']} layers, width {job['n_embd']}, {job['n_head']} heads, "
          f"global batch {job['global_batch']} x {job['n_ctx']} tokens, micro-batch "
          f"{job['micro_batch']}, {args.threads} thread(s) per process, median step over "
          f"steps {args.skip + 1}-{args.steps}, median of {args.runs} runs")
    print("| N | stage | PyTorch peer | PyTorch tokens/s | zeroshard tokens/s | zeroshard / PyTorch "
          "| step-1 loss (PyTorch, zeroshard) | last loss (PyTorch, zeroshard) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    peers = ["DDP", "DDP + ZeroRedundancyOptimizer", "FSDP2, no reshard after forward", "FSDP2"]
    for (workers, stage), r in rows:
        t, z = tokens / r["torch_s"], tokens / r["zeroshard_s"]
        print(f"| {workers} | {stage} | {peers[stage]} | {t:,.0f} | {z:,.0f} | **{z / t:.2f}** "
              f"| {r['torch_loss1']:.6f}, {r['zeroshard_loss1']:.6f} "
              f"| {r['torch_loss_last']:.4f}, {r['zeroshard_loss_last']:.4f} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--models", default="small,medium")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--stages", default="0,1,2,3")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--skip", type=int, default=10, help="steps left out of the median")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=0,
                   help="tokens per sequence for a model directory (presets: their context)")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--timeout", type=float, default=1800, help="seconds for one run")
    args = p.parse_args()
    if args.skip >= args.steps:
        p.error("--skip must be below --steps")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("peer_bench: torch is not installed (scripts/setup-test-tools.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="peer_bench.") as work:
        for model in args.models.split(","):
            fixture, job = make_fixture(args, model, work)
            rows = []
            for workers in (int(n) for n in args.workers.split(",")):
                for stage in (int(s) for s in args.stages.split(",")):
                    rows.append(((workers, stage), cell(args, model, fixture, workers, stage,
                                                        work)))
            print_table(model, job, rows, args)


if __name__ == "__main__":
    main()
