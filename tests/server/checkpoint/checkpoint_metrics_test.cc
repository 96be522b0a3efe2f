// CheckpointMetrics over a real CheckpointStore (no sockets): saves, bytes,
// save seconds (from an injected clock), the last committed step (also
// from what a reopened store holds), and failures by reason, each counted
// once per save. Expected bytes come from the shard plan (three fp32 files
// per unit, padded sizes), not from the store.
#include "server/checkpoint/checkpoint_metrics.h"

#include <cerrno>

#include "gtest/gtest.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/exposition.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

using server::CheckpointMetrics;
using server::CheckpointStore;

class CheckpointMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_metrics");
    plan_ = *MakeShardPlan(OddUnits(), 2, 4);
  }
  std::unique_ptr<CheckpointStore> Open() {
    server::CheckpointStoreOptions o;
    o.dir = dir_;
    o.now_unix_ms = [this] { return now_ms_; };
    o.write_fault = [this](int64_t) { return fault_; };
    auto s = CheckpointStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::string BeginAll(CheckpointStore& s, int64_t step, uint64_t attempt = 0) {
    std::string id;
    for (int r = 0; r < plan_.world_size; ++r) {
      auto b = MakeBegin(plan_, step, r);
      b.set_attempt(attempt);
      auto got = s.Begin(b);
      EXPECT_TRUE(got.ok()) << got.status();
      id = got.value_or("");
    }
    return id;
  }
  bool UploadAndCommit(CheckpointStore& s, const std::string& id) {
    const ModelState st = RandomState(OddUnits(), 5);
    bool committed = false;
    for (int r = 0; r < plan_.world_size; ++r) {
      for (const auto& c : RankChunks(id, plan_, st, r, 50)) EXPECT_TRUE(s.WriteChunk(c).ok());
      auto resp = s.Commit(id, r);
      committed = resp.ok() && resp->committed();
    }
    return committed;
  }
  double PlanBytes() const {
    double bytes = 0;
    for (const UnitPlan& u : plan_.units) bytes += 3.0 * 4.0 * static_cast<double>(u.padded_numel);
    return bytes;
  }
  Samples Scrape() const { return ParseExposition(registry_.Render()); }

  std::string dir_;
  ShardPlan plan_;
  int64_t now_ms_ = 1'000'000;
  int fault_ = 0;
  MetricsRegistry registry_;
};

TEST_F(CheckpointMetricsTest, CommitsCountBytesSecondsAndLastStep) {
  auto store = Open();
  CheckpointMetrics metrics(&registry_);
  metrics.Attach(store.get());
  Samples m = Scrape();
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_saves_total"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_bytes_total"), 0.0);
  for (const char* reason : server::kCheckpointFailureReasons) {
    EXPECT_EQ(
        Sample(m, std::string("zeroshard_checkpoint_failures_total{reason=\"") + reason + "\"}"),
        0.0)
        << reason;
  }
  EXPECT_EQ(CountSeries(m, "zeroshard_checkpoint_last_step"), 0);  // None committed yet.

  const std::string id = BeginAll(*store, 10);
  now_ms_ += 1500;  // The upload takes 1.5 s.
  ASSERT_TRUE(UploadAndCommit(*store, id));
  const std::string id2 = BeginAll(*store, 20);
  now_ms_ += 40'000;
  ASSERT_TRUE(UploadAndCommit(*store, id2));
  m = Scrape();
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_saves_total"), 2.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_bytes_total"), 2 * PlanBytes());
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_last_step"), 20.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_save_seconds_count"), 2.0);
  EXPECT_DOUBLE_EQ(*Sample(m, "zeroshard_checkpoint_save_seconds_sum"), 41.5);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_save_seconds_bucket{le=\"1\"}"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_save_seconds_bucket{le=\"2.5\"}"), 1.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_save_seconds_bucket{le=\"60\"}"), 2.0);

  // A coordinator restarted on the same dir starts from the newest step.
  store->SetObserver(nullptr);
  store.reset();
  MetricsRegistry fresh;
  CheckpointMetrics restarted(&fresh);
  auto reopened = Open();
  restarted.Attach(reopened.get());
  EXPECT_EQ(Sample(ParseExposition(fresh.Render()), "zeroshard_checkpoint_last_step"), 20.0);
  reopened->SetObserver(nullptr);
}

TEST_F(CheckpointMetricsTest, FailuresAreCountedOncePerSaveByReason) {
  auto store = Open();
  CheckpointMetrics metrics(&registry_);
  metrics.Attach(store.get());
  auto failures = [&](const std::string& reason) {
    return Sample(Scrape(), "zeroshard_checkpoint_failures_total{reason=\"" + reason + "\"}");
  };
  // Aborted by a rank.
  ASSERT_TRUE(store->Abort(BeginAll(*store, 1)).ok());
  EXPECT_EQ(failures("aborted"), 1.0);
  // A higher attempt replaces a cut-off save of the same step.
  BeginAll(*store, 2, 1);
  const std::string replacing = BeginAll(*store, 2, 2);
  EXPECT_EQ(failures("abandoned"), 1.0);
  // A corrupt chunk: counted when it arrives, not again when the save is
  // superseded.
  const std::string corrupt = BeginAll(*store, 3);
  auto bad = RankChunks(corrupt, plan_, RandomState(OddUnits(), 1), 0, 50)[0];
  bad.mutable_data()->at(0) ^= 0x1;
  EXPECT_EQ(store->WriteChunk(bad).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store->WriteChunk(bad).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(failures("checksum"), 1.0);
  // Disk full during an upload.
  const std::string full = BeginAll(*store, 4);
  fault_ = ENOSPC;
  EXPECT_EQ(store->WriteChunk(RankChunks(full, plan_, RandomState(OddUnits(), 1), 0, 50)[0]).code(),
            absl::StatusCode::kResourceExhausted);
  fault_ = 0;
  EXPECT_EQ(failures("disk_full"), 1.0);
  // Committing step 5 drops the older pending saves: step 2's replacement
  // (abandoned) and step 3's corrupt one (already counted).
  ASSERT_TRUE(UploadAndCommit(*store, BeginAll(*store, 5)));
  EXPECT_EQ(failures("abandoned"), 2.0);
  EXPECT_EQ(failures("checksum"), 1.0);
  EXPECT_EQ(failures("io_error"), 0.0);
  EXPECT_EQ(Sample(Scrape(), "zeroshard_checkpoint_saves_total"), 1.0);
  EXPECT_EQ(store->PendingCount(), 0) << replacing;
  store->SetObserver(nullptr);
}

}  // namespace
}  // namespace zeroshard::testing
