// Load under attack (issue 16): 3,000 parked KvWaits plus 1,000 cancelled
// ones against the real zeroshard-coordinator must leave a legitimate
// worker's heartbeats fast and the coordinator's thread count bounded (no
// thread per wait), and cancelled waits must free their slots at once.
// Prints the heartbeat p50/p99 and the thread count. Async client calls: the
// attacker itself needs no threads.
#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/rpc/coordinator_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/subprocess.h"
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

TEST(KvWaitLoadTest, ParkedAndCancelledWaitsLeaveHeartbeatsFastAndThreadsBounded) {
  const std::string dir = testing::MakeTempDir("kv_load");
  const std::string log = dir + "/coordinator.log";
  ChildProcess coord({BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0",
                      "--metrics-listen", "127.0.0.1:0", "--job-id", "load", "--min-workers", "1",
                      "--settle", "0.1", "--heartbeat-interval", "0.5", "--lease-timeout", "10",
                      "--max-kv-waits-per-caller", "4500", "--max-kv-waits", "8192"},
                     log);
  const std::string address = testing::WaitForGrpcAddress(log, absl::Seconds(15), &coord);
  ASSERT_FALSE(address.empty()) << testing::ReadFile(log);
  auto client = CoordinatorClient::Connect(address);
  ASSERT_TRUE(client.ok());
  v1::JoinRequest join;
  join.set_job_id("load");
  join.set_worker_id("legit");
  join.set_host("127.0.0.1");
  auto joined = (*client)->Join(join);
  ASSERT_TRUE(joined.ok()) << joined.status();
  v1::HeartbeatRequest hb;
  hb.set_job_id("load");
  hb.set_member_id(joined->member_id());
  uint64_t generation = 0;
  for (int i = 0; i < 200 && generation == 0; ++i) {
    auto r = (*client)->Heartbeat(hb);
    if (r.ok() && r->in_generation()) generation = r->generation();
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(generation, 0u);
  const int threads_before = Threads(coord.pid());

  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls;
  auto park = [&](int n, int first) {
    for (int i = 0; i < n; ++i) {
      v1::KvWaitRequest req;
      req.set_job_id("load");
      req.set_generation(generation);
      for (int k = 0; k < 64; ++k) req.add_keys("never/" + std::to_string(first + i) + "/" + std::to_string(k));
      req.set_timeout_ms(600000);
      auto c = std::make_unique<Call>();
      c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      c->rpc = stub->AsyncKvWait(&c->ctx, req, &cq);
      c->rpc->Finish(&c->resp, &c->status, c.get());
      calls.push_back(std::move(c));
    }
  };
  park(1000, 0);
  absl::SleepFor(absl::Seconds(1));
  for (auto& c : calls) c->ctx.TryCancel();  // 1,000 cancelled ones...
  park(3000, 1000);                          // ...then 3,000 parked.
  absl::SleepFor(absl::Seconds(2));

  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    const absl::Time t0 = absl::Now();
    ASSERT_TRUE((*client)->Heartbeat(hb).ok());
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2], p99 = ms[ms.size() * 99 / 100];
  const int threads = Threads(coord.pid());
  std::printf("heartbeat p50 %.2f ms p99 %.2f ms; coordinator threads %d (before the waits %d)\n",
              p50, p99, threads, threads_before);
  EXPECT_LT(p99, 50.0);
  EXPECT_LT(threads, threads_before + 64);

  // Cancelled slots were freed: 500 more fit under the per-caller limit of
  // 4,500 only if the 1,000 cancelled ones no longer count.
  park(500, 4000);
  absl::SleepFor(absl::Seconds(1));
  for (auto& c : calls) c->ctx.TryCancel();
  int cancelled = 0, exhausted = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    const auto code = static_cast<Call*>(tag)->status.error_code();
    cancelled += code == grpc::StatusCode::CANCELLED;
    exhausted += code == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  std::printf("cancelled %d, refused RESOURCE_EXHAUSTED %d of %zu\n", cancelled, exhausted,
              calls.size());
  EXPECT_EQ(exhausted, 0);
  cq.Shutdown();
  EXPECT_EQ(coord.Stop(absl::Seconds(5)), 0);
}

}  // namespace
}  // namespace zeroshard
