#!/usr/bin/env python3
"""zeroshard against transformers' LlamaForCausalLM in PyTorch (CPU), both in
the same run, on the same Llama directory, batches and schedule.

Builds a random Llama directory with transformers (offline: grouped-query
attention, SwiGLU, RMSNorm, rotary positions; sizes below), then for each
world size N and stage runs `zeroshard launch --model DIR` and the PyTorch
peer (peer_train.py over the same directory: DDP at stage 0, FSDP2 at stage
3), alternating run by run, and prints peer_bench's table: tokens/s of
each, their ratio, and the step-1 and last losses of both (the same
weights and batches: they agree to float summation order).

Usage: bench/peer/hf_llama_peer_bench.py [--workers 1,2,4] [--stages 0,3]
       [--steps 40] [--skip 8] [--runs 3] [--seq-len 128] [--hidden 256]
       [--layers 4]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_bench  # noqa: E402


def build_model(path, args):
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512, hidden_size=args.hidden, intermediate_size=args.hidden * 8 // 3,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 32,
        num_key_value_heads=max(1, args.hidden // 64), max_position_embeddings=args.seq_len,
        tie_word_embeddings=False)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(peer_bench.ROOT, "build", "bin"))
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--stages", default="0,3")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="hf_llama_peer.") as work:
        model = os.path.join(work, "llama")
        build_model(model, args)
        fixture, job = peer_bench.make_fixture(args, model, work)
        rows = []
        for workers in (int(n) for n in args.workers.split(",")):
            for stage in (int(s) for s in args.stages.split(",")):
                rows.append(((workers, stage),
                             peer_bench.cell(args, model, fixture, workers, stage, work)))
        peer_bench.print_table(f"llama (hidden {args.hidden}, {args.layers} layers, GQA)", job,
                               rows, args)
        print(f"CPU: {peer_bench.cpu_model()}")


if __name__ == "__main__":
    main()
