// Hostile checkpoint requests (issue 16, part B), without sockets: each test
// is an attack or wrong answer the issue lists, checked against the store
// with a job source as the coordinator sets it (CheckpointJob).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

namespace fs = std::filesystem;
using server::CheckpointJob;
using server::CheckpointStore;

class HostileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_hostile");
    plan_ = *MakeShardPlan(OddUnits(), 4, 4);
    store_ = Open();
  }
  std::unique_ptr<CheckpointStore> Open() {
    server::CheckpointStoreOptions o;
    o.dir = dir_;
    auto s = CheckpointStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    CheckpointJob job;  // What the coordinator knows: job "job", 4 ranks, OddUnits.
    job.job_id = "job";
    job.units = OddUnits();
    job.alignment = 4;
    job.max_world_size = 8;
    job.steps = 1000;
    job.generation = 0;
    job.world_size = 4;
    (*s)->SetJobSource([job]() -> absl::StatusOr<CheckpointJob> { return job; });
    return *std::move(s);
  }
  std::string BeginAll(int64_t step) {
    std::string id;
    for (int r = 0; r < 4; ++r) id = *store_->Begin(MakeBegin(plan_, step, r));
    return id;
  }
  std::string dir_;
  ShardPlan plan_;
  std::unique_ptr<CheckpointStore> store_;
};

// Old code: offset + length overflowed past the bounds check, the pwrite
// failed with INTERNAL and the whole pending checkpoint was dropped.
TEST_F(HostileStoreTest, OverflowingChunkIsRefusedAndKeepsOtherRanksUploads) {
  const ModelState st = RandomState(OddUnits(), 3);
  const std::string id = BeginAll(10);
  for (int r = 0; r < 3; ++r) {
    for (const auto& c : RankChunks(id, plan_, st, r, 5)) ASSERT_TRUE(store_->WriteChunk(c).ok());
  }
  v1::ShardChunk bad = MakeChunk(id, 3, plan_.units[0].name, v1::TENSOR_KIND_MASTER,
                                 std::numeric_limits<int64_t>::max(), std::vector<float>(16));
  absl::Status st_bad = store_->WriteChunk(bad);
  EXPECT_EQ(st_bad.code(), absl::StatusCode::kInvalidArgument) << st_bad;
  bad.set_offset(plan_.units[0].shard(3).offset);
  bad.set_length(std::numeric_limits<int64_t>::max());  // length * 4 would overflow.
  EXPECT_EQ(store_->WriteChunk(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PendingCount(), 1);
  for (const auto& c : RankChunks(id, plan_, st, 3, 5)) ASSERT_TRUE(store_->WriteChunk(c).ok());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(store_->Commit(id, r).ok());
  auto list = store_->List("job");
  ASSERT_EQ(list.checkpoints_size(), 1);
}

// Old code: allocated world_size * units * 3 coverage sets per request
// (~900 MB for 65536 ranks and 100 units) from a request of under 4 KiB:
// the plan's shards are recomputed, so the request need not carry them.
TEST_F(HostileStoreTest, BeginWithSizesOtherThanTheJobsIsRefused) {
  std::vector<UnitSpec> huge;
  for (int u = 0; u < 100; ++u) {
    const std::string name = "u" + std::to_string(u);
    huge.push_back({name, {{name + ".w", {1 << 20}}}});
  }
  const ShardPlan big = *MakeShardPlan(huge, 65536, 4);
  v1::BeginCheckpointRequest attack = MakeBegin(*MakeShardPlan(huge, 1, 4), 5, 0);
  attack.set_world_size(65536);
  attack.mutable_plan()->set_world_size(65536);
  for (int u = 0; u < 100; ++u) {
    attack.mutable_plan()->mutable_units(u)->clear_shards();
    attack.mutable_plan()->mutable_units(u)->set_padded_numel(big.units[u].padded_numel);
  }
  EXPECT_LT(attack.ByteSizeLong(), 4096u);
  absl::StatusOr<std::string> got = store_->Begin(attack);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  ShardPlan other = *MakeShardPlan(huge, 4, 4);  // The job's world size, not its model.
  got = store_->Begin(MakeBegin(other, 5, 0));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_EQ(store_->PendingCount(), 0);
}

// Old code: a commit at step 2^62 for job "evil" dropped the pending saves
// and became the latest checkpoint.
TEST_F(HostileStoreTest, EvilJobAtAbsurdStepCannotBeginOrDropPendingSaves) {
  const std::string legit = BeginAll(10);
  v1::BeginCheckpointRequest evil = MakeBegin(plan_, int64_t{1} << 62, 0);
  evil.set_job_id("evil");
  absl::Status st = store_->Begin(evil).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("evil"), std::string::npos);
  EXPECT_NE(st.message().find("\"job\""), std::string::npos);
  evil.set_job_id("job");
  EXPECT_EQ(store_->Begin(evil).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PendingCount(), 1);
  EXPECT_TRUE(store_->Commit(legit, 0).ok());  // Still pending (missing ranks).
}

TEST_F(HostileStoreTest, ReadsNamingAnotherJobAreRefused) {
  EXPECT_EQ(store_->CheckReadJob("evil").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->CheckReadJob("").ok());
  EXPECT_TRUE(store_->CheckReadJob("job").ok());
  EXPECT_EQ(store_->Get("evil", std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::DownloadRangeRequest req;
  req.set_job_id("evil");
  req.set_unit(plan_.units[0].name);
  req.set_kind(v1::TENSOR_KIND_MASTER);
  req.set_length(1);
  EXPECT_EQ(store_->ReadRange(req, [](const v1::RangeChunk&) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Old code: listed ids were the pending form "step-00000010.0.<nonce>".
TEST_F(HostileStoreTest, ListedIdsAreTheCommittedForm) {
  const ModelState st = RandomState(OddUnits(), 4);
  const std::string id = BeginAll(10);
  for (int r = 0; r < 4; ++r) {
    for (const auto& c : RankChunks(id, plan_, st, r, 9)) ASSERT_TRUE(store_->WriteChunk(c).ok());
    ASSERT_TRUE(store_->Commit(id, r).ok());
  }
  ASSERT_EQ(store_->List("").checkpoints_size(), 1);
  EXPECT_EQ(store_->List("").checkpoints(0).checkpoint_id(), "step-00000010");
  store_.reset();
  store_ = Open();  // And as indexed from the manifest at start.
  EXPECT_EQ(store_->List("").checkpoints(0).checkpoint_id(), "step-00000010");
}

TEST_F(HostileStoreTest, StaleTemporariesAreRemovedAtOpen) {
  const std::string pending = dir_ + "/.pending-step-00000003.0.deadbeef";
  fs::create_directories(pending);
  std::ofstream(pending + "/manifest.json.tmp") << "{";
  store_.reset();
  store_ = Open();
  EXPECT_FALSE(fs::exists(pending));
}

}  // namespace
}  // namespace zeroshard::testing
