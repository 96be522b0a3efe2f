#!/usr/bin/env python3
"""Fine-tuning a Llama directory: every ZeRO stage and world size gives the
losses of one worker, and of the same model trained in PyTorch.

A tiny random Llama (grouped-query attention, llama3 rope scaling, untied
head) saved by transformers in BF16; 20 steps of global batch 8 in micro-batches of
2, 32 tokens a sequence, over peer_fixture's batches. Passes when:
  - zeroshard at N = 4, stages 1, 2 and 3, gives every step the loss of
    N = 1 stage 0 within 1e-4 relative (the GPT-2 launch tests' tolerance:
    only float summation order differs);
  - the PyTorch reference (bench/peer/peer_train.py: transformers'
    LlamaForCausalLM from the same directory, torch.optim.AdamW, the same
    batches, clipping and schedule) gives every step the same loss within
    1e-4 relative;
  - a negative control: the reference's losses one step shifted differ by
    more than 1e-3.
Exits 77 with the reason when torch or transformers is missing.
"""
import argparse
import os
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "peer"))
TOLERANCE = 1e-4


def worst(a, b):
    return max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b))


def main():
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"SKIP: {e} (scripts/setup-test-tools.sh installs torch and transformers)")
        return SKIP
    import peer_bench
    transformers.logging.set_verbosity_error()
    args = argparse.Namespace(bin=os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"), steps=20,
                              global_batch=8, micro_batch=2, threads=1, timeout=240, seq_len=32)
    failures = []
    with tempfile.TemporaryDirectory(prefix="hf_llama_parity.") as work:
        torch.manual_seed(3)
        config = transformers.LlamaConfig(
            vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
        model_dir = os.path.join(work, "llama")
        # In BF16, as published checkpoints are: zeroshard's ranks receive
        # those bits (DownloadRange accept_bf16) and widen them, torch loads
        # them as fp32; both start from the same values exactly.
        model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
        model.save_pretrained(model_dir)
        fixture, _ = peer_bench.make_fixture(args, model_dir, work)
        reference = peer_bench.run_zeroshard(args, model_dir, 1, 0, work)
        print("zeroshard N=1 stage 0:", [round(r["loss"], 6) for r in reference])
        if len(reference) != args.steps:
            failures.append(f"reference ran {len(reference)} steps")
        for stage in (1, 2, 3):
            got = peer_bench.run_zeroshard(args, model_dir, 4, stage, work)
            w = worst(got, reference)
            print(f"zeroshard N=4 stage {stage}: worst relative difference {w:.2e}")
            if len(got) != args.steps or w > TOLERANCE:
                failures.append(f"N=4 stage {stage}: {w:.2e} over {len(got)} steps")
        peer = peer_bench.run_peer(args, fixture, 1, 0, work)
        w = worst(peer, reference)
        print(f"PyTorch (transformers + AdamW): worst relative difference {w:.2e}")
        if len(peer) != args.steps or w > TOLERANCE:
            failures.append(f"PyTorch: {w:.2e} over {len(peer)} steps")
        control = worst(reference[1:], reference[:-1])
        print(f"control, one step shifted: {control:.2e}")
        if control <= 1e-3:
            failures.append(f"control {control:.2e}: the comparison could not fail")
    for f in failures:
        print("FAIL:", f)
    print(f"{5 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
