"""One rank of the PyTorch peer: trains peer_model.Gpt on peer_fixture's
weights and batches (or, for a Hugging Face model directory, transformers'
AutoModelForCausalLM from that directory), the way a PyTorch user shards
each ZeRO stage:

  stage 0: DistributedDataParallel (no_sync on all but the last micro-batch);
  stage 1: DDP + ZeroRedundancyOptimizer (optimizer state sharded);
  stage 2: FSDP2 fully_shard per block and root, reshard_after_forward=False;
  stage 3: FSDP2 fully_shard per block and root (parameters resharded).

Gloo on 127.0.0.1 (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
environment), `--threads` compute threads per process. The job is zeroshard's
(job.json): rank r takes samples [G*r/N, G*(r+1)/N) of each step in
micro-batches of `micro_batch`, the loss is the mean token cross-entropy of
the global batch, gradients are clipped by the global norm, AdamW (decoupled
weight decay on every parameter) follows LearningRateAt of
common/model/job_config.cc. Rank 0 writes one JSON line per step: step, loss, and
step_seconds (the micro-batches, the clip, the optimizer step and the loss's
all-reduce, as zeroshard's step_seconds).
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_model import Gpt, HfCausalLm, load_safetensors  # noqa: E402


def learning_rate_at(job, step):
    """common/model/job_config.cc LearningRateAt: linear warm-up, cosine to lr/10."""
    lr, warmup = job["lr"], job["warmup_steps"]
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, job["steps"] - warmup)
    progress = min(1.0, (step - warmup) / span)
    min_lr = lr / 10
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def fully_shard_fn():
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def adamw(params, job, zero):
    """torch's fused AdamW (sharded by ZeroRedundancyOptimizer at stage 1)."""
    kwargs = dict(lr=job["lr"], betas=(job["beta1"], job["beta2"]), eps=job["eps"],
                  weight_decay=job["weight_decay"])
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, fused=True,
                                       **kwargs)
    return torch.optim.AdamW(params, fused=True, **kwargs)


def wrap(model, stage):
    if stage <= 1:
        return DistributedDataParallel(model)
    fully_shard = fully_shard_fn()
    reshard = stage == 3
    for block in model.blocks():
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    return model


def micro_batches(job, rank, world):
    G, mb = job["global_batch"], job["micro_batch"]
    begin, end = G * rank // world, G * (rank + 1) // world
    return [(b, min(end, b + mb)) for b in range(begin, end, mb)]


def train_step(model, optimizer, job, stage, batch, spans, world):
    """One optimizer step; returns the summed loss of this rank's tokens."""
    T = job["n_ctx"]
    scale = world / (job["global_batch"] * T)  # DDP and FSDP average over ranks.
    local = torch.zeros(())
    for i, (b, e) in enumerate(spans):
        rows = batch[b:e]
        # DDP reduces once, after the last micro-batch; FSDP2 reduce-scatters
        # every micro-batch, as zeroshard's stages 2-3 do.
        accumulate = stage <= 1 and i < len(spans) - 1
        with model.no_sync() if accumulate else contextlib.nullcontext():
            loss = model(rows[:, :T], rows[:, 1:])
            (loss * scale).backward()
        local += loss.detach()
    if job["max_grad_norm"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), job["max_grad_norm"])
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    dist.all_reduce(local)
    return local.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixture", required=True, help="peer_fixture's output directory")
    parser.add_argument("--stage", type=int, choices=range(4), required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log", required=True, help="JSONL step log (rank 0)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(args.fixture, "job.json")) as f:
        job = json.load(f)
    T, G = job["n_ctx"], job["global_batch"]
    data = np.fromfile(os.path.join(args.fixture, "batches.u8"), dtype=np.uint8)
    data = torch.from_numpy(data.reshape(-1, G, T + 1).astype(np.int64))

    if "hf_model" in job:
        model = HfCausalLm(job["hf_model"])
    else:
        model = Gpt(job["vocab"], job["n_layer"], job["n_embd"], job["n_head"], T)
        load_safetensors(model, os.path.join(args.fixture, "init.safetensors"))
    model = wrap(model, args.stage)
    optimizer = adamw(model.parameters(), job, zero=args.stage == 1)
    spans = micro_batches(job, rank, world)

    log = open(args.log, "w") if rank == 0 else None
    for step in range(job["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(job, step)
        start = time.perf_counter()
        loss_sum = train_step(model, optimizer, job, args.stage, data[step], spans, world)
        seconds = time.perf_counter() - start
        if log:
            loss = loss_sum / (G * T)
            log.write(json.dumps({"step": step + 1, "loss": loss, "step_seconds": seconds}) + "\n")
            log.flush()
    if log:
        log.close()
    dist.barrier()
    # Every rank is done: leave without tearing gloo down. Its teardown at
    # interpreter exit sometimes aborts ("terminate called without an
    # active exception") after FSDP2 runs, failing a run that completed.
    os._exit(0)


if __name__ == "__main__":
    main()
