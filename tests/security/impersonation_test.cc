// Member impersonation regressions (issue 16) against an in-process
// coordinator without tokens: a second client (the attacker, with its own
// identity) cannot act as another member, take its worker_id, or write the
// rendezvous store without being a member; a Join whose units differ from
// the job config's is refused naming the unit. Each attack has a positive
// control by the legitimate member.
#include "absl/strings/match.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/plan_proto.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"
#include "tests/server/await_generation.h"

namespace zeroshard {
namespace {

std::vector<UnitSpec> JobUnits(int64_t n) {
  return {UnitSpec{"embed", {TensorSpec{"embed.w", {n, 4}, DType::kFp32}}},
          UnitSpec{"head", {TensorSpec{"head.w", {4, 4}, DType::kFp32}}}};
}

class ImpersonationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.core.job_id = "imp";
    o.metrics_listen = "";
    o.core.min_workers = 2;
    o.core.settle = absl::Milliseconds(10);
    o.core.lease_timeout = absl::Seconds(30);
    o.core.units = JobUnits(8);
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    a_ = *CoordinatorClient::Connect(server_->address());
    b_ = *CoordinatorClient::Connect(server_->address());
    a_id_ = Join(*a_, "worker-a")->member_id();
    b_id_ = Join(*b_, "worker-b")->member_id();
    ASSERT_TRUE(server::testing::AwaitRunningGeneration(*server_->core(), absl::Seconds(3)));
    ASSERT_EQ(server_->generation(), 1u);
  }

  absl::StatusOr<v1::JoinResponse> Join(CoordinatorClient& c, const std::string& worker_id,
                                        int64_t rows = 8) {
    v1::JoinRequest j;
    j.set_job_id("imp");
    j.set_worker_id(worker_id);
    UnitSpecsToProto(JobUnits(rows), j.mutable_units());
    return c.Join(j);
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<CoordinatorClient> a_, b_;
  uint64_t a_id_ = 0, b_id_ = 0;
};

void ExpectDenied(const absl::Status& s) {
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
}

TEST_F(ImpersonationTest, JoinHandsOutASecret) {
  auto joined = Join(*a_, "worker-c");
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->member_secret().size(), 64u);
}

TEST_F(ImpersonationTest, AnotherMembersIdIsRefused) {
  v1::HeartbeatRequest hb;
  hb.set_job_id("imp");
  hb.set_member_id(a_id_);
  ExpectDenied(b_->Heartbeat(hb).status());
  EXPECT_FALSE(IsWorkerIdHeld(b_->Heartbeat(hb).status())) << "not a refusal a worker retries";
  EXPECT_TRUE(a_->Heartbeat(hb).ok());

  v1::StepReport step;
  step.set_job_id("imp");
  step.set_member_id(a_id_);
  step.set_generation(1);
  step.set_step(1000000000000000);
  ExpectDenied(b_->ReportStep(step));

  v1::ReportFailureRequest f;
  f.set_job_id("imp");
  f.set_member_id(a_id_);
  f.set_generation(1);
  ExpectDenied(b_->ReportFailure(f).status());

  v1::ReportHandoffRequest handoff;
  handoff.set_job_id("imp");
  handoff.set_member_id(a_id_);
  handoff.set_generation(1);
  ExpectDenied(b_->ReportHandoff(handoff).status());

  v1::LeaveRequest leave;
  leave.set_job_id("imp");
  leave.set_member_id(a_id_);
  ExpectDenied(b_->Leave(leave));
  EXPECT_EQ(server_->generation(), 1u) << "an attacker's call ended the generation";
  EXPECT_TRUE(a_->Heartbeat(hb).ok()) << "the victim was evicted";
}

TEST_F(ImpersonationTest, JoinWithALiveWorkersIdIsRefused) {
  auto evil = CoordinatorClient::Connect(server_->address());
  absl::Status s = Join(**evil, "worker-a").status();
  ExpectDenied(s);
  EXPECT_TRUE(absl::StrContains(s.message(), "worker-a")) << s;
  EXPECT_TRUE(IsWorkerIdHeld(s)) << s;
  v1::HeartbeatRequest hb;
  hb.set_job_id("imp");
  hb.set_member_id(a_id_);
  EXPECT_TRUE(a_->Heartbeat(hb).ok()) << "the victim was replaced";
  // The member itself may rejoin under its own id (it carries its credential).
  EXPECT_TRUE(Join(*a_, "worker-a").ok());
}

TEST_F(ImpersonationTest, NonMemberCannotOverwriteAPeersKey) {
  v1::KvSetRequest set;
  set.set_job_id("imp");
  set.set_generation(1);
  set.set_key("addr/0");
  set.set_value("127.0.0.1:1");
  ASSERT_TRUE(a_->KvSet(set).ok());
  auto outsider = CoordinatorClient::Connect(server_->address());
  set.set_value("10.6.6.6:666");
  ExpectDenied((*outsider)->KvSet(set));
  v1::KvAddRequest add;
  add.set_job_id("imp");
  add.set_generation(1);
  add.set_key("n");
  add.set_delta(1);
  ExpectDenied((*outsider)->KvAdd(add).status());
  v1::KvGetRequest get;
  get.set_job_id("imp");
  get.set_generation(1);
  get.set_key("addr/0");
  EXPECT_EQ(*a_->KvGet(get), "127.0.0.1:1");
}

TEST_F(ImpersonationTest, JoinWithDifferentUnitsIsRefusedNamingTheUnit) {
  auto other = CoordinatorClient::Connect(server_->address());
  absl::Status s = Join(**other, "worker-z", /*rows=*/9).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "embed")) << s;
  EXPECT_EQ(server_->core()->units().front().params.front().shape.front(), 8);
}

// A restarted worker (a new client, without the old run's credential) that
// keeps its worker id: refused while the old member's lease runs, joined by
// JoinRetryingHeldId as soon as the lease lapses; a wait shorter than the
// lease gives the refusal back.
TEST(HeldWorkerIdTest, RetriedJoinSucceedsOnceTheOldLeaseLapses) {
  CoordinatorOptions o;
  o.core.job_id = "held";
  o.metrics_listen = "";
  o.core.lease_timeout = absl::Milliseconds(1500);
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  v1::JoinRequest j;
  j.set_job_id("held");
  j.set_worker_id("worker-0");
  auto old_run = *CoordinatorClient::Connect((*server)->address());
  const absl::Time joined_at = absl::Now();
  ASSERT_TRUE(old_run->Join(j).ok());  // Then silent: no heartbeats, as if killed.
  auto restarted = *CoordinatorClient::Connect((*server)->address());
  absl::Status early = restarted->JoinRetryingHeldId(j, absl::Milliseconds(100), nullptr).status();
  EXPECT_TRUE(IsWorkerIdHeld(early)) << early;
  auto joined = restarted->JoinRetryingHeldId(j, absl::Seconds(20), nullptr);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_GE(absl::Now() - joined_at, absl::Milliseconds(1500)) << "joined before the lease lapsed";
  EXPECT_LT(absl::Now() - joined_at, absl::Seconds(10))
      << "not retried soon after the lease lapsed";
  bool stop_asked = false;
  auto third = *CoordinatorClient::Connect((*server)->address());
  absl::Status stopped = third
                             ->JoinRetryingHeldId(j, absl::Seconds(20),
                                                  [&] {
                                                    stop_asked = true;
                                                    return true;
                                                  })
                             .status();
  EXPECT_TRUE(stop_asked);
  EXPECT_EQ(stopped.code(), absl::StatusCode::kCancelled) << stopped;
}

}  // namespace
}  // namespace zeroshard
