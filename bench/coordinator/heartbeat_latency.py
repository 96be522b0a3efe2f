#!/usr/bin/env python3
"""Heartbeat latency of an idle zeroshard-coordinator (p50, p99, max).

One member joins a coordinator on 127.0.0.1 and sends N heartbeats 10 ms
apart through grpcio; prints the percentiles and the slowest calls with
their index (a periodic stall shows as evenly spaced indices; see
[Note: poller starvation] in server/rpc/kv_wait_calls.h).

  heartbeat_latency.py [--beats N] [--coordinator PATH]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "fuzz"))
import rpc_fuzz as rf  # noqa: E402 (the wire helpers; needs grpcio)
import grpc  # noqa: E402


def start(path, log):
    proc = subprocess.Popen([path, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--job-id",
                             "lat", "--min-workers", "1", "--settle", "0.1"],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, rf.wait_address(proc, log, "heartbeat_latency")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beats", type=int, default=400)
    ap.add_argument("--coordinator", default=os.path.join(
        os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"), "zeroshard-coordinator"))
    args = ap.parse_args()
    with tempfile.TemporaryFile("w+") as log:
        proc, address = start(args.coordinator, log)
        try:
            channel = grpc.insecure_channel(address)
            call = lambda m: channel.unary_unary(rf.COORD + m, request_serializer=lambda b: b,
                                                 response_deserializer=lambda b: b)
            joined = rf.fields_of(call("Join")(rf.string_field(1, b"lat") +
                                               rf.string_field(2, b"w"), timeout=10))
            md = [("x-zeroshard-member", f"{joined[1]}:{joined.get(6, b'').decode()}")]
            beat = rf.string_field(1, b"lat") + rf.varint(2 << 3) + rf.varint(joined[1])
            ms = []
            for _ in range(args.beats):
                t0 = time.perf_counter()
                call("Heartbeat")(beat, metadata=md, timeout=10)
                ms.append((time.perf_counter() - t0) * 1e3)
                time.sleep(0.01)
        finally:
            proc.terminate()
            proc.wait(10)
    s = sorted(ms)
    worst = sorted(range(len(ms)), key=lambda i: -ms[i])[:6]
    print(f"heartbeats {len(ms)}: p50 {s[len(s) // 2]:.2f} ms, p99 {s[len(s) * 99 // 100]:.2f} ms, "
          f"max {s[-1]:.2f} ms; slowest at {sorted(worst)}: "
          f"{[round(ms[i], 1) for i in sorted(worst)]}")


if __name__ == "__main__":
    main()
