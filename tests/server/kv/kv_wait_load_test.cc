// Load under attack (issue 16): 3,000 parked KvWaits plus 1,000 cancelled
// ones against the real zeroshard-coordinator must leave a legitimate
// worker's heartbeats fast and the coordinator's thread count bounded (no
// thread per wait), and cancelled waits must free their slots at once.
// Prints the heartbeat p50/p99 and the thread count. Async client calls: the
// attacker itself needs no threads.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/rpc_security.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/await_generation_rpc.h"
#include "tests/server/http_get.h"
#include "tests/support/subprocess.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::ChildProcess;

int Threads(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

struct Call {
  grpc::ClientContext ctx;
  v1::KvWaitResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::KvWaitResponse>> rpc;
};

// The coordinator child, a legitimate member of its running generation,
// and the attacker's async KvWaits.
class KvWaitLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTempDir("kv_load");
    log_ = dir + "/coordinator.log";
    coord_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0",
                                 "--metrics-listen", "127.0.0.1:0", "--job-id", "load",
                                 "--min-workers", "1", "--settle", "0.1", "--heartbeat-interval",
                                 "0.5", "--lease-timeout", "10", "--max-kv-waits-per-caller",
                                 "4500", "--max-kv-waits", "8192"},
        log_);
    const std::string address = testing::WaitForGrpcAddress(log_, absl::Seconds(15), coord_.get());
    ASSERT_FALSE(address.empty()) << testing::ReadFile(log_);
    std::smatch port;
    const std::string log = testing::ReadFile(log_);
    ASSERT_TRUE(std::regex_search(log, port, std::regex(R"(127\.0\.0\.1:([0-9]+) \(metrics\))")))
        << log;
    metrics_port_ = std::stoi(port[1].str());
    auto client = CoordinatorClient::Connect(address);
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    v1::JoinRequest join;
    join.set_job_id("load");
    join.set_worker_id("legit");
    join.set_host("127.0.0.1");
    auto joined = client_->Join(join);
    ASSERT_TRUE(joined.ok()) << joined.status();
    hb_.set_job_id("load");
    hb_.set_member_id(joined->member_id());
    credential_ = absl::StrCat(joined->member_id(), ":", joined->member_secret());
    generation_ = server::testing::AwaitRunningGeneration(*client_, "load", absl::Seconds(10), 1);
    ASSERT_GT(generation_, 0u);
    auto beat = client_->Heartbeat(hb_);
    ASSERT_TRUE(beat.ok() && beat->in_generation() && beat->generation() == generation_);
    stub_ =
        v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  // Starts n KvWaits on 64 keys no one sets, numbered from `first`.
  void Park(int n, int first) {
    for (int i = 0; i < n; ++i) {
      v1::KvWaitRequest req;
      req.set_job_id("load");
      req.set_generation(generation_);
      for (int k = 0; k < 64; ++k) {
        req.add_keys("never/" + std::to_string(first + i) + "/" + std::to_string(k));
      }
      req.set_timeout_ms(600000);
      auto c = std::make_unique<Call>();
      c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      c->ctx.AddMetadata(kMemberHeader, credential_);  // KV reads are for members.
      c->rpc = stub_->AsyncKvWait(&c->ctx, req, &cq_);
      c->rpc->Finish(&c->resp, &c->status, c.get());
      calls_.push_back(std::move(c));
    }
  }
  // The coordinator's zeroshard_kv_waits_parked, or -1 when unreadable.
  int Parked() {
    const std::string text = server::testing::HttpGet(metrics_port_, "/metrics").body;
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(R"(\nzeroshard_kv_waits_parked ([0-9]+))")))
      return -1;
    return std::stoi(m[1].str());
  }
  // Until the coordinator holds exactly `n` parked waits (the calls sent
  // have all arrived, the cancelled ones have all gone), at most 30 s.
  bool AwaitParked(int n) {
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (Parked() != n && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
    return Parked() == n;
  }
  // 200 heartbeats 10 ms apart: {p50, p99} in ms.
  std::pair<double, double> HeartbeatLatency() {
    std::vector<double> ms;
    for (int i = 0; i < 200; ++i) {
      const absl::Time t0 = absl::Now();
      EXPECT_TRUE(client_->Heartbeat(hb_).ok());
      ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
      absl::SleepFor(absl::Milliseconds(10));
    }
    std::sort(ms.begin(), ms.end());
    return {ms[ms.size() / 2], ms[ms.size() * 99 / 100]};
  }
  std::string log_;
  int metrics_port_ = 0;
  std::unique_ptr<ChildProcess> coord_;
  std::unique_ptr<CoordinatorClient> client_;
  v1::HeartbeatRequest hb_;
  uint64_t generation_ = 0;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::string credential_;  // The member's x-zeroshard-member value.
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Call>> calls_;
};

TEST_F(KvWaitLoadTest, ParkedAndCancelledWaitsLeaveHeartbeatsFastAndThreadsBounded) {
  const int threads_before = Threads(coord_->pid());
  // The same heartbeats with no wait parked: what this machine gives now.
  const auto [base_p50, base_p99] = HeartbeatLatency();
  Park(1000, 0);
  ASSERT_TRUE(AwaitParked(1000)) << "parked: " << Parked();
  for (auto& c : calls_) c->ctx.TryCancel();  // 1,000 cancelled ones...
  Park(3000, 1000);                           // ...then 3,000 parked.
  ASSERT_TRUE(AwaitParked(3000)) << "parked: " << Parked() << " (the cancelled ones gone?)";
  const auto [p50, p99] = HeartbeatLatency();
  const int threads = Threads(coord_->pid());
  std::printf(
      "heartbeat p50 %.2f ms p99 %.2f ms (before the waits: p50 %.2f ms p99 %.2f ms); "
      "coordinator threads %d (before the waits %d)\n",
      p50, p99, base_p50, base_p99, threads, threads_before);
  // [Note: latency on a shared machine] The issue's bound is 50 ms; on a
  // machine whose other load already delays heartbeats past it (the
  // baseline above, same run), the attack may cost at most 2x that. The old
  // code (every waiter re-checked on each lock release) cost 60x.
  EXPECT_LT(p99, std::max(50.0, 2 * base_p99));
  EXPECT_LT(threads, threads_before + 64);

  // Cancelled slots were freed: 500 more fit under the per-caller limit of
  // 4,500 only if the 1,000 cancelled ones no longer count.
  Park(500, 4000);
  ASSERT_TRUE(AwaitParked(3500)) << "parked: " << Parked();
  for (auto& c : calls_) c->ctx.TryCancel();
  int cancelled = 0, exhausted = 0;
  for (size_t i = 0; i < calls_.size(); ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq_.Next(&tag, &ok));
    const auto code = static_cast<Call*>(tag)->status.error_code();
    cancelled += code == grpc::StatusCode::CANCELLED;
    exhausted += code == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  std::printf("cancelled %d, refused RESOURCE_EXHAUSTED %d of %zu\n", cancelled, exhausted,
              calls_.size());
  EXPECT_EQ(exhausted, 0);
  cq_.Shutdown();
  EXPECT_EQ(coord_->Stop(absl::Seconds(5)), 0);
}

}  // namespace
}  // namespace zeroshard
