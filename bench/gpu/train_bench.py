#!/usr/bin/env python3
"""Training on one GPU: `zeroshard launch --device cuda --workers 1` for a
preset (default gpt2) at each ZeRO stage asked for (default 0 and 3), in the
compute dtype asked for (default bf16). Prints, per stage:

- tokens/s: the median over the steps after --skip of each run's tokens/s,
  then the median over --runs runs;
- MFU: model FLOPs/s over the device's dense peak. Model FLOPs a token are
  6 P + 12 L H Q T (Chowdhery et al., 2022, "PaLM", appendix B: the
  6 P of the matmuls plus the attention's, with L layers, H heads, Q the
  head size and T the context), P the parameter count `zeroshard plan`
  prints. The peak is --peak-tflops (default 989.4: an H100/H200 SXM's dense
  BF16 Tensor Core rate, NVIDIA's data sheet; use 494.7 for TF32, 66.9 for
  FP32 without tensor cores);
- peak device memory by kind (the worker's own accounting, the step log's
  peak_memory_bytes) next to the ZeRO formula (Rajbhandari et al., SC'20,
  section 3: params c P, gradients g P, optimizer 12 P, each divided by N
  from stage 3, 2 and 1 on; N = 1 here, so every stage's formula is the
  same), c = 2 for bf16 compute, else 4, and g = 4 (fp32 gradients, the
  launch default). A stage-3 run at N = 1 measures what its gathers and
  reduce-scatters cost over stage 0 on the same GPU.

Needs a GPU and a CUDA build (build-gpu by tests/gpu/run_gpu_tests.sh, or
--bin). --device cpu with a small preset checks the script itself.

Usage: bench/gpu/train_bench.py [--bin DIR] [--model gpt2] [--stages 0,3]
       [--dtype bf16] [--steps 30] [--skip 10] [--runs 3] [--micro-batch 4]
       [--global-batch 8] [--peak-tflops 989.4] [--device cuda]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KINDS = ("params", "grads", "optimizer", "buffers", "activations")


def model_shape(args):
    """(parameters, layers, heads, head size, context) from `zeroshard plan`."""
    out = subprocess.run([os.path.join(args.bin, "zeroshard"), "plan", "--model", args.model,
                          "--workers", "1", "--device", "cuda", "--device-memory", "1000GB"],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"(\d+) layers, width (\d+), (\d+) heads, ctx (\d+), vocab \d+ "
                  r"\((\d+) parameters\)", out)
    if m is None:
        sys.exit(f"train_bench: cannot read the model's shape from zeroshard plan:\n{out}")
    layers, width, heads, ctx, params = (int(g) for g in m.groups())
    return params, layers, heads, width // heads, ctx


def run_once(args, stage, work):
    log = os.path.join(work, "steps.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(args.bin, "zeroshard"), "launch", "--device", args.device,
           "--workers", "1", "--stage", str(stage), "--model", args.model,
           "--compute-dtype", args.dtype, "--steps", str(args.steps),
           "--global-batch", str(args.global_batch), "--micro-batch", str(args.micro_batch),
           "--eval-every", "0", "--run-dir", os.path.join(work, "run"), "--log", log]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        sys.exit(f"train_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    rows = [json.loads(line) for line in open(log) if line.startswith("{")]
    rows = [row for row in rows if "tokens_per_second" in row]
    if len(rows) <= args.skip:
        sys.exit(f"train_bench: {len(rows)} steps logged, --skip is {args.skip}")
    tokens = statistics.median(row["tokens_per_second"] for row in rows[args.skip:])
    peak = {k: max(row["ranks"][0]["peak_memory_bytes"].get(k, 0) for row in rows)
            for k in KINDS}
    return tokens, peak


def formula(params, dtype):
    c = 2 if dtype == "bf16" else 4
    return {"params": c * params, "grads": 4 * params, "optimizer": 12 * params}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build-gpu", "bin"))
    p.add_argument("--model", default="gpt2")
    p.add_argument("--stages", default="0,3")
    p.add_argument("--dtype", default="bf16", choices=("fp32", "bf16"))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=10, help="first steps left out of the median")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--peak-tflops", type=float, default=989.4,
                   help="the device's dense peak in the compute dtype, TFLOP/s")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--timeout", type=float, default=900, help="seconds for one run")
    args = p.parse_args()
    if args.skip >= args.steps:
        p.error("--skip must be below --steps")
    params, layers, heads, head, ctx = model_shape(args)
    flops_per_token = 6 * params + 12 * layers * heads * head * ctx
    print(f"train_bench: {args.model} ({params:,} parameters, {layers} layers, {heads} heads, "
          f"ctx {ctx}), {args.dtype} compute, global batch {args.global_batch} x {ctx} tokens, "
          f"micro-batch {args.micro_batch}, {args.device}, median of {args.runs} runs of "
          f"{args.steps} steps (first {args.skip} left out); peak {args.peak_tflops} TFLOP/s")
    heads_row = [f"{k} GB" + (" (formula)" if k in ("params", "grads", "optimizer") else "")
                 for k in KINDS]
    print("| stage | tokens/s | MFU | " + " | ".join(heads_row) + " |")
    print("| --- " * (3 + len(KINDS)) + "|")
    for stage in (int(s) for s in args.stages.split(",")):
        with tempfile.TemporaryDirectory(prefix="zs_train_bench") as work:
            results = [run_once(args, stage, work) for _ in range(args.runs)]
        tokens = statistics.median(t for t, _ in results)
        peak = {k: max(r[1][k] for r in results) for k in KINDS}
        mfu = tokens * flops_per_token / (args.peak_tflops * 1e12)
        want = formula(params, args.dtype)
        cells = [f"{peak[k] / 1e9:.3f}" + (f" ({want[k] / 1e9:.3f})" if k in want else "")
                 for k in KINDS]
        print(f"| {stage} | {tokens:,.0f} | {100 * mfu:.1f}% | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
