// One rank of the multi-process communicator test (multiprocess_test.cc):
// connects through a FileStore, runs the collectives on fp32 and bf16, checks
// them against references computed here, and exits 0 only if all match.
//   comm_multiprocess_rank <store_dir> <rank> <world_size> <mode> [backend]
// backend: gloo (default) or shm.
// mode "check": run and verify; "vanish": connect, then exit at once without
// closing anything (a crashed rank); "survive": connect, then expect the
// next all-reduce to fail (a peer vanished) within the bound, exit 0 if so; on
// shm the failure must be UNAVAILABLE (the peer's exit seen), not a timeout.
// mode "stall": start a large broadcast (a receiver, root 1), then stop the
// whole process (SIGSTOP) with its receive posted: a peer that stops reading
// mid-op, its sockets still open, once the root's writes fill them. mode "abort": once the staller
// is stopped, run the same broadcast, Abort it, and exit 0 if the op returns aborted and the
// communicator is destroyed promptly (kAbortBound), 2 if it had completed before the abort, 1
// otherwise.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "common/infra/child_process.h"
#include "tests/comm/rank_threads.h"
#include "tests/support/file_store.h"
#include "worker/comm/communicator_factory.h"

namespace zeroshard::testing {
namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

int Check(Communicator& comm, DType dtype, int64_t count) {
  const int r = comm.rank();
  const int n = comm.world_size();
  const size_t es = DTypeSize(dtype);
  std::vector<float> mine(count * n);
  for (int64_t i = 0; i < count * n; ++i) mine[i] = InputValue(r, i);
  std::vector<uint8_t> in = Encode(mine, dtype);
  std::vector<uint8_t> gathered(count * n * es), scattered(count * es), reduced(count * es);
  if (!comm.AllGather(in.data(), gathered.data(), count, dtype)->Wait(absl::Seconds(20)).ok() ||
      !comm.ReduceScatter(in.data(), scattered.data(), count, dtype, ReduceOp::kSum)
           ->Wait(absl::Seconds(20))
           .ok() ||
      !comm.AllReduce(in.data(), reduced.data(), count, dtype, ReduceOp::kMax)
           ->Wait(absl::Seconds(20))
           .ok() ||
      !comm.Broadcast(in.data(), in.data(), count, dtype, n - 1)->Wait(absl::Seconds(20)).ok() ||
      !comm.Barrier().ok()) {
    return Fail("a collective failed");
  }
  std::vector<float> g = Decode(gathered, dtype), s = Decode(scattered, dtype),
                     m = Decode(reduced, dtype), b = Decode(in, dtype);
  for (int64_t i = 0; i < count; ++i) {
    float sum = 0.0f, max = InputValue(0, i);
    for (int q = 0; q < n; ++q) {
      sum += InputValue(q, r * count + i);
      max = std::max(max, InputValue(q, i));
      if (g[q * count + i] != InputValue(q, i)) return Fail("all-gather mismatch");
    }
    if (s[i] != sum) return Fail("reduce-scatter mismatch");
    if (m[i] != max) return Fail("all-reduce max mismatch");
    if (b[i] != InputValue(n - 1, i)) return Fail("broadcast mismatch");
  }
  return 0;
}

// Until the process whose pid the vanishing rank left in the store has
// exited (AwaitExit, child_process.h: any process, not only a child).
// False after 20 s.
bool AwaitVanished(FileStore& store) {
  if (!store.Wait({"mp/vanished"}, absl::Seconds(20)).ok()) return false;
  auto bytes = store.Get("mp/vanished");
  int pid = 0;
  if (!bytes.ok() || !absl::SimpleAtoi(std::string(bytes->begin(), bytes->end()), &pid)) {
    return false;
  }
  return AwaitExit(pid, absl::Now() + absl::Seconds(20)).value_or(false);
}

// The stall case's broadcast: far more than the sockets' buffers hold, so a
// sender to the stopped rank is left with a write in progress.
constexpr int64_t kStallBytes = int64_t{64} << 20;
constexpr absl::Duration kAbortBound = absl::Seconds(5);
// The abort mode's exit code when its op had completed before the Abort (a
// rank that got all its data elsewhere); 0 when the op was aborted.
constexpr int kFinishedBeforeAbort = 2;

// Whether /proc says process `pid` is stopped (state T).
bool IsStopped(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'T';
}

int Stall(Communicator& comm, FileStore& store) {
  std::vector<char> data(kStallBytes);
  // Never waited for: the process stops with the op in flight.
  std::unique_ptr<Work> work = comm.Broadcast(data.data(), data.data(), kStallBytes / 4,
                                              DType::kFp32, 1, {absl::Seconds(60)});
  // Its receive posted and announced to the root, even on a loaded machine:
  // the root's sends are then written at once, not left waiting for it.
  absl::SleepFor(absl::Seconds(1));
  const std::string pid = std::to_string(getpid());
  if (!store.Set("mp/stalled", {pid.begin(), pid.end()}).ok()) return Fail("store set");
  std::fprintf(stderr, "rank %d stopping mid-broadcast\n", comm.rank());
  raise(SIGSTOP);
  return Fail("the stalled rank was resumed");
}

int AbortWhileStalled(std::unique_ptr<Communicator> comm, FileStore& store) {
  if (!store.Wait({"mp/stalled"}, absl::Seconds(20)).ok()) return Fail("no rank stalled");
  auto bytes = store.Get("mp/stalled");
  int pid = 0;
  if (!bytes.ok() || !absl::SimpleAtoi(std::string(bytes->begin(), bytes->end()), &pid)) {
    return Fail("store get");
  }
  const absl::Time stop_deadline = absl::Now() + absl::Seconds(20);
  while (!IsStopped(pid)) {
    if (absl::Now() > stop_deadline) return Fail("the stalling rank did not stop");
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int rank = comm->rank();
  std::vector<char> data(kStallBytes);
  std::unique_ptr<Work> work = comm->Broadcast(data.data(), data.data(), kStallBytes / 4,
                                               DType::kFp32, 1, {absl::Seconds(60)});
  absl::SleepFor(absl::Seconds(1));  // Writes to the stopped rank fill its socket.
  const absl::Time start = absl::Now();
  comm->Abort();
  const absl::Status s = work->Wait(kAbortBound);
  comm.reset();  // Joins the op thread: returns once the broadcast has.
  const absl::Duration took = absl::Now() - start;
  std::fprintf(stderr, "rank %d: broadcast %s; aborted and destroyed in %s\n", rank,
               s.ToString().c_str(), absl::FormatDuration(took).c_str());
  if (took > kAbortBound) return Fail("Abort and destruction took longer than the bound");
  return s.ok() ? kFinishedBeforeAbort : 0;
}

int Run(int argc, char** argv) {
  int rank = 0, world = 0;
  if ((argc != 5 && argc != 6) || !absl::SimpleAtoi(argv[2], &rank) ||
      !absl::SimpleAtoi(argv[3], &world)) {
    return Fail("usage: comm_multiprocess_rank <store_dir> <rank> <world_size> <mode> [backend]");
  }
  const std::string mode = argv[4];
  const std::string backend = argc == 6 ? argv[5] : "gloo";
  FileStore store(argv[1]);
  CommunicatorOptions opts;
  opts.timeout = absl::Seconds(20);
  auto comm = CreateCommunicator(backend, store, "mp/", rank, world, opts);
  if (!comm.ok()) return Fail(comm.status().ToString());
  // Everyone is connected before anyone vanishes (else a late rank's
  // rendezvous, not its all-reduce, would see the closed socket).
  if (mode != "check") {
    auto arrived = store.Add("mp/connected", 1);
    if (!arrived.ok()) return Fail("store add");
    if (*arrived == world && !store.Set("mp/all_connected", {1}).ok()) return Fail("store set");
    if (!store.Wait({"mp/all_connected"}, absl::Seconds(20)).ok()) {
      return Fail("peers did not connect");
    }
  }
  if (mode == "vanish") {
    const std::string pid = std::to_string(getpid());
    if (!store.Set("mp/vanished", {pid.begin(), pid.end()}).ok()) return Fail("store set");
    std::fprintf(stderr, "rank %d vanishing\n", rank);
    _exit(0);
  }
  if (mode == "stall") return Stall(**comm, store);
  if (mode == "abort") return AbortWhileStalled(*std::move(comm), store);
  if (mode == "survive") {
    if (!AwaitVanished(store)) return Fail("the vanishing rank did not go");
    float x = 1.0f;
    CollectiveOptions op_opts;
    op_opts.timeout = absl::Seconds(10);
    absl::Status s = (*comm)
                         ->AllReduce(&x, &x, 1, DType::kFp32, ReduceOp::kSum, op_opts)
                         ->Wait(absl::Seconds(15));
    std::fprintf(stderr, "rank %d after peer vanished: %s\n", rank, s.ToString().c_str());
    if (s.ok()) return Fail("all-reduce succeeded without a peer");
    if (backend == "shm" && s.code() != absl::StatusCode::kUnavailable) {
      return Fail("shm: a vanished peer must be UNAVAILABLE");
    }
    return 0;
  }
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    for (int64_t count : {int64_t{1}, int64_t{1003}}) {
      if (int rc = Check(**comm, dtype, count); rc != 0) return rc;
    }
  }
  std::fprintf(stderr, "rank %d ok\n", rank);
  return 0;
}

}  // namespace
}  // namespace zeroshard::testing

int main(int argc, char** argv) { return zeroshard::testing::Run(argc, argv); }
