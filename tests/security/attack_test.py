"""The attacks of issue 40 against a coordinator set up as deploy/ says
(mTLS, a token file, a checkpoint directory) while two real workers train,
through grpcio with stubs compiled from proto/ at test time. The attacker
holds what a leaked worker token and the shared worker certificate give:
it can join, but the job's two ranks are taken (max_workers 2), so it never
holds a rank. Each attack is refused with its code, and each has a
positive control: the same call succeeds for the party allowed to make it,
or the legitimate job goes on (it completes its steps with a finite loss,
and its latest checkpoint is its own, finite).

Exits 0 pass, 1 fail, 77 skipped (no openssl, grpcio or grpcio-tools)."""
import math
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import certs  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
from file_events import wait_for_files  # noqa: E402

BIN = pathlib.Path(os.environ.get("ZEROSHARD_BIN_DIR", "build/bin"))
PROTO = pathlib.Path(__file__).resolve().parents[2] / "proto"
TOKENS = {"worker": "attack-worker-token-0123456789", "reader": "attack-reader-token-0123456789",
          "admin": "attack-admin-token-01234567890"}
STEPS = 60
FAILURES = []


def check(cond, message):
    print(("ok: " if cond else "FAIL: ") + message, flush=True)
    if not cond:
        FAILURES.append(message)


def compile_protos(out):
    from grpc_tools import protoc
    files = [str(p.relative_to(PROTO)) for p in (PROTO / "zeroshard" / "v1").glob("*.proto")]
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(["protoc", f"-I{PROTO}", f"-I{include}", f"--python_out={out}",
                      f"--grpc_python_out={out}", *files])
    if rc != 0:
        raise RuntimeError(f"protoc exit {rc}")
    sys.path.insert(0, str(out))


class Process:
    def __init__(self, argv, cwd, log):
        self.log = log
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=open(log, "w"), stderr=subprocess.STDOUT)

    def text(self):
        return pathlib.Path(self.log).read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Client:
    """A grpcio client over mTLS with a token and, after Join, a member
    credential."""

    def __init__(self, d, address, token, grpc, pb, rpc):
        creds = grpc.ssl_channel_credentials(
            (d / "ca.pem").read_bytes(), (d / "client.key").read_bytes(),
            (d / "client.pem").read_bytes())
        self.channel = grpc.secure_channel(address, creds)
        self.pb, self.grpc = pb, grpc
        self.coord = rpc["coordinator"].CoordinatorStub(self.channel)
        self.ckpt = rpc["checkpoint"].CheckpointServiceStub(self.channel)
        self.token, self.member = token, None

    def metadata(self):
        md = [("authorization", f"Bearer {self.token}")] if self.token else []
        if self.member:
            md.append(("x-zeroshard-member", self.member))
        return md

    def call(self, stub, method, request, timeout=10):
        """(status code name, response or None)."""
        try:
            return "OK", getattr(stub, method)(request, metadata=self.metadata(), timeout=timeout)
        except self.grpc.RpcError as e:
            return e.code().name, None


def run(d, tmp, grpc, pb, rpc):
    (d / "tokens").write_text("".join(f"{r} {t}\n" for r, t in TOKENS.items()))
    (d / "tokens").chmod(0o600)
    (d / "worker-token").write_text(TOKENS["worker"] + "\n")
    (d / "worker-token").chmod(0o600)
    tls = ["--tls-ca", "ca.pem", "--tls-cert", "server.pem", "--tls-key", "server.key"]
    job = ('{"steps": %d, "checkpoint_every": 20, "global_batch": 4, "eval_every": 0, '
           '"log_path": "%s"}' % (STEPS, d / "steps.jsonl"))
    coord = Process([str(BIN / "zeroshard-coordinator"), "--listen", "127.0.0.1:0",
                     "--metrics-listen", "", "--job-id", "attack", "--min-workers", "2",
                     "--max-workers", "2", "--settle", "0.5", "--heartbeat-interval", "0.2",
                     "--lease-timeout", "3", "--state-dir", str(d / "state"), "--checkpoint-dir",
                     str(d / "ckpt"), "--job-config-json", job, "--token-file", "tokens", *tls],
                    d, tmp / "coordinator.log")
    procs = [coord]
    try:
        wait_for_files(tmp, lambda: " (grpc)" in coord.text(), 20)
        m = re.search(r"listening on (\S+) \(grpc\)", coord.text())
        check(m is not None, "the coordinator starts with mTLS, tokens and a checkpoint dir")
        if not m:
            return
        address = m.group(1)
        worker_tls = ["--tls-ca", "ca.pem", "--tls-cert", "client.pem", "--tls-key", "client.key",
                      "--token-file", "worker-token"]
        workers = [Process([str(BIN / "zeroshard-worker"), "--coordinator", address,
                            "--worker-id", f"w{i}", "--threads", "1", *worker_tls],
                           d, tmp / f"w{i}.log") for i in range(2)]
        procs += workers
        attacker = Client(d, address, TOKENS["worker"], grpc, pb, rpc)
        admin = Client(d, address, TOKENS["admin"], grpc, pb, rpc)

        def status():
            code, st = admin.call(admin.coord, "GetJobStatus", pb["coordinator"].GetJobStatusRequest())
            return st

        # Re-checked on each write to the step log in d (the job's log_path).
        check(wait_for_files(d, lambda: (status() or pb["coordinator"].JobStatus()).step >= 5, 90),
              "the two workers train")
        attacks(d, attacker, admin, pb, status, workers)
        check(all(w.proc.wait(timeout=180) == 0 for w in workers),
              "both workers finish the job and exit 0")
        st = status()
        check(st is not None and st.job_state == pb["coordinator"].JOB_STATE_COMPLETED
              and st.step == STEPS and math.isfinite(st.loss),
              f"the job completed its {STEPS} steps with a finite loss "
              f"({st.job_state if st else None}, step {st.step if st else None}, "
              f"loss {st.loss if st else None})")
        latest_checkpoint_is_legitimate(admin, pb)
    finally:
        for p in reversed(procs):
            p.stop()
        if FAILURES:
            for p in procs:
                print(f"--- {p.log}\n{p.text()[-2000:]}")


def attacks(d, attacker, admin, pb, status, workers):
    c, k = pb["coordinator"], pb["checkpoint"]
    job = "attack"
    # Reading the peers' addresses needs a member; a worker token alone is not one.
    code, _ = attacker.call(attacker.coord, "KvGet", c.KvGetRequest(job_id=job, generation=1, key="x"))
    check(code == "PERMISSION_DENIED", f"KvGet without joining: {code}")
    # Taking a live worker's id.
    code, _ = attacker.call(attacker.coord, "Join", c.JoinRequest(job_id=job, worker_id="w1"))
    check(code == "PERMISSION_DENIED", f"Join as live worker w1: {code}")
    code, joined = attacker.call(attacker.coord, "Join", c.JoinRequest(job_id=job, worker_id="mallory"))
    check(code == "OK", f"Join under a free worker_id (the token is a worker's): {code}")
    if joined is None:
        return
    attacker.member = f"{joined.member_id}:{joined.member_secret}"
    gen = status().generation
    # Rendezvous keys: overwrite rank 0's address, fill the store.
    for key in ("comm/0", "comm/1", "nccl_unique_id"):
        code, _ = attacker.call(attacker.coord, "KvSet",
                                c.KvSetRequest(job_id=job, generation=gen, key=key, value=b"evil"))
        check(code == "ABORTED", f"KvSet {key} by a member without a rank: {code}")
    code, _ = attacker.call(attacker.coord, "KvSet", c.KvSetRequest(
        job_id=job, generation=gen, key="fill/9", value=b"x" * (1 << 20)))
    check(code == "ABORTED", f"a 1 MiB KvSet by a member without a rank: {code}")
    # Checkpoints: replace a committed one, commit one far ahead, begin eight.
    # A checkpoint commits by its directory's rename into d / "ckpt".
    def committed():
        got = admin.call(admin.ckpt, "ListCheckpoints", k.ListCheckpointsRequest(job_id=job))[1]
        return got if got is not None and len(got.checkpoints) > 0 else None
    listed = wait_for_files(d / "ckpt", committed, 90)
    check(listed is not None and len(listed.checkpoints) > 0, "the workers committed a checkpoint")
    for step in ([listed.checkpoints[0].step] if listed and listed.checkpoints else []) + [99980] + \
            list(range(1000, 1008)):
        code, _ = attacker.call(attacker.ckpt, "BeginCheckpoint", k.BeginCheckpointRequest(
            job_id=job, step=step, rank=0, world_size=1, attempt=gen))
        check(code == "ABORTED", f"BeginCheckpoint step {step} by a member without a rank: {code}")
    # Ending the job: failures past max_failures, a report of the last step, a completed Leave.
    codes = {attacker.call(attacker.coord, "ReportFailure", c.ReportFailureRequest(
        job_id=job, member_id=joined.member_id, generation=gen, failed_rank=-1,
        reason="forged"))[0] for _ in range(21)}
    check(codes == {"PERMISSION_DENIED"}, f"21 ReportFailures by a member without a rank: {codes}")
    code, _ = attacker.call(attacker.coord, "ReportHandoff", c.ReportHandoffRequest(
        job_id=job, member_id=joined.member_id, generation=gen, step=1))
    check(code == "PERMISSION_DENIED", f"ReportHandoff by a member without a rank: {code}")
    code, _ = attacker.call(attacker.coord, "ReportStep", c.StepReport(
        job_id=job, member_id=joined.member_id, generation=gen, rank=0, step=STEPS, loss=1.0,
        val_loss=float("nan")))
    check(code == "ABORTED", f"ReportStep of the last step by a member without a rank: {code}")
    st = status()
    check(st.failures == 0 and st.job_state == pb["coordinator"].JOB_STATE_RUNNING and st.step < STEPS,
          f"the job still runs, no failure counted (state {st.job_state}, failures {st.failures})")
    code, _ = attacker.call(attacker.coord, "Leave", c.LeaveRequest(
        job_id=job, member_id=joined.member_id, job_completed=True))
    check(code == "OK" and status().job_state == pb["coordinator"].JOB_STATE_RUNNING,
          f"a completed Leave of a member without a rank ends nothing ({code})")
    # Positive control: the admin may read the keys of the running generation.
    code, _ = admin.call(admin.coord, "KvGet", c.KvGetRequest(job_id=job, generation=gen, key="x"))
    check(code in ("NOT_FOUND", "OK", "ABORTED"), f"the admin's KvGet passes the gate ({code})")


def latest_checkpoint_is_legitimate(admin, pb):
    k = pb["checkpoint"]
    code, info = admin.call(admin.ckpt, "GetCheckpoint", k.GetCheckpointRequest(job_id="attack"))
    check(code == "OK" and info.summary.step == STEPS,
          f"the latest checkpoint is the job's own step {STEPS} ({code}, "
          f"{info.summary.step if info else None})")
    if info is None:
        return
    unit = info.plan.units[0]
    request = k.DownloadRangeRequest(job_id="attack", unit=unit.name,
                                     kind=k.TENSOR_KIND_MASTER, offset=0,
                                     length=min(4096, unit.numel))
    values = []
    try:
        for chunk in admin.ckpt.DownloadRange(request, metadata=admin.metadata(), timeout=30):
            values += struct.unpack(f"<{len(chunk.data) // 4}f", chunk.data)
    except admin.grpc.RpcError as e:
        check(False, f"DownloadRange: {e.code().name}")
        return
    check(values and all(math.isfinite(v) for v in values),
          f"its weights are finite ({len(values)} of {unit.name} read)")


def main():
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (scripts/setup-test-tools.sh installs grpcio and grpcio-tools)")
        return 77
    if not shutil.which("openssl") or not (BIN / "zeroshard-coordinator").exists():
        print("skipped: openssl or the binaries not found")
        return 77
    import grpc
    with tempfile.TemporaryDirectory(prefix="zs_attack_") as tmp:
        tmp = pathlib.Path(tmp)
        compile_protos(tmp)
        from zeroshard.v1 import (checkpoint_pb2, checkpoint_pb2_grpc, common_pb2,  # noqa: E402
                                  coordinator_pb2, coordinator_pb2_grpc)
        pb = {"coordinator": coordinator_pb2, "checkpoint": checkpoint_pb2, "common": common_pb2}
        rpc = {"coordinator": coordinator_pb2_grpc, "checkpoint": checkpoint_pb2_grpc}
        (tmp / "certs").mkdir()
        d = certs.make_all(tmp / "certs")
        run(d, tmp, grpc, pb, rpc)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
