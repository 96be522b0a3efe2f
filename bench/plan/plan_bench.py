#!/usr/bin/env python3
"""Predicted vs measured peak memory and step time, medium at N = 2 on the CPU.

For each stage 0-3, without and with activation checkpointing, runs
`zeroshard plan --json` (the prediction: peak bytes per worker, traffic and
communication time per step at the loopback bandwidth it measures) and a
`zeroshard launch` of a few steps (the measurement: every worker's VmHWM,
which launch prints, and the median step time from the step log). The
checkpointing column runs only where `zeroshard launch --help` lists
--activation-checkpointing; otherwise it is skipped with the reason.

Usage: bench/plan/plan_bench.py [--bin build/bin] [--steps 4] [--model medium]
Run by hand, never by ctest (bench/README.md).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--model", default="medium")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    zs = os.path.join(a.bin, "zeroshard")
    has_ckpt = "--activation-checkpointing" in run([zs, "launch", "--help"])
    plan = json.loads(run([zs, "plan", "--json", "--model", a.model, "--workers", str(a.workers),
                           "--micro-batch", "4", "--global-batch", "16",
                           "--link-bandwidth", "measure"]))
    print(f"{a.model}, N = {a.workers}, CPU; link {plan['machine']['link_bytes_per_second'] / 1e9:.2f} GB/s (loopback)")
    if not has_ckpt:
        print("checkpointing blocks: skipped (this build's launch has no --activation-checkpointing)")
    print("| stage | ckpt | predicted peak MB | measured VmHWM MB | error | predicted comm s | step s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for stage in range(4):
        for ckpt in (["none", "blocks"] if has_ckpt else ["none"]):
            choice = next(c for c in plan["choices"] if c["stage"] == stage and
                          c["activation_checkpointing"] == ckpt and c["offload_optimizer"] == "none")
            with tempfile.TemporaryDirectory() as d:
                cmd = [zs, "launch", "--model", a.model, "--workers", str(a.workers), "--stage",
                       str(stage), "--steps", str(a.steps), "--micro-batch", "4", "--global-batch",
                       "16", "--eval-every", "0", "--threads", "1", "--run-dir", d + "/run"]
                if has_ckpt:
                    cmd += ["--activation-checkpointing", ckpt]
                out = run(cmd)
                peaks = [int(x) for x in re.search(r"peak RSS \(VmHWM\) bytes per worker:([ 0-9]+)", out).group(1).split()]
                steps = [json.loads(l)["step_seconds"] for l in open(d + "/run/steps.jsonl")]
            pred, meas = choice["peak_bytes_per_rank"], max(peaks)
            print(f"| {stage} | {ckpt} | {pred / 1e6:.1f} | {meas / 1e6:.1f} | {100 * (pred - meas) / meas:+.1f}% "
                  f"| {choice['comm_seconds_per_step']:.4f} | {statistics.median(steps[1:] or steps):.3f} |")


if __name__ == "__main__":
    main()
