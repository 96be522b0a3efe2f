// Least privilege inside the job (issue 40) against an in-process
// coordinator with a checkpoint service: each of two ranked workers, and a
// member waiting for the next generation, on its own channel with its own
// member credential. What one member may write is its own rank's: its
// rendezvous keys, its shard of a save of the running generation (committed
// only once every rank reported its step), and its own step report, which
// alone neither moves nor completes the job. Every
// refusal has a positive control by the rank that owns the write.
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/plan_proto.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_stack.h"
#include "tests/server/await_generation.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"

namespace zeroshard {
namespace {

using testing::OddUnits;

constexpr int64_t kSteps = 10;

class LeastPrivilegeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.metrics_listen = "";
    o.checkpoint_dir = testing::MakeTempDir("zs_least_privilege") + "/ckpt";
    o.core.job_id = "job";
    o.core.min_workers = 2;
    o.core.max_workers = 2;  // c waits: no generation admits it.
    o.core.alignment = 4;
    o.core.units = OddUnits();
    o.core.job_config_json = absl::StrCat(R"({"steps": )", kSteps, "}");
    o.core.settle = absl::Milliseconds(10);
    o.core.lease_timeout = absl::Seconds(30);
    auto s = StartCoordinatorStack(o, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    stack_.emplace(*std::move(s));
    for (const char* name : {"a", "b"}) members_.push_back(Connect(name));
    ASSERT_TRUE(server::testing::AwaitRunningGeneration(*stack_->server->core(), absl::Seconds(5)));
    ASSERT_EQ(stack_->server->generation(), 1u);
    waiting_ = Connect("c");  // Admitted only at a next generation.
    for (Member& m : members_) {
      v1::HeartbeatRequest hb;
      hb.set_job_id("job");
      hb.set_member_id(m.id);
      auto beat = m.client->Heartbeat(hb);
      ASSERT_TRUE(beat.ok()) << beat.status();
      m.rank = beat->rank();
    }
    if (members_[0].rank != 0) std::swap(members_[0], members_[1]);
    ASSERT_EQ(members_[0].rank, 0);
    ASSERT_EQ(members_[1].rank, 1);
  }

  struct Member {
    std::unique_ptr<CoordinatorClient> client;
    std::unique_ptr<v1::CheckpointService::Stub> checkpoints;
    uint64_t id = 0;
    int rank = -1;
  };

  Member Connect(const std::string& worker_id) {
    Member m;
    m.client = *CoordinatorClient::Connect(stack_->server->address());
    v1::JoinRequest j;
    j.set_job_id("job");
    j.set_worker_id(worker_id);
    UnitSpecsToProto(OddUnits(), j.mutable_units());
    auto joined = m.client->Join(j);
    EXPECT_TRUE(joined.ok()) << joined.status();
    m.id = joined.ok() ? joined->member_id() : 0;
    m.checkpoints = v1::CheckpointService::NewStub(m.client->channel());
    return m;
  }

  absl::Status Set(Member& m, const std::string& key, const std::string& value = "v") {
    v1::KvSetRequest r;
    r.set_job_id("job");
    r.set_generation(1);
    r.set_key(key);
    r.set_value(value);
    return m.client->KvSet(r);
  }
  absl::Status Add(Member& m, const std::string& key) {
    v1::KvAddRequest r;
    r.set_job_id("job");
    r.set_generation(1);
    r.set_key(key);
    r.set_delta(1);
    return m.client->KvAdd(r).status();
  }
  std::string Get(Member& m, const std::string& key) {
    v1::KvGetRequest r;
    r.set_job_id("job");
    r.set_generation(1);
    r.set_key(key);
    return m.client->KvGet(r).value_or("<absent>");
  }

  static ShardPlan Plan() { return *MakeShardPlan(OddUnits(), 2, 4); }

  absl::StatusOr<std::string> Begin(Member& m, int64_t step, int rank, uint64_t attempt = 1,
                                    const ShardPlan& plan = Plan()) {
    v1::BeginCheckpointRequest r = testing::MakeBegin(plan, step, rank);
    r.set_attempt(attempt);
    grpc::ClientContext ctx;
    v1::BeginCheckpointResponse out;
    grpc::Status s = m.checkpoints->BeginCheckpoint(&ctx, r, &out);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return out.checkpoint_id();
  }
  absl::Status Upload(Member& m, const std::string& id, int rank, uint32_t seed) {
    grpc::ClientContext ctx;
    v1::UploadShardResponse out;
    auto writer = m.checkpoints->UploadShard(&ctx, &out);
    for (const v1::ShardChunk& c :
         testing::RankChunks(id, Plan(), testing::RandomState(OddUnits(), seed), rank, 64)) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  absl::StatusOr<bool> Commit(Member& m, const std::string& id, int rank) {
    v1::CommitCheckpointRequest r;
    r.set_checkpoint_id(id);
    r.set_rank(rank);
    grpc::ClientContext ctx;
    v1::CommitCheckpointResponse out;
    grpc::Status s = m.checkpoints->CommitCheckpoint(&ctx, r, &out);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return out.committed();
  }
  absl::Status ReportStep(Member& m, int64_t step) {
    v1::StepReport r;
    r.set_job_id("job");
    r.set_member_id(m.id);
    r.set_generation(1);
    r.set_rank(m.rank);
    r.set_step(step);
    r.set_loss(1.0);
    r.set_val_loss(NAN);
    return m.client->ReportStep(r);
  }
  v1::JobStatus Status() {
    v1::GetJobStatusRequest r;
    return *members_[0].client->GetJobStatus(r);
  }

  std::optional<CoordinatorStack> stack_;
  std::vector<Member> members_;  // By rank.
  Member waiting_;
};

#define EXPECT_CODE(status, want) EXPECT_EQ((status).code(), absl::StatusCode::want) << (status)

TEST_F(LeastPrivilegeTest, ARankWritesOnlyItsOwnRendezvousKeys) {
  Member& r0 = members_[0];
  Member& r1 = members_[1];
  ASSERT_TRUE(Set(r0, "comm/0", "addr-of-0").ok());
  EXPECT_CODE(Set(r1, "comm/0", "forged"), kPermissionDenied);
  EXPECT_CODE(Set(r1, "gloo/rank_0", "forged"), kPermissionDenied);
  EXPECT_EQ(Get(r1, "comm/0"), "addr-of-0");
  EXPECT_TRUE(Set(r1, "comm/1").ok());
  EXPECT_TRUE(Set(r1, "gloo/rank_1").ok());
  // A shared key (an NCCL unique id) is rank 0's to set; a counter is
  // anyone's to add to, but not another rank's address.
  EXPECT_CODE(Set(r1, "nccl_unique_id", "forged"), kPermissionDenied);
  EXPECT_TRUE(Set(r0, "nccl_unique_id", "id").ok());
  EXPECT_TRUE(Add(r1, "arrived").ok());
  EXPECT_TRUE(Add(r0, "arrived").ok());
  EXPECT_EQ(Get(r0, "arrived"), "2");
  EXPECT_CODE(Add(r1, "comm/0"), kPermissionDenied);
  // A member without a rank writes nothing; it is told to wait (ABORTED),
  // as a worker of an ended generation is.
  EXPECT_CODE(Set(waiting_, "comm/2"), kAborted);
  EXPECT_CODE(Add(waiting_, "arrived"), kAborted);
}

TEST_F(LeastPrivilegeTest, ASaveIsBoundToTheRankItsGenerationAndItsWorldSize) {
  Member& r0 = members_[0];
  Member& r1 = members_[1];
  EXPECT_CODE(Begin(r1, 4, /*rank=*/0).status(), kPermissionDenied);
  EXPECT_CODE(Begin(r1, 4, 1, /*attempt=*/0).status(), kAborted);
  ShardPlan alone = *MakeShardPlan(OddUnits(), 1, 4);
  EXPECT_CODE(Begin(r0, 4, 0, 1, alone).status(), kPermissionDenied) << "world size 1";
  EXPECT_CODE(Begin(waiting_, 4, 0).status(), kAborted);

  auto id = Begin(r0, 4, 0);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(*Begin(r1, 4, 1), *id);
  // Rank 1 cannot write or commit rank 0's shard.
  EXPECT_CODE(Upload(r1, *id, 0, 7), kPermissionDenied);
  EXPECT_CODE(Commit(r1, *id, 0).status(), kPermissionDenied);
  ASSERT_TRUE(Upload(r0, *id, 0, 7).ok());
  EXPECT_FALSE(*Commit(r0, *id, 0));
  ASSERT_TRUE(Upload(r1, *id, 1, 7).ok());
  // Every shard is there, but step 4 is not trained: no rank reported it.
  EXPECT_CODE(Commit(r1, *id, 1).status(), kFailedPrecondition);
  ASSERT_TRUE(ReportStep(r0, 4).ok());
  EXPECT_CODE(Commit(r1, *id, 1).status(), kFailedPrecondition) << "rank 1 did not report it";
  ASSERT_TRUE(ReportStep(r1, 4).ok());
  EXPECT_TRUE(*Commit(r1, *id, 1));
  // A committed checkpoint is immutable: no rank begins its step again.
  EXPECT_CODE(Begin(r0, 4, 0).status(), kAlreadyExists);
  EXPECT_CODE(Begin(r1, 4, 1).status(), kAlreadyExists);
}

TEST_F(LeastPrivilegeTest, OneRanksStepReportNeitherMovesNorCompletesTheJob) {
  Member& r0 = members_[0];
  Member& r1 = members_[1];
  ASSERT_TRUE(ReportStep(r1, kSteps).ok());
  EXPECT_EQ(Status().step(), 0);
  EXPECT_EQ(Status().job_state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(ReportStep(r0, 3).ok());
  EXPECT_EQ(Status().step(), 3);
  ASSERT_TRUE(ReportStep(r0, kSteps).ok());
  EXPECT_EQ(Status().job_state(), v1::JOB_STATE_COMPLETED);
}

TEST_F(LeastPrivilegeTest, OneRanksCompletedLeaveDoesNotCompleteTheJob) {
  v1::LeaveRequest leave;
  leave.set_job_id("job");
  leave.set_member_id(members_[1].id);
  leave.set_job_completed(true);
  ASSERT_TRUE(members_[1].client->Leave(leave).ok());
  EXPECT_NE(Status().job_state(), v1::JOB_STATE_COMPLETED);
  leave.set_member_id(members_[0].id);
  ASSERT_TRUE(members_[0].client->Leave(leave).ok());
  EXPECT_EQ(Status().job_state(), v1::JOB_STATE_COMPLETED);
}

}  // namespace
}  // namespace zeroshard
