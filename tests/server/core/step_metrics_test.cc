// The step-report metrics of the coordinator's state machine, driven through
// CoordinatorCore with a FakeClock: tokens counted once per step (not per
// rank, not for late reports of older steps), gradient norms before and
// after clipping, the clip counter, worker RSS per rank, rank_info per rank
// of the running generation (removed with it), and tokens_per_second at 0
// once a generation ends or the job completes. Expected values come from
// the reports the test sends, read back through the text exposition.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/model/job_config.h"
#include "tests/server/core_test_util.h"
#include "tests/support/exposition.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using zeroshard::testing::CountSeries;
using zeroshard::testing::ParseExposition;
using zeroshard::testing::Sample;
using zeroshard::testing::Samples;

constexpr int64_t kTokensPerStep = 16 * 64;

CoreOptions JobOptions(int64_t steps) {
  CoreOptions o = testing::TestOptions();
  JobConfig job;
  job.steps = steps;
  o.job_config_json = job.ToJson();
  return o;
}

uint64_t JoinAs(CoreHarness& h, const std::string& worker, const std::string& hostname,
                const std::string& pod) {
  v1::JoinRequest r;
  r.set_job_id("job");
  r.set_worker_id(worker);
  r.set_hostname(hostname);
  r.set_pod(pod);
  auto out = h.core->Join(r);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->member_id() : 0;
}

struct Step {
  int64_t step;
  double grad_norm;
  double clip_coef;
};

absl::Status Report(CoreHarness& h, uint64_t member, int rank, const Step& s, int64_t rss) {
  v1::StepReport r;
  r.set_job_id("job");
  r.set_member_id(member);
  r.set_generation(h.core->generation());
  r.set_rank(rank);
  r.set_step(s.step);
  r.set_loss(3.0);
  r.set_tokens_per_second(5000);
  r.set_step_seconds(0.2);
  r.set_tokens(kTokensPerStep);
  r.set_grad_norm(s.grad_norm);
  r.set_clip_coef(s.clip_coef);
  r.set_rss_bytes(rss);
  return h.core->ReportStep(r);
}

// Heartbeats `ids` and ticks until `generation` runs (bounded).
bool AdvanceToGeneration(CoreHarness& h, const std::vector<uint64_t>& ids, uint64_t generation) {
  for (int i = 0; i < 20; ++i) {
    for (uint64_t id : ids) {
      if (!h.Heartbeat(id).ok()) return false;
    }
    h.Advance(absl::Milliseconds(200));
    if (h.core->generation() == generation && h.core->state() == GenerationState::kRunning) {
      return true;
    }
  }
  return false;
}

Samples Scrape(CoreHarness& h) { return ParseExposition(h.metrics.Render()); }

// Two workers in generation 1 ("a" on node-1 in pod zs-worker-0, "b" on
// node-2 outside Kubernetes) report steps 1..4; clipping scales 2 and 4.
struct FourSteps {
  uint64_t a = 0, b = 0;
};

FourSteps RunFourSteps(CoreHarness& h) {
  FourSteps w;
  w.a = JoinAs(h, "a", "node-1", "zs-worker-0");
  w.b = JoinAs(h, "b", "node-2", "");
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.core->state(), GenerationState::kRunning);
  const Samples m = Scrape(h);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_grad_clips_total"), 0.0);
  EXPECT_EQ(CountSeries(m, "zeroshard_grad_norm"), 0);  // No step yet.
  const Step steps[] = {{1, 0.5, 1.0}, {2, 4.0, 0.25}, {3, 0.9, 1.0}, {4, 2.0, 0.5}};
  for (const Step& s : steps) {
    EXPECT_TRUE(Report(h, w.a, 0, s, 100 << 20).ok());
    EXPECT_TRUE(Report(h, w.b, 1, s, 200 << 20).ok());
  }
  EXPECT_TRUE(Report(h, w.b, 1, steps[2], 300 << 20).ok());  // A late report of step 3.
  return w;
}

TEST(StepMetricsTest, TokensGradNormsClipsAndRssFollowTheReports) {
  CoreHarness h(JobOptions(100));
  RunFourSteps(h);
  const Samples m = Scrape(h);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"), 4.0 * kTokensPerStep);
  EXPECT_EQ(Sample(m, "zeroshard_grad_clips_total"), 2.0);
  EXPECT_EQ(Sample(m, "zeroshard_grad_norm"), 2.0);  // Step 4's, not the late step 3's.
  EXPECT_EQ(Sample(m, "zeroshard_grad_norm_clipped"), 1.0);
  EXPECT_EQ(Sample(m, "zeroshard_worker_rss_bytes{rank=\"0\"}"), 100.0 * (1 << 20));
  EXPECT_EQ(Sample(m, "zeroshard_worker_rss_bytes{rank=\"1\"}"), 300.0 * (1 << 20));
  EXPECT_EQ(Sample(m, "zeroshard_tokens_per_second"), 5000.0);
  EXPECT_EQ(Sample(m,
                   "zeroshard_rank_info{host=\"node-1\",pod=\"zs-worker-0\",rank=\"0\","
                   "worker_id=\"a\"}"),
            1.0);
  EXPECT_EQ(Sample(m, "zeroshard_rank_info{host=\"node-2\",pod=\"\",rank=\"1\",worker_id=\"b\"}"),
            1.0);
  EXPECT_EQ(CountSeries(m, "zeroshard_rank_info"), 2);

  // The status shows the hostname and pod too.
  auto status = h.core->GetJobStatus({});
  ASSERT_TRUE(status.ok());
  ASSERT_GE(status->members_size(), 1);
  EXPECT_EQ(status->members(0).hostname(), "node-1");
  EXPECT_EQ(status->members(0).pod(), "zs-worker-0");
}

TEST(StepMetricsTest, RankSeriesFollowTheRunningGeneration) {
  CoreHarness h(JobOptions(100));
  const FourSteps w = RunFourSteps(h);
  const uint64_t a = w.a, b = w.b;
  // A third worker ends the generation once settled (no handoff grace) and
  // the next forms with three ranks: the old ranks' series are gone,
  // throughput reads 0 until the next step, counters keep their totals.
  const uint64_t c = JoinAs(h, "c", "node-3", "zs-worker-2");
  ASSERT_TRUE(AdvanceToGeneration(h, {a, b, c}, 2));
  Samples m = Scrape(h);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_per_second"), 0.0);
  EXPECT_EQ(CountSeries(m, "zeroshard_worker_rss_bytes"), 0);
  EXPECT_EQ(CountSeries(m, "zeroshard_rank_info"), 3);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"), 4.0 * kTokensPerStep);
  int c_series = 0;
  for (const auto& [key, value] : m) {
    c_series += key.find("pod=\"zs-worker-2\"") != std::string::npos &&
                key.find("worker_id=\"c\"") != std::string::npos;
  }
  EXPECT_EQ(c_series, 1);
  // c leaves: the next generation has two ranks and no series of c.
  v1::LeaveRequest leave;
  leave.set_job_id("job");
  leave.set_member_id(c);
  ASSERT_TRUE(h.core->Leave(leave).ok());
  ASSERT_TRUE(AdvanceToGeneration(h, {a, b}, 3));
  m = Scrape(h);
  EXPECT_EQ(CountSeries(m, "zeroshard_rank_info"), 2);
  for (const auto& [key, value] : m) {
    EXPECT_EQ(key.find("worker_id=\"c\""), std::string::npos) << key;
  }
}

TEST(StepMetricsTest, ThroughputIsZeroOnceTheJobCompletes) {
  CoreHarness h(JobOptions(2));
  const uint64_t a = JoinAs(h, "a", "n", "");
  const uint64_t b = JoinAs(h, "b", "n", "");
  h.Advance(absl::Seconds(1));
  ASSERT_TRUE(Report(h, b, 1, {1, 1.0, 1.0}, 1).ok());
  ASSERT_TRUE(Report(h, a, 0, {1, 1.0, 1.0}, 1).ok());
  EXPECT_EQ(Sample(Scrape(h), "zeroshard_tokens_per_second"), 5000.0);
  ASSERT_TRUE(Report(h, a, 0, {2, 1.0, 1.0}, 1).ok());
  ASSERT_TRUE(Report(h, b, 1, {2, 1.0, 1.0}, 1).ok());
  ASSERT_EQ(h.core->job_state(), JobState::kCompleted);
  ASSERT_TRUE(Report(h, a, 0, {2, 1.0, 1.0}, 1).ok());  // A late repeat still lands.
  const Samples m = Scrape(h);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_per_second"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"), 2.0 * kTokensPerStep);
}

TEST(StepMetricsTest, BadFieldsAreRefusedByName) {
  CoreHarness h(JobOptions(100));
  const uint64_t a = JoinAs(h, "a", "n", "");
  const uint64_t b = JoinAs(h, "b", "n", "");
  h.Advance(absl::Seconds(1));
  struct Case {
    Step step;
    int64_t rss;
    const char* field;
  };
  for (const Case& bad : {Case{{1, -1.0, 1.0}, 1, "grad_norm"}, Case{{1, 1.0, 0.0}, 1, "clip_coef"},
                          Case{{1, 1.0, 1.5}, 1, "clip_coef"}, Case{{1, 1.0, NAN}, 1, "clip_coef"},
                          Case{{1, 1.0, 1.0}, -5, "rss_bytes"}}) {
    const absl::Status s = Report(h, a, 0, bad.step, bad.rss);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find(bad.field), std::string::npos) << s;
  }
  // An overflowed step's norm (skipped step) is taken as it is.
  EXPECT_TRUE(Report(h, b, 1, {1, INFINITY, 1.0}, 1).ok());
  EXPECT_TRUE(Report(h, a, 0, {1, INFINITY, 1.0}, 1).ok());
  EXPECT_TRUE(std::isinf(*Sample(Scrape(h), "zeroshard_grad_norm")));
  v1::JoinRequest j;
  j.set_job_id("job");
  j.set_worker_id("d");
  j.set_pod("bad pod");
  const absl::Status refused = h.core->Join(j).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("pod"), std::string::npos) << refused;
}

}  // namespace
}  // namespace zeroshard::server
