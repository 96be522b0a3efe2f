// The coordinator's membership state machine, driven through CoordinatorCore
// with a FakeClock: generations form after settle, a silent member ends its
// generation within lease + 1 s, joiners wait for the next generation, stale
// generations are refused, and a rejoin is a new member.
#include <algorithm>
#include <map>
#include <set>

#include "tests/server/core_test_util.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::TestOptions;

// Heartbeats every id, failing the test on an error.
void HeartbeatAll(CoreHarness& h, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) ASSERT_TRUE(h.Heartbeat(id).ok()) << id;
}

// Expects a call made for generation 1 refused while generation 2 runs.
void ExpectRefusedAsStale(const absl::Status& s) {
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_NE(s.message().find("current generation: 2"), std::string::npos) << s;
}

TEST(MembershipTest, SixtyFourWorkersFormOneGenerationThenSixtyThreeAfterOneDies) {
  CoreHarness h(TestOptions());
  std::vector<uint64_t> ids;
  for (int i = 0; i < 64; ++i) {
    ids.push_back(h.Join("worker-" + std::to_string(i)));
    h.Advance(absl::Milliseconds(1));
  }
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);  // Still settling.
  h.Advance(absl::Milliseconds(300));
  EXPECT_EQ(h.core->generation(), 0u);
  h.Advance(absl::Milliseconds(300));
  ASSERT_EQ(h.core->state(), GenerationState::kRunning);
  ASSERT_EQ(h.core->generation(), 1u);

  // Dense ranks in join order; every member sees the same generation.
  for (int i = 0; i < 64; ++i) {
    const v1::GenerationInfo info = h.Info(ids[i]);
    EXPECT_EQ(info.generation(), 1u);
    EXPECT_EQ(info.rank(), i);
    EXPECT_EQ(info.world_size(), 64);
    EXPECT_EQ(info.kv_prefix(), "job/g1/");
  }

  // Worker 17 goes silent; the rest heartbeat every 500 ms.
  const uint64_t victim = ids[17];
  const absl::Time victim_last = h.clock.Now();
  HeartbeatAll(h, ids);
  std::vector<uint64_t> survivors = ids;
  survivors.erase(survivors.begin() + 17);
  absl::Duration formed_after = absl::InfiniteDuration();
  for (int tick = 1; tick <= 100; ++tick) {  // 10 s in 100 ms ticks.
    h.Advance(absl::Milliseconds(100));
    if (tick % 5 == 0) HeartbeatAll(h, survivors);
    if (h.core->generation() == 2 && h.core->state() == GenerationState::kRunning) {
      formed_after = h.clock.Now() - victim_last;
      break;
    }
    // Nothing changes while the victim's lease is still valid.
    if (h.clock.Now() - victim_last <= absl::Seconds(3)) {
      ASSERT_EQ(h.core->generation(), 1u) << "tick " << tick;
      ASSERT_EQ(h.core->state(), GenerationState::kRunning);
    }
  }
  EXPECT_GT(formed_after, absl::Seconds(3));
  EXPECT_LE(formed_after, absl::Seconds(3) + absl::Seconds(1));
  EXPECT_TRUE(absl::IsNotFound(h.Heartbeat(victim).status()));
  for (size_t i = 0; i < survivors.size(); ++i) {
    const v1::GenerationInfo info = h.Info(survivors[i]);
    EXPECT_EQ(info.world_size(), 63);
    EXPECT_EQ(info.rank(), static_cast<int>(i));
  }
}

TEST(MembershipTest, JoinerWhileRunningIsAdmittedAtNextGeneration) {
  CoreHarness h(TestOptions());
  std::vector<uint64_t> ids = {h.Join("a"), h.Join("b"), h.Join("c")};
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  const uint64_t joiner = h.Join("d");
  v1::GenerationInfo info = h.Info(joiner);
  EXPECT_EQ(info.generation(), 1u);
  EXPECT_EQ(info.rank(), -1);
  EXPECT_EQ(info.world_size(), 3);
  v1::StepReport report;  // A waiting member has no rank to report for.
  report.set_job_id("job");
  report.set_member_id(joiner);
  report.set_generation(1);
  report.set_rank(-1);
  EXPECT_TRUE(absl::IsAborted(h.core->ReportStep(report)));
  h.Advance(absl::Milliseconds(200));  // Within settle: generation 1 keeps running.
  EXPECT_EQ(h.core->generation(), 1u);
  EXPECT_EQ(h.core->state(), GenerationState::kRunning);
  HeartbeatAll(h, ids);
  h.Advance(absl::Milliseconds(400));
  ASSERT_EQ(h.core->generation(), 2u);
  info = h.Info(joiner);
  EXPECT_EQ(info.world_size(), 4);
  EXPECT_EQ(info.rank(), 3);
  auto hb = h.Heartbeat(joiner);
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->in_generation());
  EXPECT_EQ(hb->generation(), 2u);
}

// With a handoff grace, a joiner makes a change pending (heartbeats say
// so) instead of ending the generation; a handoff report ends it at once
// and the next generation forms; without one the grace ends it.
TEST(MembershipTest, JoinerWaitsForAHandoffAtAStepBoundaryWithinTheGrace) {
  CoreOptions o = TestOptions();
  o.handoff_grace = absl::Seconds(5);
  for (bool hand_off : {true, false}) {
    CoreHarness h(o);
    std::vector<uint64_t> ids = {h.Join("a"), h.Join("b")};
    h.Advance(absl::Seconds(1));
    ASSERT_EQ(h.core->generation(), 1u);
    auto hb = h.Heartbeat(ids[0]);
    ASSERT_TRUE(hb.ok());
    EXPECT_FALSE(hb->change_pending());
    ids.push_back(h.Join("c"));
    h.Advance(absl::Milliseconds(600));  // Settled: a change is pending.
    HeartbeatAll(h, ids);
    hb = h.Heartbeat(ids[0]);
    ASSERT_TRUE(hb.ok());
    EXPECT_TRUE(hb->change_pending());
    EXPECT_FALSE(h.Heartbeat(ids[2])->change_pending()) << "only ranks are asked to yield";
    EXPECT_EQ(h.core->generation(), 1u);
    EXPECT_EQ(h.core->state(), GenerationState::kRunning);
    if (hand_off) {
      v1::ReportHandoffRequest r;
      r.set_job_id("job");
      r.set_member_id(ids[2]);
      r.set_generation(1);
      r.set_step(7);
      EXPECT_TRUE(absl::IsPermissionDenied(h.core->ReportHandoff(r).status()))
          << "a member that holds no rank cannot end the generation";
      r.set_member_id(ids[1]);
      ASSERT_TRUE(h.core->ReportHandoff(r).ok());
      EXPECT_TRUE(absl::IsAborted(h.core->ReportHandoff(r).status()))
          << "a second report names an ended generation";
      h.Advance(absl::Milliseconds(10));
      ASSERT_EQ(h.core->generation(), 2u) << "the handoff forms the next generation at once";
      EXPECT_NE(h.metrics.Render().find("reason=\"handoff\""), std::string::npos);
    } else {
      for (int i = 0; i < 4; ++i) {
        h.Advance(absl::Seconds(1));
        HeartbeatAll(h, ids);
      }
      EXPECT_EQ(h.core->generation(), 1u) << "within the grace";
      h.Advance(absl::Seconds(1));
      ASSERT_EQ(h.core->generation(), 2u) << "the grace is over";
    }
    EXPECT_EQ(h.Info(ids[2]).world_size(), 3);
    EXPECT_FALSE(h.Heartbeat(ids[0])->change_pending());
  }
}

TEST(MembershipTest, StaleGenerationCallsAreRefusedWithTheCurrentGeneration) {
  CoreHarness h(TestOptions());
  const uint64_t a = h.Join("a");
  const uint64_t b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  h.Join("c");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 2u);

  v1::KvSetRequest set;
  set.set_job_id("job");
  set.set_generation(1);
  set.set_key("k");
  ExpectRefusedAsStale(h.core->KvSet(set));

  v1::StepReport report;
  report.set_job_id("job");
  report.set_member_id(a);
  report.set_generation(1);
  report.set_rank(0);
  report.set_step(1);
  ExpectRefusedAsStale(h.core->ReportStep(report));

  v1::ReportFailureRequest failure;
  failure.set_job_id("job");
  failure.set_member_id(b);
  failure.set_generation(1);
  failure.set_failed_rank(-1);
  const absl::Status s = h.core->ReportFailure(failure).status();
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_EQ(h.core->state(), GenerationState::kRunning);  // Generation 2 unharmed.

  report.set_generation(2);
  EXPECT_TRUE(h.core->ReportStep(report).ok());
}

TEST(MembershipTest, RejoinAfterLeaseExpiryIsANewMemberNeverADuplicateRank) {
  CoreHarness h(TestOptions());
  const uint64_t a = h.Join("a");
  const uint64_t b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  for (int i = 0; i < 5; ++i) {  // b heartbeats, a is silent for 5 s.
    h.Advance(absl::Seconds(1));
    ASSERT_TRUE(h.Heartbeat(b).ok());
  }
  EXPECT_TRUE(absl::IsNotFound(h.Heartbeat(a).status()));
  const uint64_t a2 = h.Join("a");
  EXPECT_NE(a2, a);
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->state(), GenerationState::kRunning);
  const v1::GenerationInfo info = h.Info(a2);
  ASSERT_EQ(info.world_size(), 2);
  std::multiset<std::string> workers;
  std::set<int> ranks;
  for (const v1::MemberInfo& m : info.members()) {
    workers.insert(m.worker_id());
    ranks.insert(m.rank());
  }
  EXPECT_EQ(workers.count("a"), 1u);
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(info.rank(), 1);  // a2 joined after b.
}

TEST(MembershipTest, JoinWithTheIdOfALiveMemberReplacesIt) {
  CoreHarness h(TestOptions());
  const uint64_t a = h.Join("a");
  h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  const uint64_t a2 = h.Join("a");                        // The worker restarted.
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);  // Old a was in generation 1.
  EXPECT_TRUE(absl::IsNotFound(h.Heartbeat(a).status()));
  h.Advance(absl::Seconds(1));
  const v1::GenerationInfo info = h.Info(a2);
  EXPECT_EQ(info.generation(), 2u);
  EXPECT_EQ(info.world_size(), 2);
}

TEST(MembershipTest, LeaveAndFailureEndTheGenerationAndCountReasons) {
  CoreHarness h(TestOptions());
  const uint64_t a = h.Join("a");
  const uint64_t b = h.Join("b");
  const uint64_t c = h.Join("c");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);

  v1::ReportFailureRequest failure;
  failure.set_job_id("job");
  failure.set_member_id(a);
  failure.set_generation(1);
  failure.set_failed_rank(2);
  failure.set_reason("all_gather timed out");
  auto out = h.core->ReportFailure(failure);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);
  // The others prove they are alive ([Note: suspects after a failure]).
  HeartbeatAll(h, {b, c});
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.core->generation(), 2u);
  EXPECT_EQ(h.Info(c).world_size(), 3);

  v1::LeaveRequest leave;
  leave.set_job_id("job");
  leave.set_member_id(b);
  ASSERT_TRUE(h.core->Leave(leave).ok());
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.core->generation(), 3u);
  EXPECT_EQ(h.Info(c).rank(), 1);
  EXPECT_TRUE(absl::IsNotFound(h.core->Leave(leave)));

  const std::string text = h.metrics.Render();
  EXPECT_NE(text.find("zeroshard_generation_changes_total{reason=\"start\"} 1"), std::string::npos);
  EXPECT_NE(text.find("zeroshard_generation_changes_total{reason=\"failure\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("zeroshard_generation_changes_total{reason=\"leave\"} 1"), std::string::npos);
  auto status = h.core->GetJobStatus({});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->generation_changes(), 3u);
}

TEST(MembershipTest, MinAndMaxWorkers) {
  CoreOptions o = TestOptions();
  o.min_workers = 3;
  o.max_workers = 4;
  CoreHarness h(o);
  std::vector<uint64_t> ids = {h.Join("a"), h.Join("b")};
  h.Advance(absl::Seconds(2));
  EXPECT_EQ(h.core->generation(), 0u);  // Below min_workers.
  HeartbeatAll(h, ids);
  for (const char* w : {"c", "d", "e"}) ids.push_back(h.Join(w));
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  EXPECT_EQ(h.Info(ids[4]).rank(), -1);  // Fifth member waits: max is 4.
  EXPECT_EQ(h.Info(ids[3]).world_size(), 4);
  for (int i = 0; i < 4; ++i) {  // A joiner that cannot be admitted causes no churn.
    HeartbeatAll(h, ids);
    h.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(h.core->generation(), 1u);
}

TEST(MembershipTest, FirstUnitsFixTheJobAndDifferentUnitsAreRefused) {
  CoreHarness h(TestOptions());
  v1::JoinRequest join;
  join.set_job_id("job");
  join.set_worker_id("a");
  v1::UnitSpec* unit = join.add_units();
  unit->set_name("block.0");
  v1::TensorSpec* w = unit->add_params();
  w->set_name("w");
  w->add_shape(5);
  w->add_shape(3);
  w->set_dtype(v1::DTYPE_FP32);
  ASSERT_TRUE(h.core->Join(join).ok());

  v1::JoinRequest other = join;
  other.set_worker_id("b");
  other.mutable_units(0)->mutable_params(0)->set_shape(1, 4);
  absl::Status s = h.core->Join(other).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("units[0].params[0] (w).shape is [5,4], the job has [5,3]"),
            std::string::npos)
      << s;
  other.clear_units();  // No units: accepted.
  const uint64_t b = h.core->Join(other)->member_id();
  h.Advance(absl::Seconds(1));
  const v1::GenerationInfo info = h.Info(b);
  ASSERT_EQ(info.plan().units_size(), 1);
  EXPECT_EQ(info.plan().world_size(), 2);
  // 15 elements padded to a multiple of world_size * alignment = 8.
  EXPECT_EQ(info.plan().units(0).padded_numel(), 16);
  EXPECT_EQ(info.plan().units(0).shards_size(), 2);
}

}  // namespace
}  // namespace zeroshard::server
