// 64 simulated workers against the real zeroshard-coordinator process over
// loopback: they form one generation of 64; when one stops heartbeating,
// every survivor sees a generation of 63 within lease timeout + 1 s of the
// victim's last heartbeat. The lease (2 s) leaves room for a loaded
// 2-core machine to delay the survivors' heartbeats without expiring them.
#include <array>
#include <atomic>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/rpc/coordinator_client.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

using zeroshard::testing::BinPath;
using zeroshard::testing::ChildProcess;
using zeroshard::testing::MakeTempDir;
using zeroshard::testing::ReadFile;
using zeroshard::testing::WaitForGrpcAddress;

constexpr int kWorkers = 64;
constexpr int kThreads = 4;
constexpr int kVictim = 17;
const absl::Duration kLease = absl::Seconds(2);
const absl::Duration kInterval = absl::Milliseconds(150);

struct Worker {
  uint64_t member_id = 0;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> world_size{0};
  std::atomic<int64_t> saw_63_at_ns{0};  // Unix ns when it first saw world size 63.
};

// Joins every worker, recording its member id.
::testing::AssertionResult JoinAll(CoordinatorClient& client, std::vector<Worker>& workers) {
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    v1::JoinRequest j;
    j.set_job_id("loop");
    j.set_worker_id("w" + std::to_string(i));
    auto r = client.Join(j);
    if (!r.ok()) return ::testing::AssertionFailure() << r.status();
    workers[i].member_id = r->member_id();
  }
  return ::testing::AssertionSuccess();
}

// kThreads threads heartbeat every worker each kInterval (the simulated
// workers' cadence), recording what each reply shows, until Stop (or
// destruction); SilenceVictim stops the victim's heartbeats and returns
// once no victim heartbeat is in flight. AwaitUntil wakes on every round a
// thread completes: the test waits for conditions, never for time.
class Heartbeats {
 public:
  Heartbeats(CoordinatorClient& client, std::vector<Worker>& workers)
      : client_(client), workers_(workers) {
    for (int t = 0; t < kThreads; ++t) threads_.emplace_back([this, t] { Loop(t); });
  }
  ~Heartbeats() { Stop(); }

  // Returns when the victim's thread has begun a round after the silence,
  // so its last heartbeat's reply is recorded.
  void SilenceVictim() {
    absl::MutexLock lock(&mu_);
    const int64_t seen = rounds_[kVictim % kThreads];
    victim_silent_.store(true);
    const auto passed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return rounds_[kVictim % kThreads] >= seen + 2;
    };
    mu_.Await(absl::Condition(&passed));
  }
  // Whether `done` held within `timeout`, checked after every round.
  bool AwaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    const auto holds = [&done] { return done(); };
    return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
  }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // When the victim's last acknowledged heartbeat was sent back.
  absl::Time victim_last() const { return absl::FromUnixNanos(victim_last_ns_.load()); }

 private:
  void Loop(int t) {
    while (!stop_.load()) {
      for (int i = t; i < kWorkers; i += kThreads) {
        if (i == kVictim && victim_silent_.load()) continue;
        v1::HeartbeatRequest h;
        h.set_job_id("loop");
        h.set_member_id(workers_[i].member_id);
        auto r = client_.Heartbeat(h);
        if (!r.ok()) continue;
        if (i == kVictim) victim_last_ns_.store(absl::ToUnixNanos(absl::Now()));
        workers_[i].generation.store(r->generation());
        const int world = r->in_generation() ? r->world_size() : 0;
        workers_[i].world_size.store(world);
        if (world == kWorkers - 1 && workers_[i].saw_63_at_ns.load() == 0) {
          workers_[i].saw_63_at_ns.store(absl::ToUnixNanos(absl::Now()));
        }
      }
      {
        absl::MutexLock lock(&mu_);
        ++rounds_[t];
      }
      absl::SleepFor(kInterval);  // The heartbeat cadence, not a wait.
    }
  }

  CoordinatorClient& client_;
  std::vector<Worker>& workers_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> victim_silent_{false};
  std::atomic<int64_t> victim_last_ns_{0};
  absl::Mutex mu_;
  std::array<int64_t, kThreads> rounds_ ABSL_GUARDED_BY(mu_) = {};  // Rounds done per thread.
  std::vector<std::thread> threads_;
};

// Whether every worker (but the victim, with `skip_victim`) last saw `world`.
bool AllSee(const std::vector<Worker>& workers, int world, bool skip_victim) {
  for (int i = 0; i < kWorkers; ++i) {
    if (skip_victim && i == kVictim) continue;
    if (workers[i].world_size.load() != world) return false;
  }
  return true;
}

// Expects every survivor in a generation after `first`; returns the longest
// time from `victim_last` to a survivor first seeing the generation of 63.
absl::Duration SlowestSurvivor(const std::vector<Worker>& workers, uint64_t first,
                               absl::Time victim_last) {
  absl::Duration slowest = absl::ZeroDuration();
  for (int i = 0; i < kWorkers; ++i) {
    if (i == kVictim) continue;
    EXPECT_GT(workers[i].generation.load(), first);
    slowest = std::max(slowest, absl::FromUnixNanos(workers[i].saw_63_at_ns.load()) - victim_last);
  }
  return slowest;
}

TEST(LoopbackGenerationTest, SixtyFourWorkersThenSixtyThreeWithinLeasePlusOneSecond) {
  const std::string dir = MakeTempDir("loopback");
  const std::string log = dir + "/coordinator.log";
  ChildProcess coordinator(
      {BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
       "--job-id", "loop", "--min-workers", "2", "--settle", "0.2", "--heartbeat-interval", "0.15",
       "--lease-timeout", "2"},
      log);
  const std::string address = WaitForGrpcAddress(log, absl::Seconds(10), &coordinator);
  ASSERT_FALSE(address.empty()) << ReadFile(log);
  auto client = *CoordinatorClient::Connect(address);

  std::vector<Worker> workers(kWorkers);
  ASSERT_TRUE(JoinAll(*client, workers));
  Heartbeats heartbeats(*client, workers);
  ASSERT_TRUE(
      heartbeats.AwaitUntil([&] { return AllSee(workers, kWorkers, false); }, absl::Seconds(10)))
      << "no generation of 64 formed";
  const uint64_t first = workers[0].generation.load();
  for (const Worker& w : workers) EXPECT_EQ(w.generation.load(), first);

  heartbeats.SilenceVictim();
  const bool all_see_63 =
      heartbeats.AwaitUntil([&] { return AllSee(workers, kWorkers - 1, true); }, absl::Seconds(5));
  heartbeats.Stop();
  ASSERT_TRUE(all_see_63) << "survivors did not all see a generation of 63";
  const absl::Duration slowest = SlowestSurvivor(workers, first, heartbeats.victim_last());
  EXPECT_LE(slowest, kLease + absl::Seconds(1));
  EXPECT_GE(slowest, kLease - absl::Milliseconds(50));  // Not before the lease expired.
  std::printf("last survivor saw the generation of 63 %s after the victim's last heartbeat\n",
              absl::FormatDuration(slowest).c_str());
  coordinator.Signal(SIGTERM);
  EXPECT_EQ(coordinator.Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
