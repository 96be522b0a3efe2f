// shm communicator behaviour beyond results: rendezvous errors (a rank that
// never comes, another host, a malformed entry, bad options), timeouts, Abort
// and a peer that leaves, no names left in /dev/shm, the factory by name.
// A peer process that dies is comm_shm_multiprocess_test's.
#include <dirent.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/shm_segment.h"

namespace zeroshard::testing {
namespace {

std::vector<std::unique_ptr<Communicator>> MustConnect(InMemoryStore& store, int n,
                                                       const std::string& prefix = "gen/") {
  return ExpectConnected(ConnectShm(store, prefix, n));
}

// Names in /dev/shm this process created.
std::vector<std::string> OwnShmNames() {
  std::vector<std::string> names;
  const std::string mine = absl::StrCat("zeroshard-", getpid(), "-");
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (absl::StartsWith(e->d_name, mine)) names.push_back(e->d_name);
    }
    closedir(dir);
  }
  return names;
}

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(ShmBehaviourTest, RankThatNeverShowsUpGivesDeadlineExceededAndLeavesNoName) {
  InMemoryStore store;
  ShmOptions opts;
  opts.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto comm = CreateShmCommunicator(store, "gen/", 0, 2, opts);  // rank 1 never comes.
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(OwnShmNames().empty());
}

TEST(ShmBehaviourTest, ConnectedCommunicatorsLeaveNoNames) {
  InMemoryStore store;
  auto comms = MustConnect(store, 3);
  ASSERT_EQ(comms.size(), 3u);
  EXPECT_TRUE(OwnShmNames().empty());  // Unlinked once every rank mapped them.
}

TEST(ShmBehaviourTest, RankOnAnotherHostIsFailedPrecondition) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("gen/shm/1", Bytes("/zeroshard-x\n1\nsome-other-boot/other-host")).ok());
  auto comm = CreateShmCommunicator(store, "gen/", 0, 2);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "other-host")) << comm.status();
  EXPECT_TRUE(OwnShmNames().empty());
}

TEST(ShmBehaviourTest, MalformedRendezvousEntryIsInvalidArgument) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("gen/shm/1", Bytes("no pid here")).ok());
  auto comm = CreateShmCommunicator(store, "gen/", 0, 2);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "rank 1")) << comm.status();
}

TEST(ShmBehaviourTest, SegmentThatIsNotThereIsNotFound) {
  InMemoryStore store;
  ASSERT_TRUE(
      store.Set("gen/shm/1", Bytes(absl::StrCat("/zeroshard-gone\n1\n", ShmHostId()))).ok());
  auto comm = CreateShmCommunicator(store, "gen/", 0, 2);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kNotFound) << comm.status();
}

TEST(ShmBehaviourTest, BadOptionsAreInvalidArgument) {
  InMemoryStore store;
  ShmOptions small;
  small.slot_bytes = 1000;
  EXPECT_EQ(CreateShmCommunicator(store, "a/", 0, 1, small).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator(store, "a/", 2, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator(store, "a/", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto solo = CreateShmCommunicator(store, "solo/", 0, 1);
  ASSERT_TRUE(solo.ok()) << solo.status();
  EXPECT_EQ((*solo)
                ->AllReduce(nullptr, nullptr, 4, DType::kFp32, ReduceOp::kSum)
                ->Wait(absl::Seconds(1))
                .code(),
            absl::StatusCode::kInvalidArgument);
  float x = 1;
  EXPECT_EQ((*solo)
                ->ReduceScatter(&x, &x, 1, DType::kInt64, ReduceOp::kSum)
                ->Wait(absl::Seconds(1))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShmBehaviourTest, OpTimeoutFiresWhenPeerNeverIssues) {
  InMemoryStore store;
  auto comms = MustConnect(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<float> in(16, 1.0f), out(32);
  CollectiveOptions opts;
  opts.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::Status s =
      comms[0]->AllGather(in.data(), out.data(), 16, DType::kFp32, opts)->Wait(absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Unusable afterwards, with the same error.
  EXPECT_EQ(comms[0]->Barrier().code(), absl::StatusCode::kDeadlineExceeded);
  // Rank 1 comes late: the op rank 0 posted completes, the next one learns
  // at once that rank 0 left (not at its own 30 s deadline).
  CollectiveOptions long_wait;
  long_wait.timeout = absl::Seconds(30);
  const absl::Time late = absl::Now();
  std::vector<float> in1(16, 2.0f), out1(32);
  EXPECT_TRUE(comms[1]
                  ->AllGather(in1.data(), out1.data(), 16, DType::kFp32, long_wait)
                  ->Wait(absl::Seconds(30))
                  .ok());
  EXPECT_EQ(comms[1]->Barrier(long_wait).code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - late, absl::Seconds(2));
}

TEST(ShmBehaviourTest, SegmentsMoveAndUnlinkOnce) {
  {
    auto a = ShmSegment::Create(ShmSegmentName(0), 0, 4096);
    auto b = ShmSegment::Create(ShmSegmentName(1), 1, 4096);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(OwnShmNames().size(), 2u);
    *a = std::move(*b);  // a's own name goes, b's moves with its mapping.
    EXPECT_EQ(a->header().rank, 1);
    EXPECT_EQ(OwnShmNames().size(), 1u);
    ShmSegment c(std::move(*a));
    EXPECT_EQ(c.header().rank, 1);
  }
  EXPECT_TRUE(OwnShmNames().empty());
}

TEST(ShmBehaviourTest, AbortFailsPendingOpFastAndThePeerSeesItLeave) {
  // Declared before the communicators, so they outlive them: an aborted op's
  // body may still write its buffers until its communicator is destroyed
  // ([Note: completion wins once], op_queue.h). Rank 0's queue thread can
  // wake after Abort, find rank 1's post and write `a` after the test body.
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  InMemoryStore store;
  auto comms = MustConnect(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  auto pending = comms[0]->AllReduce(a.data(), a.data(), 8, DType::kFp32, ReduceOp::kSum);
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  comms[0]->Abort();
  EXPECT_EQ(pending->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(comms[0]->Barrier().code(), absl::StatusCode::kAborted);
  // Rank 1's matching op may still complete (rank 0 had posted its part);
  // the next one finds rank 0 gone: UNAVAILABLE, not a timeout.
  CollectiveOptions long_wait;
  long_wait.timeout = absl::Seconds(30);
  comms[1]
      ->AllReduce(b.data(), b.data(), 8, DType::kFp32, ReduceOp::kSum, long_wait)
      ->Wait(absl::Seconds(30))
      .IgnoreError();
  absl::Status s = comms[1]->Barrier(long_wait);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 0")) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(ShmBehaviourTest, PeerThatFinishesItsOpsAndLeavesDoesNotFailTheLastOp) {
  InMemoryStore store;
  auto comms = MustConnect(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  auto w0 = comms[0]->AllReduce(a.data(), a.data(), 8, DType::kFp32, ReduceOp::kSum);
  auto w1 = comms[1]->AllReduce(b.data(), b.data(), 8, DType::kFp32, ReduceOp::kSum);
  ASSERT_TRUE(w0->Wait(absl::Seconds(10)).ok());
  comms[0].reset();  // Rank 0 is done and gone; rank 1 may still be reading.
  EXPECT_TRUE(w1->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ(b[0], 3.0f);
}

TEST(ShmBehaviourTest, StatsAndFactoryByName) {
  InMemoryStore store;
  auto shm = CreateCommunicator("shm", store, "f/", 0, 1);
  ASSERT_TRUE(shm.ok()) << shm.status();
  std::vector<float> x(10, 1.0f), y(10);
  ASSERT_TRUE((*shm)->AllGather(x.data(), y.data(), 10, DType::kFp32)->Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(y, x);
  const CommStats stats = (*shm)->stats();
  const CommOpStats& s = stats.of(CommOp::kAllGather);
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.bytes, 40);
  EXPECT_GT(s.seconds, 0.0);
  auto bad = CreateCommunicator("shmem", store, "g/", 0, 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "\"shm\"")) << bad.status();
}

}  // namespace
}  // namespace zeroshard::testing
