// WorkerHealth (worker/health/worker_health.h): the liveness and readiness
// rules the worker's /healthz and /readyz serve, on explicit times.
#include <gtest/gtest.h>

#include "worker/health/worker_health.h"

namespace zeroshard {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);
const absl::Duration kMaxAge = absl::Seconds(60);

TEST(WorkerHealthTest, HealthyAndNotReadyBeforeAnyContact) {
  WorkerHealth health;
  EXPECT_TRUE(health.Healthy(kT0, kMaxAge));
  EXPECT_TRUE(health.Healthy(kT0 + absl::Hours(1), kMaxAge));  // Joining has its own deadline.
  EXPECT_FALSE(health.Ready());
}

TEST(WorkerHealthTest, HealthyUntilTheLastContactIsOlderThanMaxAge) {
  WorkerHealth health;
  health.RecordContact(kT0, /*in_running_generation=*/false);
  EXPECT_TRUE(health.Healthy(kT0 + kMaxAge, kMaxAge));
  EXPECT_FALSE(health.Healthy(kT0 + kMaxAge + absl::Milliseconds(1), kMaxAge));
  health.RecordFailedContact();  // Failures do not move the last success.
  EXPECT_FALSE(health.Healthy(kT0 + kMaxAge + absl::Milliseconds(1), kMaxAge));
  health.RecordContact(kT0 + absl::Seconds(90), false);
  EXPECT_TRUE(health.Healthy(kT0 + absl::Seconds(100), kMaxAge));
}

TEST(WorkerHealthTest, ReadyOnlyWhileTheLatestReplySaysMemberOfARunningGeneration) {
  WorkerHealth health;
  health.RecordContact(kT0, /*in_running_generation=*/true);
  EXPECT_TRUE(health.Ready());
  health.RecordFailedContact();
  EXPECT_FALSE(health.Ready());
  health.RecordContact(kT0 + absl::Seconds(1), true);
  EXPECT_TRUE(health.Ready());
  health.RecordContact(kT0 + absl::Seconds(2), false);  // A joiner, or between generations.
  EXPECT_FALSE(health.Ready());
  health.RecordContact(kT0 + absl::Seconds(3), true);
  health.RecordSessionEnded();
  EXPECT_FALSE(health.Ready());
  EXPECT_TRUE(health.Healthy(kT0 + absl::Seconds(3), kMaxAge));
}

TEST(WorkerHealthTest, ProcessInstanceIsOneObject) {
  EXPECT_EQ(&WorkerHealth::Process(), &WorkerHealth::Process());
}

}  // namespace
}  // namespace zeroshard
