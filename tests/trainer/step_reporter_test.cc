// StepReporter (worker/trainer/step_reporter.h): reports go in submission
// order from the reporter's own thread; Submit returns while a send is
// blocked; a full queue drops the oldest waiting report and keeps the
// newest; failed sends are counted; Flush reports a timeout.
#include "worker/trainer/step_reporter.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

v1::StepReport Report(int64_t step) {
  v1::StepReport r;
  r.set_step(step);
  return r;
}

// Records the steps sent; the first send waits for `release` when given.
struct Recorder {
  absl::Mutex mu;
  std::vector<int64_t> steps;
  absl::Notification in_first_send, release;
  bool block_first = false;
  absl::Status status;
  StepReporter::Send Fn() {
    return [this](const v1::StepReport& r) {
      bool first = false;
      {
        absl::MutexLock lock(&mu);
        first = steps.empty();
        steps.push_back(r.step());
      }
      if (first && block_first) {
        in_first_send.Notify();
        release.WaitForNotificationWithTimeout(absl::Seconds(30));
      }
      return status;
    };
  }
  std::vector<int64_t> Steps() {
    absl::MutexLock lock(&mu);
    return steps;
  }
};

TEST(StepReporterTest, SendsEveryReportInOrder) {
  Recorder rec;
  StepReporter reporter(rec.Fn(), 64, absl::Seconds(5));
  for (int s = 1; s <= 20; ++s) reporter.Submit(Report(s));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(10)));
  std::vector<int64_t> want;
  for (int s = 1; s <= 20; ++s) want.push_back(s);
  EXPECT_EQ(rec.Steps(), want);
  EXPECT_EQ(reporter.sent(), 20);
  EXPECT_EQ(reporter.failed(), 0);
  EXPECT_EQ(reporter.dropped(), 0);
}

TEST(StepReporterTest, ABlockedSendNeitherBlocksSubmitNorLosesTheNewest) {
  Recorder rec;
  rec.block_first = true;
  StepReporter reporter(rec.Fn(), 3, absl::Seconds(5));
  reporter.Submit(Report(0));
  ASSERT_TRUE(rec.in_first_send.WaitForNotificationWithTimeout(absl::Seconds(10)));
  for (int s = 1; s <= 10; ++s) reporter.Submit(Report(s));  // Returns: the send is stuck.
  EXPECT_FALSE(reporter.Flush(absl::Milliseconds(50)));
  rec.release.Notify();
  ASSERT_TRUE(reporter.Flush(absl::Seconds(10)));
  EXPECT_EQ(rec.Steps(), (std::vector<int64_t>{0, 8, 9, 10}));
  EXPECT_EQ(reporter.dropped(), 7);
  EXPECT_EQ(reporter.sent(), 4);
}

TEST(StepReporterTest, FailedSendsAreCountedAndTheRestGoOn) {
  Recorder rec;
  rec.status = absl::UnavailableError("coordinator down");
  StepReporter reporter(rec.Fn(), 8, absl::Seconds(5));
  for (int s = 1; s <= 5; ++s) reporter.Submit(Report(s));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(10)));
  EXPECT_EQ(reporter.failed(), 5);
  EXPECT_EQ(reporter.sent(), 0);
  EXPECT_EQ(rec.Steps().size(), 5u);
}

TEST(StepReporterTest, DestructorSendsWhatIsQueued) {
  Recorder rec;
  {
    StepReporter reporter(rec.Fn(), 64, absl::Seconds(10));
    for (int s = 1; s <= 5; ++s) reporter.Submit(Report(s));
  }
  EXPECT_EQ(rec.Steps(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace zeroshard
