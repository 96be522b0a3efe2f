// CheckpointStore::Commit against a chunk write under way
// ([Note: writes in flight], server/checkpoint/checkpoint_store_io.cc).
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

// A chunk is hashed as it is written, so a bad chunk sent again over a range
// already covered reaches the file before its hash is judged. The last
// Commit must wait for that verdict (and then refuse) instead of committing
// the bad bytes as verified.
TEST(CommitWaitTest, CommitWaitsForAWriteUnderWayAndRefusesItsBadBytes) {
  const ShardPlan plan = *MakeShardPlan(OddUnits(), 4, 4);
  absl::Notification writing, release;
  std::atomic<bool> hold{false};
  server::CheckpointStoreOptions o;
  o.dir = MakeTempDir("ckpt_commit_wait");
  o.write_fault = [&](int64_t) {
    if (hold.exchange(false)) {  // Only the re-sent chunk waits here.
      writing.Notify();
      release.WaitForNotification();
    }
    return 0;
  };
  std::unique_ptr<server::CheckpointStore> s = *server::CheckpointStore::Open(o);
  const ModelState st = RandomState(OddUnits(), 8);
  std::string id;
  for (int r = 0; r < plan.world_size; ++r) id = *s->Begin(MakeBegin(plan, 5, r));
  for (int r = 0; r < plan.world_size; ++r) {
    for (const auto& c : RankChunks(id, plan, st, r, 7)) ASSERT_TRUE(s->WriteChunk(c).ok());
  }
  v1::ShardChunk again = RankChunks(id, plan, st, 0, 7)[0];
  again.set_xxhash64(again.xxhash64() ^ 1);
  hold = true;
  absl::Status resent;
  std::thread writer([&] { resent = s->WriteChunk(again); });
  writing.WaitForNotification();
  absl::StatusOr<v1::CommitCheckpointResponse> committed;
  absl::Notification commit_done;
  std::thread committer([&] {
    committed = s->Commit(id, 0);
    commit_done.Notify();
  });
  EXPECT_FALSE(commit_done.WaitForNotificationWithTimeout(absl::Milliseconds(300)))
      << "Commit did not wait for the write under way";
  release.Notify();
  writer.join();
  committer.join();
  EXPECT_EQ(resent.code(), absl::StatusCode::kDataLoss) << resent;
  EXPECT_EQ(committed.status().code(), absl::StatusCode::kDataLoss) << committed.status();
  EXPECT_EQ(s->List("").checkpoints_size(), 0);
}

}  // namespace
}  // namespace zeroshard::testing
