// Hostile input to the coordinator's state machine (issue 16, part B), with
// a FakeClock and no sockets: step reports far ahead or with a negative
// loss, a failed durable write, and KvWait's parked waiters (indexed by key,
// cancelled at once, limited per caller, expired by the clock).
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/coordinator_core.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::TestOptions;

class HostileCoreTest : public ::testing::Test {
 protected:
  void Start(CoreOptions o, const std::string& state_dir = "") {
    o.job_config_json = R"({"steps": 100})";
    h_ = std::make_unique<CoreHarness>(o, state_dir);
    a_ = h_->Join("a");
    b_ = h_->Join("b");
    h_->Advance(absl::Seconds(1));
    ASSERT_EQ(h_->core->state(), GenerationState::kRunning);
  }
  v1::StepReport Report(int64_t step, double loss, uint64_t member = 0) {
    if (member == 0) member = a_;
    v1::StepReport r;
    r.set_job_id("job");
    r.set_member_id(member);
    r.set_generation(h_->core->generation());
    r.set_rank(h_->Info(member).rank());
    r.set_step(step);
    r.set_loss(loss);
    r.set_val_loss(std::numeric_limits<double>::quiet_NaN());
    return r;
  }
  // Both ranks report `step`, b first: a's report makes it the job's step
  // ([Note: agreed step]) and is the one answered.
  absl::Status ReportAll(int64_t step, double loss) {
    if (absl::Status s = h_->core->ReportStep(Report(step, loss, b_)); !s.ok()) return s;
    return h_->core->ReportStep(Report(step, loss));
  }
  int64_t StatusStep() {
    v1::GetJobStatusRequest r;
    return h_->core->GetJobStatus(r)->step();
  }
  v1::KvWaitRequest Wait(std::vector<std::string> keys, int64_t timeout_ms = 60000) {
    v1::KvWaitRequest r;
    r.set_job_id("job");
    r.set_generation(h_->core->generation());
    for (auto& k : keys) r.add_keys(k);
    r.set_timeout_ms(timeout_ms);
    return r;
  }
  absl::Status Set(const std::string& key) {
    v1::KvSetRequest r;
    r.set_job_id("job");
    r.set_generation(h_->core->generation());
    r.set_key(key);
    r.set_value("v");
    return h_->core->KvSet(r);
  }
  // Parks a wait whose outcome lands in outcomes_[name].
  absl::StatusOr<uint64_t> Park(const std::string& name, std::vector<std::string> keys,
                                const std::string& caller = "ipv4:10.0.0.9",
                                int64_t timeout_ms = 60000) {
    return h_->core->StartKvWait(Wait(std::move(keys), timeout_ms), caller,
                                 [this, name](absl::Status s) { outcomes_[name] = s; });
  }
  std::unique_ptr<CoreHarness> h_;
  uint64_t a_ = 0, b_ = 0;
  std::map<std::string, absl::Status> outcomes_;
};

// Old code: step 10^15 and loss -123 were recorded and persisted.
TEST_F(HostileCoreTest, StepPastTheJobAndNegativeLossAreRefused) {
  Start(TestOptions());
  EXPECT_EQ(h_->core->ReportStep(Report(1000000000000000, 1.0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h_->core->ReportStep(Report(5, -123.0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusStep(), 0);
  EXPECT_TRUE(ReportAll(5, std::numeric_limits<double>::quiet_NaN()).ok());
  EXPECT_TRUE(ReportAll(6, 2.5).ok());
  EXPECT_EQ(StatusStep(), 6);
}

// Old code: the failed write answered an error but kept the step in memory.
TEST_F(HostileCoreTest, FailedDurableWriteKeepsMemoryAndDiskAgreeing) {
  const std::string dir = zeroshard::testing::MakeTempDir("hostile_state");
  Start(TestOptions(), dir);
  ASSERT_TRUE(ReportAll(3, 2.0).ok());
  std::filesystem::remove_all(dir);  // Every later write of the state file fails.
  EXPECT_FALSE(ReportAll(4, 1.5).ok());
  EXPECT_EQ(StatusStep(), 3);
  EXPECT_EQ(h_->core->durable()->Get().last_step, 3);
  std::filesystem::create_directories(dir);  // Space again: the next report is kept.
  ASSERT_TRUE(ReportAll(5, 1.0).ok());
  EXPECT_EQ(StatusStep(), 5);
  EXPECT_EQ(DurableState::Open(dir).value()->Get().last_step, 5);
}

TEST_F(HostileCoreTest, StaleStateTemporariesAreRemovedAtOpen) {
  const std::string dir = zeroshard::testing::MakeTempDir("hostile_tmp");
  const std::string stale = dir + "/coordinator_state.json.tmp.AbC123";
  std::ofstream(stale) << "{";
  ASSERT_TRUE(DurableState::Open(dir).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));
}

// Old code: every waiter re-checked on every lock release; a Set now
// finishes only the waiters whose last missing key it was.
TEST_F(HostileCoreTest, SetWakesOnlyThatKeysWaiters) {
  Start(TestOptions());
  ASSERT_TRUE(Park("x", {"x"}).ok());
  ASSERT_TRUE(Park("xy", {"x", "y"}).ok());
  ASSERT_TRUE(Park("z", {"z"}).ok());
  ASSERT_TRUE(Set("x").ok());
  EXPECT_TRUE(outcomes_.at("x").ok());
  EXPECT_EQ(outcomes_.count("xy"), 0u);
  EXPECT_EQ(outcomes_.count("z"), 0u);
  ASSERT_TRUE(Set("y").ok());
  EXPECT_TRUE(outcomes_.at("xy").ok());
  EXPECT_EQ(h_->core->parked_kv_waits(), 1u);
}

// Old code: a cancelled wait kept its thread for its whole timeout.
TEST_F(HostileCoreTest, CancelFreesTheSlotAtOnceAndLimitsNameThemselves) {
  CoreOptions o = TestOptions();
  o.max_kv_waits_per_caller = 2;
  o.max_kv_waits = 3;
  Start(o);
  auto first = Park("1", {"k"});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Park("2", {"k"}).ok());
  absl::Status full = Park("3", {"k"}).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("per-caller limit is 2"), std::string::npos) << full;
  ASSERT_TRUE(Park("other", {"k"}, "ipv4:10.0.0.7").ok());
  EXPECT_NE(Park("4", {"k"}, "ipv4:10.0.0.8").status().message().find("limit is 3"),
            std::string::npos);
  h_->core->CancelKvWait(*first);
  EXPECT_EQ(outcomes_.at("1").code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(Park("5", {"k"}).ok());
}

TEST_F(HostileCoreTest, ParkedWaitsExpireByTheClockAndEndWithTheGeneration) {
  Start(TestOptions());
  ASSERT_TRUE(Park("short", {"k"}, "c", 100).ok());
  ASSERT_TRUE(Park("long", {"k"}, "c", 60000).ok());
  h_->Advance(absl::Milliseconds(150));
  EXPECT_EQ(outcomes_.at("short").code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(outcomes_.count("long"), 0u);
  h_->Join("c");  // A joiner ends the generation once settled (handoff_grace 0).
  h_->Advance(absl::Seconds(1));
  EXPECT_EQ(outcomes_.at("long").code(), absl::StatusCode::kAborted) << outcomes_.at("long");
  EXPECT_EQ(h_->core->parked_kv_waits(), 0u);
}

}  // namespace
}  // namespace zeroshard::server
