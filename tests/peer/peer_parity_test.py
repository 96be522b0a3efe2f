#!/usr/bin/env python3
"""bench/peer's PyTorch peer trains the same job as `zeroshard launch`.

The tiny preset, 4 steps, global batch 8 in micro-batches of 2, 1 thread:
zeroshard at N = 1 stage 0 is the reference; the peer (peer_train.py over
peer_fixture's weights and batches) runs at N = 1 stage 0 (DDP), N = 2
stage 1 (DDP + ZeroRedundancyOptimizer) and N = 2 stage 3 (FSDP2). Passes
when every step's loss of every peer run equals the reference's within
1e-5 relative at step 1 (same weights and batch: only float summation order
differs) and 1e-4 after (AdamW amplifies tiny gradient differences where
a gradient is near 0). A negative control shows the comparison can fail:
the reference's losses one step shifted (other batches) differ by more than
1e-3. Exits 77 with the reason when torch is missing.
"""
import argparse
import os
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "peer"))


def main():
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (scripts/setup-test-tools.sh installs torch and safetensors)")
        return SKIP
    import peer_bench

    args = argparse.Namespace(bin=os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"), steps=4,
                              global_batch=8, micro_batch=2, threads=1, timeout=120)
    failures = []
    with tempfile.TemporaryDirectory(prefix="peer_parity.") as work:
        fixture, _ = peer_bench.make_fixture(args, "tiny", work)
        reference = [r["loss"] for r in peer_bench.run_zeroshard(args, "tiny", 1, 0, work)]
        print("zeroshard N=1 stage 0 losses:", reference)
        if len(reference) != args.steps:
            failures.append(f"zeroshard logged {len(reference)} steps, not {args.steps}")
        for workers, stage in ((1, 0), (2, 1), (2, 3)):
            peer = [r["loss"] for r in peer_bench.run_peer(args, fixture, workers, stage, work)]
            print(f"peer N={workers} stage {stage} losses:", peer)
            if len(peer) != len(reference):
                failures.append(f"peer N={workers} stage {stage}: {len(peer)} steps logged")
                continue
            for step, (z, p) in enumerate(zip(reference, peer), start=1):
                tolerance = 1e-5 if step == 1 else 1e-4
                if abs(z - p) > tolerance * abs(z):
                    failures.append(f"peer N={workers} stage {stage} step {step}: loss {p!r} vs "
                                    f"zeroshard {z!r} (relative tolerance {tolerance})")
        shifted = max(abs(a - b) / abs(a) for a, b in zip(reference, reference[1:]))
        if shifted <= 1e-3:
            failures.append(f"negative control: consecutive steps' losses differ by only "
                            f"{shifted:.2e} relative, so the tolerance cannot tell batches apart")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: the peer's losses equal zeroshard's")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
