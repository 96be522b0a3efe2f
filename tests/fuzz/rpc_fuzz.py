#!/usr/bin/env python3
"""Fuzz every RPC of a real zeroshard-coordinator (issue 16, part B).

Starts the coordinator (with a checkpoint dir) on 127.0.0.1 port 0, then
sends to every method of Coordinator and CheckpointService, through
grpcio's generic calls on the method paths: random protobuf-shaped
messages (field numbers and wire types of the real messages, boundary
values: 0, -1, 2^31-1, 2^63-1, -2^63, NaN, huge strings) and raw random
bytes. Fails on a crash (the process exits), a hang (a call past its
deadline while the coordinator stops answering a heartbeat probe), RSS
growing past a bound, or INTERNAL / UNKNOWN to a request that parsed.

The coordinator runs with a --token-file (issue 16, part A), and one real
member joins first and keeps heartbeating, so requests reach past the
AuthGate: each carries, at random, no metadata, a garbage token, a reader,
worker or admin token, and with a worker token often that live member's
credential (x-zeroshard-member), which KV writes and uploads need.

  rpc_fuzz.py [--requests N] [--seconds S] [--seed K] [--rss-growth-mb M]
Exit 0 clean, 1 on a finding, 77 when grpcio or the binary is missing.
"""
import argparse
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from file_events import wait_for_files  # noqa: E402

try:
    import grpc
except ImportError:
    print("rpc_fuzz: grpcio missing (scripts/setup-test-tools.sh installs it); skipping")
    sys.exit(77)

# Method path -> ((field number, kind), ...); kinds: v varint, s bytes,
# b bytes, d double, f fixed64, m nested (random bytes in a length field).
COORD = "/zeroshard.v1.Coordinator/"
CKPT = "/zeroshard.v1.CheckpointService/"
KV = ((1, "s"), (2, "v"), (3, "s"), (4, "b"))
METHODS = {
    COORD + "Join": ((1, "s"), (2, "s"), (3, "s"), (4, "m"), (5, "s"), (6, "s")),
    COORD + "Heartbeat": ((1, "s"), (2, "v"), (3, "v")),
    COORD + "Leave": ((1, "s"), (2, "v"), (3, "v")),
    COORD + "ReportFailure": ((1, "s"), (2, "v"), (3, "v"), (4, "v"), (5, "s"), (6, "v")),
    COORD + "ReportHandoff": ((1, "s"), (2, "v"), (3, "v"), (4, "v"), (5, "v")),
    COORD + "GetGeneration": ((1, "s"), (2, "v")),
    COORD + "KvSet": KV,
    COORD + "KvGet": KV,
    COORD + "KvWait": ((1, "s"), (2, "v"), (3, "s"), (4, "v")),
    COORD + "KvAdd": KV,
    COORD + "ReportStep": ((1, "s"), (2, "v"), (3, "v"), (4, "v"), (5, "v"), (6, "d"),
                           (7, "d"), (8, "d"), (9, "m"), (10, "m"), (11, "m"), (12, "d"),
                           (13, "m"), (14, "v"), (17, "v")),
    COORD + "GetJobStatus": ((1, "s"),),
    COORD + "StopJob": ((1, "s"),),
    CKPT + "BeginCheckpoint": ((1, "s"), (2, "v"), (3, "v"), (4, "v"), (5, "v"), (6, "s"),
                               (7, "m"), (8, "v"), (9, "v"), (10, "b"), (11, "v")),
    CKPT + "CommitCheckpoint": ((1, "s"), (2, "v")),
    CKPT + "AbortCheckpoint": ((1, "s"),),
    CKPT + "ListCheckpoints": ((1, "s"),),
    CKPT + "GetCheckpoint": ((1, "s"), (2, "v"), (3, "v")),
    CKPT + "RequestCheckpoint": ((1, "s"),),
    CKPT + "GetCheckpointTrigger": ((1, "s"),),
}
STREAM_IN = {CKPT + "UploadShard": ((1, "s"), (2, "v"), (3, "s"), (4, "v"), (5, "v"), (6, "v"),
                                    (7, "v"), (8, "f"), (9, "b"))}
STREAM_OUT = {CKPT + "DownloadRange": ((1, "s"), (2, "v"), (3, "v"), (4, "s"), (5, "v"),
                                       (6, "v"), (7, "v"), (8, "v"))}
STREAM_OUT[COORD + "WatchGeneration"] = ((1, "s"), (2, "v"))
STREAM_BIDI = {COORD + "HeartbeatStream": METHODS[COORD + "Heartbeat"]}
BOUNDARY_INTS = [0, 1, -1, 2, 7, 2**31 - 1, -2**31, 2**62, 2**63 - 1, -2**63, 600000, 600001]
BOUNDARY_STRS = [b"", b"fuzz", b"step-00000001.0.00000000", b"x" * 300, b"\x00\x01" * 8,
                 b"../../etc/passwd", b"a" * 5000]


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, kind, rng):
    if kind == "v":
        v = rng.choice(BOUNDARY_INTS) if rng.random() < 0.6 else rng.getrandbits(64)
        return varint(num << 3) + varint(v)
    if kind == "d":
        v = rng.choice([0.0, -1.0, 1e308, float("nan"), float("inf"), -123.0, rng.random()])
        return varint(num << 3 | 1) + struct.pack("<d", v)
    if kind == "f":
        return varint(num << 3 | 1) + struct.pack("<Q", rng.getrandbits(64))
    if kind == "b":  # bytes fields: anything.
        data = rng.randbytes(rng.randrange(64))
    else:  # string fields: valid UTF-8 (invalid UTF-8 does not parse: not well-formed).
        data = rng.choice(BOUNDARY_STRS) if rng.random() < 0.6 else bytes(
            rng.randrange(32, 127) for _ in range(rng.randrange(64)))
    return varint(num << 3 | 2) + varint(len(data)) + data


def message(spec, rng):
    if rng.random() < 0.1:
        return rng.randbytes(rng.randrange(256)), False  # Raw bytes: may not parse.
    chosen = [(n, k) for n, k in spec if rng.random() < 0.8]
    parts = [field(n, k, rng) for n, k in chosen]
    rng.shuffle(parts)
    # Well-formed unless a nested message got random bytes (which may not parse).
    return b"".join(parts), not any(k == "m" for _, k in chosen)


TOKENS = {"reader": "fuzz-reader-token-0123456789", "worker": "fuzz-worker-token-0123456789",
          "admin": "fuzz-admin-token-01234567890"}


def read_varint(data, i):
    shift = n = 0
    while True:
        b = data[i]
        n |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return n, i


def fields_of(data):
    """Top-level fields of a serialized message: {number: value} (varints and bytes)."""
    out, i = {}, 0
    while i < len(data):
        key, i = read_varint(data, i)
        if key & 7 == 0:
            out[key >> 3], i = read_varint(data, i)
        elif key & 7 == 2:
            n, i = read_varint(data, i)
            out[key >> 3], i = data[i:i + n], i + n
        elif key & 7 == 1:
            i += 8
        else:
            i += 4
    return out


def string_field(num, value):
    return varint(num << 3 | 2) + varint(len(value)) + value


class Member:
    """The one real member: joined with a worker token, heartbeating."""

    def __init__(self, channel):
        self.join = channel.unary_unary(COORD + "Join", request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
        self.beat = channel.unary_unary(COORD + "Heartbeat", request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
        self.rejoin()

    def rejoin(self):
        reply = fields_of(self.join(string_field(1, b"fuzz") + string_field(2, b"fuzz-member"),
                                    metadata=self.metadata(False), timeout=10))
        self.id, self.secret = reply.get(1, 0), reply.get(6, b"").decode()

    def metadata(self, with_member=True):
        md = [("authorization", "Bearer " + TOKENS["worker"])]
        if with_member:
            md.append(("x-zeroshard-member", f"{self.id}:{self.secret}"))
        return md

    def heartbeat(self):
        """Renews the lease; rejoins once evicted (fuzzed Leave/ReportFailure calls may
        remove it, and a fuzzed report may even complete the job: then it stays out)."""
        if self.id == 0:
            return
        try:
            self.beat(string_field(1, b"fuzz") + varint(2 << 3) + varint(self.id),
                      metadata=self.metadata(), timeout=10)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                return  # A fuzzed call may have ended the generation: answered, not a hang.
            try:
                self.rejoin()
            except grpc.RpcError:
                self.id, self.secret = 0, ""  # The job ended: no member from now on.


def random_metadata(rng, member):
    r = rng.random()
    if r < 0.15:
        return []
    if r < 0.25:
        return [("authorization", "Bearer " + rng.choice(["", "x" * 20, "fuzz-worker-token"]))]
    if r < 0.35:
        return [("authorization", "Bearer " + TOKENS["reader"])]
    if r < 0.5:
        return [("authorization", "Bearer " + TOKENS["admin"])]
    md = member.metadata(rng.random() < 0.8)
    if rng.random() < 0.1:  # A forged or mangled member credential.
        md[-1] = ("x-zeroshard-member", rng.choice([f"{member.id}:00", "1:x", ":", "a" * 80]))
    return md


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def start(bin_dir, tmp):
    log = open(os.path.join(tmp, "coordinator.log"), "w+")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.writelines(f"{role} {token}\n" for role, token in TOKENS.items())
    os.chmod(tokens, 0o600)  # Token files open to other users are refused.
    proc = subprocess.Popen([os.path.join(bin_dir, "zeroshard-coordinator"), "--listen",
                             "127.0.0.1:0", "--token-file", tokens,
                             "--job-config-json", '{"steps": 100000000}', "--metrics-listen", "127.0.0.1:0", "--job-id", "fuzz",
                             "--state-dir", os.path.join(tmp, "state"), "--checkpoint-dir",
                             os.path.join(tmp, "ckpt"), "--min-workers", "1", "--settle", "0.1"],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, wait_address(proc, log, "rpc_fuzz")


def wait_address(proc, log, who, seconds=20):
    """The gRPC address a starting coordinator prints to `log` (kills it if none),
    read on the log's file events."""
    def address():
        log.seek(0)
        m = re.search(r"listening on (\S+) \(grpc\)", log.read())
        return m.group(1) if m else None
    found = wait_for_files(os.path.dirname(log.name), address, seconds)
    if found:
        return found
    proc.kill()
    raise SystemExit(f"{who}: the coordinator printed no address")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000_000)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--rss-growth-mb", type=float, default=200)
    ap.add_argument("--progress", type=int, default=0,
                    help="print a line every N requests (0 = only at the end)")
    args = ap.parse_args()
    stop = []  # SIGTERM / SIGINT end the run early, with its summary.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    bin_dir = os.environ.get("ZEROSHARD_BIN_DIR", "build/bin")
    if not os.path.exists(os.path.join(bin_dir, "zeroshard-coordinator")):
        print("rpc_fuzz: no zeroshard-coordinator in", bin_dir)
        return 77
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="rpc_fuzz_")
    proc, address = start(bin_dir, tmp)
    channel = grpc.insecure_channel(address)
    ident = lambda b: b
    unary = {p: channel.unary_unary(p, request_serializer=ident, response_deserializer=ident)
             for p in METHODS}
    uploads = {p: channel.stream_unary(p, request_serializer=ident, response_deserializer=ident)
               for p in STREAM_IN}
    downloads = {p: channel.unary_stream(p, request_serializer=ident, response_deserializer=ident)
                 for p in STREAM_OUT}
    bidis = {p: channel.stream_stream(p, request_serializer=ident, response_deserializer=ident)
             for p in STREAM_BIDI}
    member = Member(channel)
    rss0 = rss_kb(proc.pid)
    counts, findings = {}, []
    sent, t0 = 0, time.time()
    while sent < args.requests and time.time() - t0 < args.seconds and not stop:
        kind = rng.random()
        if sent % 50 == 0:
            member.heartbeat()
        md = random_metadata(rng, member)
        try:
            if kind < 0.85:
                path = rng.choice(list(METHODS))
                body, parsed = message(METHODS[path], rng)
                unary[path](body, timeout=5, metadata=md)
            elif kind < 0.90:
                path = rng.choice(list(STREAM_IN))
                bodies = [message(STREAM_IN[path], rng) for _ in range(rng.randrange(1, 4))]
                parsed = all(p for _, p in bodies)
                uploads[path](iter([b for b, _ in bodies]), timeout=5, metadata=md)
            elif kind < 0.93:
                path = rng.choice(list(STREAM_BIDI))
                bodies = [message(STREAM_BIDI[path], rng) for _ in range(rng.randrange(1, 4))]
                parsed = all(p for _, p in bodies)
                for _ in bidis[path](iter([b for b, _ in bodies]), timeout=5, metadata=md):
                    pass
            else:
                path = rng.choice(list(STREAM_OUT))
                body, parsed = message(STREAM_OUT[path], rng)
                for _ in downloads[path](body, timeout=0.5, metadata=md):
                    pass
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        sent += 1
        if args.progress and sent % args.progress == 0:
            print(f"rpc_fuzz: {sent} requests, {sent / (time.time() - t0):.0f}/s, "
                  f"{len(findings)} findings", flush=True)
        counts[code.name] = counts.get(code.name, 0) + 1
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and "WatchGeneration" not in path \
                and "DownloadRange" not in path and "KvWait" not in path:
            findings.append(f"hang: {path}")
        if parsed and code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            findings.append(f"{code.name} from {path}")
        if proc.poll() is not None:
            findings.append(f"crash: exit {proc.returncode} after {path}")
            break
    elapsed = time.time() - t0
    growth = (rss_kb(proc.pid) - rss0) / 1024 if proc.poll() is None else 0
    if growth > args.rss_growth_mb:
        findings.append(f"RSS grew {growth:.0f} MB")
    proc.terminate()
    proc.wait(10)
    print(f"rpc_fuzz: seed {args.seed}: {sent} requests in {elapsed:.1f} s "
          f"({sent / elapsed:.0f}/s), RSS +{growth:.1f} MB, codes {sorted(counts.items())}")
    for f in sorted(set(findings)):
        print("rpc_fuzz: FINDING", f, "x", findings.count(f))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
