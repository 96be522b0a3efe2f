// The launch progress line (cli/launch_monitor.h): elapsed time since the
// launch began and the ETA from the pace since the first record, worked out
// by hand for fixed times.
#include "absl/time/time.h"
#include "cli/launch_monitor.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

StepRecord Record(int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 2.0;
  r.world_size = 2;
  r.generation = 1;
  return r;
}

TEST(LaunchProgressTest, ShowsElapsedTimeAndEta) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ProgressState p;
  p.total_steps = 100;
  p.started = t0;
  EXPECT_EQ(p.Line(t0 + absl::Seconds(3)), "waiting for workers to form a generation... (3s)");
  p.Add(Record(10), t0 + absl::Seconds(10));
  EXPECT_NE(p.Line(t0 + absl::Seconds(10)).find("10s elapsed, ETA -"), std::string::npos)
      << p.Line(t0 + absl::Seconds(10));
  p.Add(Record(20), t0 + absl::Seconds(20));
  // 10 steps in 10 s since the first record; 80 left: 80 s.
  const std::string line = p.Line(t0 + absl::Seconds(20));
  EXPECT_NE(line.find("step 20/100"), std::string::npos) << line;
  EXPECT_NE(line.find("20s elapsed, ETA 1m20s"), std::string::npos) << line;
  p.Add(Record(100), t0 + absl::Seconds(3700));
  EXPECT_NE(p.Line(t0 + absl::Seconds(3725)).find("1h02m05s elapsed, done"), std::string::npos)
      << p.Line(t0 + absl::Seconds(3725));
}

}  // namespace
}  // namespace zeroshard::cli
