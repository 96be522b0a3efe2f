// One coordinator per state dir and per checkpoint dir: a second one is
// refused with a message naming the directory, and the lock goes with its
// owner.
#include "common/infra/dir_lock.h"

#include "gtest/gtest.h"
#include "server/rpc/coordinator_stack.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

TEST(DirLockTest, SecondOwnerIsRefusedUntilTheFirstGoes) {
  const std::string dir = testing::MakeTempDir("zs_lock");
  auto first = DirLock::Acquire(dir, ".x.lock");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = DirLock::Acquire(dir, ".x.lock");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(dir), std::string::npos);
  EXPECT_TRUE(DirLock::Acquire(dir, ".y.lock").ok());  // Another kind of owner.
  first.value().reset();
  EXPECT_TRUE(DirLock::Acquire(dir, ".x.lock").ok());
}

TEST(DirLockTest, TwoCoordinatorsNeverShareStateOrCheckpoints) {
  const std::string dir = testing::MakeTempDir("zs_two_coords");
  CoordinatorOptions o;
  o.metrics_listen = "";
  o.state_dir = dir + "/state";
  o.checkpoint_dir = dir + "/ckpt";
  auto first = StartCoordinatorStack(o, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StartCoordinatorStack(o, 0);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another coordinator"), std::string::npos)
      << second.status();
  o.checkpoint_dir.clear();
  auto third = StartCoordinatorStack(o, 0);  // The state dir alone is guarded too.
  EXPECT_EQ(third.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zeroshard
