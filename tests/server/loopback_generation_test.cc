// 64 simulated workers against the real zeroshard-coordinator process over
// loopback: they form one generation of 64; when one stops heartbeating,
// every survivor sees a generation of 63 within lease timeout + 1 s of the
// victim's last heartbeat. The lease (2 s) leaves room for a loaded
// 2-core machine to delay the survivors' heartbeats without expiring them.
#include <atomic>
#include <fstream>
#include <regex>
#include <thread>

#include "common/rpc/coordinator_client.h"
#include "gtest/gtest.h"
#include "support/subprocess.h"

namespace zeroshard {
namespace {

using zeroshard::testing::BinPath;
using zeroshard::testing::ChildProcess;
using zeroshard::testing::MakeTempDir;
using zeroshard::testing::ReadFile;

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

TEST(LoopbackGenerationTest, SixtyFourWorkersThenSixtyThreeWithinLeasePlusOneSecond) {
  const std::string dir = MakeTempDir("loopback");
  const std::string log = dir + "/coordinator.log";
  ChildProcess coordinator(
      {BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
       "--job-id", "loop", "--min-workers", "2", "--settle", "0.2", "--heartbeat-interval",
       "0.15", "--lease-timeout", "2"},
      log);
  std::string address;
  const std::regex port_line(R"(listening on (127\.0\.0\.1:[0-9]+) \(grpc\))");
  for (int i = 0; i < 500 && address.empty() && coordinator.Running(); ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, port_line)) address = m[1];
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(address.empty()) << ReadFile(log);
  auto client = std::shared_ptr<CoordinatorClient>(*CoordinatorClient::Connect(address));

  std::vector<Worker> workers(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    v1::JoinRequest j;
    j.set_job_id("loop");
    j.set_worker_id("w" + std::to_string(i));
    auto r = client->Join(j);
    ASSERT_TRUE(r.ok()) << r.status();
    workers[i].member_id = r->member_id();
  }

  std::atomic<bool> stop{false};
  std::atomic<bool> victim_silent{false};
  std::atomic<int64_t> victim_last_ns{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        for (int i = t; i < kWorkers; i += kThreads) {
          if (i == kVictim && victim_silent.load()) continue;
          v1::HeartbeatRequest h;
          h.set_job_id("loop");
          h.set_member_id(workers[i].member_id);
          auto r = client->Heartbeat(h);
          if (!r.ok()) continue;
          if (i == kVictim) victim_last_ns.store(absl::ToUnixNanos(absl::Now()));
          workers[i].generation.store(r->generation());
          const int world = r->in_generation() ? r->world_size() : 0;
          workers[i].world_size.store(world);
          if (world == kWorkers - 1 && workers[i].saw_63_at_ns.load() == 0) {
            workers[i].saw_63_at_ns.store(absl::ToUnixNanos(absl::Now()));
          }
        }
        absl::SleepFor(kInterval);
      }
    });
  }
  auto all_see = [&](int world, bool skip_victim) {
    for (int i = 0; i < kWorkers; ++i) {
      if (skip_victim && i == kVictim) continue;
      if (workers[i].world_size.load() != world) return false;
    }
    return true;
  };
  for (int i = 0; i < 200 && !all_see(kWorkers, false); ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(all_see(kWorkers, false)) << "no generation of 64 formed";
  const uint64_t first = workers[0].generation.load();
  for (const Worker& w : workers) EXPECT_EQ(w.generation.load(), first);

  victim_silent.store(true);
  absl::SleepFor(absl::Milliseconds(100));  // Let an in-flight victim heartbeat land.
  for (int i = 0; i < 100 && !all_see(kWorkers - 1, true); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  ASSERT_TRUE(all_see(kWorkers - 1, true)) << "survivors did not all see a generation of 63";
  const absl::Time victim_last = absl::FromUnixNanos(victim_last_ns.load());
  absl::Duration slowest = absl::ZeroDuration();
  for (int i = 0; i < kWorkers; ++i) {
    if (i == kVictim) continue;
    EXPECT_GT(workers[i].generation.load(), first);
    slowest = std::max(slowest, absl::FromUnixNanos(workers[i].saw_63_at_ns.load()) - victim_last);
  }
  EXPECT_LE(slowest, kLease + absl::Seconds(1));
  EXPECT_GE(slowest, kLease - absl::Milliseconds(50));  // Not before the lease expired.
  std::printf("last survivor saw the generation of 63 %s after the victim's last heartbeat\n",
              absl::FormatDuration(slowest).c_str());
  coordinator.Signal(SIGTERM);
  EXPECT_EQ(coordinator.Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
