// The core's effects (server/core/core_effects.h) applied to durable state:
// the generation counter and the lifecycle land in the state file (read back
// by a fresh DurableState on the same dir), only the latest of each is
// written, and a write that fails (the state dir is gone) is logged while
// the process goes on and the state in memory stays what the disk holds.
// Also: through CoordinatorCore, a job that ends has its lifecycle on disk
// by the time the ending call returns.
#include "server/core/core_effects.h"

#include <filesystem>

#include "common/model/job_config.h"
#include "gtest/gtest.h"
#include "server/state/durable_state.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::server {
namespace {

TEST(CoreEffectsTest, ApplyWritesTheGenerationAndLifecycle) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_effects");
  {
    auto durable = DurableState::Open(dir);
    ASSERT_TRUE(durable.ok()) << durable.status();
    CoreEffects e;
    e.generation = 7;
    e.lifecycle = CoreEffects::Lifecycle{3, "failed", "failure 3 exceeds max_failures 2"};
    e.log.push_back("a line");
    e.Apply(**durable);
  }
  auto reopened = DurableState::Open(dir);
  ASSERT_TRUE(reopened.ok());
  const DurableSnapshot snap = (*reopened)->Get();
  EXPECT_EQ(snap.generation, 7u);
  EXPECT_EQ(snap.failures, 3);
  EXPECT_EQ(snap.job_ended, "failed");
  EXPECT_EQ(snap.job_ended_reason, "failure 3 exceeds max_failures 2");
}

TEST(CoreEffectsTest, AFailedWriteIsLoggedAndChangesNothing) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_effects_gone");
  auto durable = DurableState::Open(dir);
  ASSERT_TRUE(durable.ok());
  std::filesystem::remove_all(dir);
  CoreEffects e;
  e.generation = 9;
  e.lifecycle = CoreEffects::Lifecycle{1, "", ""};
  e.Apply(**durable);  // Must not throw or abort.
  EXPECT_EQ((*durable)->Get().generation, 0u);
  EXPECT_EQ((*durable)->Get().failures, 0);
}

TEST(CoreEffectsTest, TheEndingCallPersistsTheLifecycleBeforeItReturns) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_effects_core");
  testing::CoreHarness h(testing::JobOptions(1000), dir);
  h.Join("a");
  ASSERT_TRUE(h.core->StopJob({}).ok());  // Too few members: it ends at once.
  auto reopened = DurableState::Open(dir);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Get().job_ended, "completed");
  EXPECT_EQ((*reopened)->Get().job_ended_reason, "stopped by request at step 0");
}

}  // namespace
}  // namespace zeroshard::server
