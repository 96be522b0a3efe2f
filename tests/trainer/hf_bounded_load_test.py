#!/usr/bin/env python3
"""Loading a model directory holds neither the model on a worker nor on the
coordinator.

A random Llama of 136M parameters in BF16 (272 MB of safetensors in 13
shards; 545 MB as fp32 master weights; tests/support/hf_synthetic.py) is
fine-tuned for 2 steps by a zeroshard-coordinator and 4 zeroshard-worker
processes at ZeRO-3 with the optimizer state in NVMe files. Each worker
runs under RLIMIT_DATA (prlimit) of 0.85 x the fp32 master weights: it can
never hold the whole model, so it must receive only its shard. Passes when:
  - the 4 ranks start from the model's weights (the step log's first
    record has the event "loaded_model"), train both steps to a finite loss
    and exit 0; each worker's reported VmHWM is under the limit;
  - the coordinator, which read all 272 MB of safetensors and served them,
    peaks (VmHWM, its high-water mark read before it stops) under 160 MB: its base (~50 MB)
    plus chunk buffers, far below the files' size.
Runs on the CPU with Gloo over 127.0.0.1; every process is stopped by PID.
"""
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from checks import check, finish  # noqa: E402
BIN = os.environ.get("ZEROSHARD_BIN_DIR", "build/bin")
COORDINATOR_BOUND = 160e6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) * 1024
    except (OSError, AttributeError):
        return 0


def main():
    try:
        import numpy  # noqa: F401
        import hf_synthetic
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    with tempfile.TemporaryDirectory(prefix="hf_bounded.") as work:
        model = os.path.join(work, "model")
        params = hf_synthetic.write_llama(model, layers=36)
        limit = int(0.85 * 4 * params)
        print(f"model: {params} parameters, fp32 master {4 * params / 1e6:.0f} MB; worker "
              f"RLIMIT_DATA {limit / 1e6:.0f} MB", flush=True)
        job = dict(model=model, stage=3, steps=2, seq_len=8, global_batch=4, micro_batch=1,
                   eval_every=0, threads=1, bucket_mib=0, gather_prefetch=0,
                   reduce_dtype="bf16", offload_optimizer="nvme", offload_params="nvme",
                   offload_dir=os.path.join(work, "offload"),
                   log_path=os.path.join(work, "steps.jsonl"), backend="gloo",
                   collective_timeout_s=300)
        os.makedirs(job["offload_dir"])
        port = free_port()
        logs = [open(os.path.join(work, f"{name}.log"), "w")
                for name in ["coordinator", "w0", "w1", "w2", "w3"]]
        coordinator = subprocess.Popen(
            [os.path.join(BIN, "zeroshard-coordinator"), "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", "", "--state-dir", os.path.join(work, "state"),
             "--checkpoint-dir", os.path.join(work, "ckpt"), "--min-workers", "4",
             "--max-workers", "4", "--job-config-json", json.dumps(job)],
            stdout=logs[0], stderr=subprocess.STDOUT, text=True)
        # Output to files, not pipes: a process whose unread pipe filled
        # would block while another one is waited for.
        workers = [subprocess.Popen(
            ["prlimit", f"--data={limit}", os.path.join(BIN, "zeroshard-worker"),
             "--coordinator", f"127.0.0.1:{port}", "--worker-id", f"w{i}"],
            stdout=logs[1 + i], stderr=subprocess.STDOUT, text=True) for i in range(4)]
        deadline, outputs, peak = time.monotonic() + 400, [], 0
        try:
            for i, w in enumerate(workers):
                try:
                    w.wait(timeout=max(1, deadline - time.monotonic()))
                    with open(logs[1 + i].name) as f:
                        outputs.append(f.read())
                except subprocess.TimeoutExpired:
                    outputs.append("(still running at the deadline)")
            # VmHWM is the coordinator's high-water mark: read once, before it exits.
            peak = vm_hwm(coordinator.pid)
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
            coordinator.send_signal(signal.SIGTERM)
            try:
                coordinator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                coordinator.kill()
        for i, (w, out) in enumerate(zip(workers, outputs)):
            w.wait(timeout=30)
            check(w.returncode == 0, f"worker {i} exit {w.returncode}")
            m = re.search(r"peak RSS \(VmHWM\) bytes (\d+)", out)
            hwm = int(m.group(1)) if m else -1
            check(0 < hwm < limit, f"worker {i} VmHWM {hwm / 1e6:.0f} MB < {limit / 1e6:.0f} MB")
            if w.returncode != 0:
                print(out[-3000:])
        records = []
        if os.path.exists(job["log_path"]):
            with open(job["log_path"]) as f:
                records = [r for r in map(json.loads, f) if "loss" in r]
        losses = [r["loss"] for r in records]
        first = records[0] if records else {}
        check(first.get("events") == ["loaded_model"] and first.get("world_size") == 4,
              f"the 4 ranks started from the model directory's weights (event loaded_model): "
              f"{first.get('events')}, world size {first.get('world_size')}")
        check(len(losses) == 2 and all(math.isfinite(x) for x in losses),
              f"2 steps trained: losses {losses}")
        check(0 < peak < COORDINATOR_BOUND,
              f"coordinator VmHWM {peak / 1e6:.0f} MB < {COORDINATOR_BOUND / 1e6:.0f} MB while "
              f"serving {2 * params / 1e6:.0f} MB of BF16 safetensors")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
