#!/usr/bin/env python3
"""zeroshard's fused CPU AdamW against PyTorch's fused AdamW and DeepSpeed's
CPU Adam, in the same run, at 1 and 2 threads.

Every optimizer updates n fp32 parameters (default 64 Mi) with fp32 m and v
and an fp32 gradient, AdamW with decoupled weight decay. The rows compare
equal work:
  - no compute copy: zeroshard (adamw_bench --compute none) vs
    torch.optim.AdamW(fused=True) vs DeepSpeedCPUAdam(adamw_mode=True):
    28 bytes per parameter each;
  - with a bf16 copy of the new weights (what mixed precision needs for the
    next forward): zeroshard writes it in the same pass (--compute bf16);
    PyTorch's fused AdamW and DeepSpeedCPUAdam (whose step has no fused
    copy in 0.19) are followed by param_bf16.copy_(param), the way their
    users keep a bf16 copy of fp32 master weights.
Each round times every optimizer (the median of --reps steps after one
warm-up); rounds interleave the three, and each figure is the median over
--rounds rounds, in parameters per second. DeepSpeed is skipped, with the reason printed, where
it is not installed or its CPU Adam op does not build.

Usage: bench/peer/adamw_peer.py [--n 67108864] [--reps 5] [--rounds 3] [--threads 1,2]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HP = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def median_seconds(reps, fn):
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def parameter(n):
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    return p


def params_per_second(opt, p, reps, bf16_copy):
    """`opt`'s step over p, then (bf16_copy) the copy out a second pass:
    neither PyTorch's fused step nor DeepSpeed 0.19's CPU Adam writes one."""
    copy = torch.empty(p.numel(), dtype=torch.bfloat16) if bf16_copy else None

    def step():
        opt.step()
        if copy is not None:
            copy.copy_(p.detach())
    return p.numel() / median_seconds(reps, step)


def torch_adamw(n, reps, bf16_copy):
    p = parameter(n)
    return params_per_second(torch.optim.AdamW([p], fused=True, **HP), p, reps, bf16_copy)


def deepspeed_adam(n, reps, bf16_copy):
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except Exception as e:  # noqa: BLE001 - any import failure is a skip
        return f"not available ({type(e).__name__}: {str(e)[:80]})"
    p = parameter(n)
    try:
        opt = DeepSpeedCPUAdam([p], adamw_mode=True, **HP)
    except Exception as e:  # noqa: BLE001
        return f"op did not build ({type(e).__name__}: {str(e)[:80]})"
    return params_per_second(opt, p, reps, bf16_copy)


def zeroshard_adamw(binary, n, reps, threads, compute):
    out = subprocess.run([binary, "--n", str(n), "--reps", str(reps), "--threads",
                          str(threads), "--compute", compute],
                         check=True, capture_output=True, text=True).stdout
    match = re.search(rf"threads={threads} isa=\S+ out={compute}: [\d.]+ ms, ([\d.]+) Mparams/s",
                      out)
    if not match:
        raise RuntimeError(f"adamw_bench printed no figure for out={compute}:\n{out}")
    return float(match.group(1)) * 1e6


def fmt(x):
    return f"{x / 1e6:,.0f}" if isinstance(x, float) else x


def ratio(z, other):
    return f"{z / other:.2f}" if isinstance(other, float) else "-"


def rows_for(threads, args):
    """The table rows at `threads`; runs in a process started with
    OMP_NUM_THREADS=threads, so every OpenMP runtime loaded (torch's,
    DeepSpeed's op) starts with that many threads."""
    torch.set_num_threads(threads)
    for compute, bf16 in (("none", False), ("bf16", True)):
        zs, ts, ds = [], [], []
        for _ in range(args.rounds):  # Interleaved: machine noise falls on all three.
            zs.append(zeroshard_adamw(args.bin, args.n, args.reps, threads, compute))
            ts.append(torch_adamw(args.n, args.reps, bf16))
            ds.append(deepspeed_adam(args.n, args.reps, bf16))
        z, t = statistics.median(zs), statistics.median(ts)
        d = statistics.median(ds) if all(isinstance(x, float) for x in ds) else ds[0]
        print(f"| {threads} | {compute} | {fmt(z)} | {fmt(t)} | {fmt(d)} | {ratio(z, t)} "
              f"| {ratio(z, d)} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=64 << 20, help="parameters")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds of the three; each figure is their median")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "adamw_bench"))
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # A child's thread count.
    args = p.parse_args()
    if args.one:
        rows_for(args.one, args)
        return 0
    print(f"n = {args.n:,} fp32 parameters, median of {args.rounds} interleaved rounds of "
          f"{args.reps} steps' medians, M params/s; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| threads | copy | zeroshard | PyTorch fused | DeepSpeedCPUAdam | zeroshard / PyTorch "
          "| zeroshard / DeepSpeed |")
    print("| --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for threads in args.threads.split(","):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", threads, "--n",
                        str(args.n), "--reps", str(args.reps), "--rounds", str(args.rounds),
                        "--bin", args.bin],
                       env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
