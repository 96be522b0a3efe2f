// Durable state: atomic replacement, round trip, and a coordinator core
// restarted on the same state dir resuming with a higher generation and the
// last step intact.
#include <filesystem>

#include "common/formats/atomic_file.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::TestOptions;

TEST(AtomicFileTest, ReplacesWholeFileAndLeavesNoTemporaries) {
  const std::string dir = zeroshard::testing::MakeTempDir("atomic");
  const std::string path = dir + "/f.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(*ReadWholeFile(path), "second, longer");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(absl::IsNotFound(ReadWholeFile(dir + "/missing").status()));
  EXPECT_FALSE(WriteFileAtomically(dir + "/no/such/dir/f", "x").ok());
}

TEST(DurableStateTest, RoundTripsAndRecordsCheckpoints) {
  const std::string dir = zeroshard::testing::MakeTempDir("durable");
  {
    auto state = DurableState::Open(dir);
    ASSERT_TRUE(state.ok());
    ASSERT_TRUE((*state)->SetJob("j", R"({"model":"tiny"})", 0).ok());
    ASSERT_TRUE((*state)->SetGeneration(7).ok());
    ASSERT_TRUE((*state)->SetLastStep(12, 2.5).ok());
    ASSERT_TRUE((*state)->SetLastStep(11, 9.0).ok());  // Older: ignored.
    ASSERT_TRUE((*state)->RecordCheckpoint({"ckpt-12", 12, "/m/12.json", R"({"a":1})", 5}).ok());
    EXPECT_TRUE(
        absl::IsAlreadyExists((*state)->RecordCheckpoint({"ckpt-12", 12, "/m/12.json", "", 5})));
    EXPECT_TRUE(absl::IsInvalidArgument((*state)->RecordCheckpoint({"", 1, "", "", 0})));
    EXPECT_TRUE(absl::IsInvalidArgument((*state)->RecordCheckpoint({"x", 1, "", "{nope", 0})));
  }
  auto state = DurableState::Open(dir);
  ASSERT_TRUE(state.ok());
  const DurableSnapshot s = (*state)->Get();
  EXPECT_EQ(s.job_id, "j");
  EXPECT_EQ(s.job_config_json, R"({"model":"tiny"})");
  EXPECT_EQ(s.generation, 7u);
  EXPECT_EQ(s.last_step, 12);
  EXPECT_EQ(s.last_loss, 2.5);
  ASSERT_EQ(s.checkpoints.size(), 1u);
  EXPECT_EQ(s.checkpoints[0].id, "ckpt-12");
  EXPECT_EQ(s.checkpoints[0].metadata_json, R"({"a":1})");
}

TEST(DurableStateTest, LifecycleRoundTripsAndOldFilesLoadWithoutIt) {
  const std::string dir = zeroshard::testing::MakeTempDir("durable_life");
  {
    auto state = DurableState::Open(dir);
    ASSERT_TRUE(state.ok());
    ASSERT_TRUE((*state)->SetLifecycle(3, "failed", "failure 3 exceeds max_failures 2").ok());
    EXPECT_TRUE(absl::IsInvalidArgument((*state)->SetLifecycle(1, "done", "")));
    EXPECT_TRUE(absl::IsInvalidArgument((*state)->SetLifecycle(-1, "", "")));
  }
  auto state = DurableState::Open(dir);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->Get().failures, 3);
  EXPECT_EQ((*state)->Get().job_ended, "failed");
  EXPECT_EQ((*state)->Get().job_ended_reason, "failure 3 exceeds max_failures 2");
  // A state file written before job lifecycles existed.
  const std::string old_dir = zeroshard::testing::MakeTempDir("durable_old");
  ASSERT_TRUE(WriteFileAtomically(old_dir + "/" + DurableState::kFileName,
                                  R"({"format":1,"job_id":"j","job_config_json":"{}",)"
                                  R"("units_json":"","generation":4,"last_step":9,)"
                                  R"("last_loss":null,"restarts":1,"checkpoints":[]})")
                  .ok());
  auto old = DurableState::Open(old_dir);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ((*old)->Get().failures, 0);
  EXPECT_EQ((*old)->Get().job_ended, "");
  EXPECT_EQ((*old)->Get().generation, 4u);
}

TEST(DurableStateTest, CorruptFileIsDataLoss) {
  const std::string dir = zeroshard::testing::MakeTempDir("durable");
  ASSERT_TRUE(WriteFileAtomically(dir + "/" + DurableState::kFileName, "{not json").ok());
  EXPECT_TRUE(absl::IsDataLoss(DurableState::Open(dir).status()));
}

TEST(DurableStateTest, RestartedCoreResumesAboveTheOldGenerationWithTheLastStep) {
  const std::string dir = zeroshard::testing::MakeTempDir("restart");
  CoreOptions o = TestOptions();
  o.job_config_json = R"({"stage":3})";
  uint64_t old_generation = 0;
  {
    CoreHarness h(o, dir);
    const uint64_t a = h.Join("a"), b = h.Join("b");
    h.Advance(absl::Seconds(1));
    old_generation = h.core->generation();
    ASSERT_EQ(old_generation, 1u);
    for (const auto& [member, rank] : {std::pair{b, 1}, std::pair{a, 0}}) {
      v1::StepReport r;
      r.set_job_id("job");
      r.set_member_id(member);
      r.set_generation(1);
      r.set_rank(rank);
      r.set_step(42);
      r.set_loss(3.25);
      ASSERT_TRUE(h.core->ReportStep(r).ok());
    }
  }
  o.job_config_json.clear();  // Comes back from the state dir.
  CoreHarness h(o, dir);
  EXPECT_GT(h.core->generation(), old_generation);
  auto status = h.core->GetJobStatus({});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->step(), 42);
  EXPECT_EQ(status->loss(), 3.25);
  const uint64_t a = h.Join("a");
  h.Join("b");
  h.Advance(absl::Seconds(1));
  const v1::GenerationInfo info = h.Info(a);
  EXPECT_GT(info.generation(), old_generation + 1);
  EXPECT_EQ(info.job_config_json(), R"({"stage":3})");

  CoreOptions other = o;
  other.job_id = "another";
  auto durable = DurableState::Open(dir);
  FakeClock clock;
  MetricsRegistry metrics;
  EXPECT_TRUE(absl::IsFailedPrecondition(
      CoordinatorCore::Create(other, std::move(*durable), &clock, &metrics).status()));
}

}  // namespace
}  // namespace zeroshard::server
