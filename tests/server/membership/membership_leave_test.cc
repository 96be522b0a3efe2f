// A rank that leaves through a handoff (a worker's stop signal): the
// survivor's handoff report names it, so exactly one generation forms
// without it, whether its own Leave comes before or after that generation
// forms, and a departing member is never admitted back as a joiner. Bad
// leaving ranks are refused and change nothing. Driven through
// CoordinatorCore with a FakeClock (tests/server/core_test_util.h).
#include "tests/server/core_test_util.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::TestOptions;

v1::ReportHandoffRequest HandoffOf(uint64_t reporter, uint64_t generation,
                                   std::vector<int> leaving) {
  v1::ReportHandoffRequest r;
  r.set_job_id("job");
  r.set_member_id(reporter);
  r.set_generation(generation);
  r.set_step(12);
  for (int rank : leaving) r.add_leaving_ranks(rank);
  return r;
}

// Four members in generation 1, ranks 0-3 in join order.
std::vector<uint64_t> FourRunning(CoreHarness& h) {
  std::vector<uint64_t> ids = {h.Join("a"), h.Join("b"), h.Join("c"), h.Join("d")};
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.core->generation(), 1u);
  EXPECT_EQ(h.Info(ids[0]).world_size(), 4);
  return ids;
}

void HeartbeatAll(CoreHarness& h, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) ASSERT_TRUE(h.Heartbeat(id).ok()) << id;
}

TEST(MembershipLeaveTest, ALeaverWhoseLeaveComesLateIsNotRankedAndOneGenerationForms) {
  for (const absl::Duration grace : {absl::ZeroDuration(), absl::Seconds(30)}) {
    CoreOptions o = TestOptions();
    o.handoff_grace = grace;
    CoreHarness h(o);
    const std::vector<uint64_t> ids = FourRunning(h);
    ASSERT_TRUE(h.core->ReportHandoff(HandoffOf(ids[0], 1, {2})).ok());
    h.Advance(absl::Milliseconds(10));  // A Tick before the leaver's Leave.
    ASSERT_EQ(h.core->generation(), 2u);
    ASSERT_EQ(h.core->state(), GenerationState::kRunning);
    EXPECT_EQ(h.Info(ids[0]).world_size(), 3);
    EXPECT_EQ(h.Info(ids[2]).rank(), -1) << "the leaver has no rank";
    EXPECT_EQ(h.Info(ids[3]).rank(), 2);
    // Still heartbeating, it is not a joiner: no change becomes pending.
    for (int i = 0; i < 4; ++i) {
      h.Advance(absl::Milliseconds(400));
      HeartbeatAll(h, ids);
    }
    EXPECT_FALSE(h.Heartbeat(ids[0])->change_pending());
    ASSERT_TRUE(h.Leave(ids[2]).ok());
    h.Advance(absl::Seconds(2));
    HeartbeatAll(h, {ids[0], ids[1], ids[3]});
    EXPECT_EQ(h.core->generation(), 2u) << "its Leave ends no generation";
    EXPECT_EQ(h.core->state(), GenerationState::kRunning);
  }
}

TEST(MembershipLeaveTest, ALeaveBeforeTheNextTickGivesTheSameSingleGeneration) {
  CoreHarness h(TestOptions());
  const std::vector<uint64_t> ids = FourRunning(h);
  ASSERT_TRUE(h.core->ReportHandoff(HandoffOf(ids[1], 1, {0, 3})).ok());
  ASSERT_TRUE(h.Leave(ids[0]).ok());
  ASSERT_TRUE(h.Leave(ids[3]).ok());
  h.Advance(absl::Milliseconds(10));
  ASSERT_EQ(h.core->generation(), 2u);
  EXPECT_EQ(h.Info(ids[1]).rank(), 0);
  EXPECT_EQ(h.Info(ids[2]).rank(), 1);
  EXPECT_EQ(h.Info(ids[1]).world_size(), 2);
}

TEST(MembershipLeaveTest, ADepartingMemberIsNotCountedTowardMinWorkers) {
  CoreOptions o = TestOptions();
  o.min_workers = 4;
  CoreHarness h(o);
  const std::vector<uint64_t> ids = FourRunning(h);
  ASSERT_TRUE(h.core->ReportHandoff(HandoffOf(ids[0], 1, {3})).ok());
  h.Advance(absl::Seconds(2));
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting) << "three eligible, four needed";
  HeartbeatAll(h, ids);
  const uint64_t joiner = h.Join("e");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->state(), GenerationState::kRunning);
  EXPECT_EQ(h.Info(joiner).rank(), 3);
  EXPECT_EQ(h.Info(ids[3]).rank(), -1);
}

TEST(MembershipLeaveTest, LeavingRanksOutsideTheGenerationOrTheReportersOwnAreRefused) {
  CoreHarness h(TestOptions());
  const std::vector<uint64_t> ids = FourRunning(h);
  for (const std::vector<int>& bad :
       {std::vector<int>{4}, {-1}, {1, 7}, {0}, {1, 1}, {1, 2, 3, 3}, std::vector<int>(1000, 1)}) {
    const absl::Status s = h.core->ReportHandoff(HandoffOf(ids[0], 1, bad)).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find("leaving"), std::string::npos) << s;
    EXPECT_EQ(h.core->state(), GenerationState::kRunning) << "a refused report ends nothing";
  }
  h.Advance(absl::Milliseconds(10));
  EXPECT_EQ(h.core->generation(), 1u);
  EXPECT_EQ(h.Info(ids[1]).rank(), 1) << "nobody was marked departing";
}

TEST(MembershipLeaveTest, ANamedLeaverThatKeepsHeartbeatingBecomesAJoinerAfterALease) {
  CoreHarness h(TestOptions());
  const std::vector<uint64_t> ids = FourRunning(h);
  ASSERT_TRUE(h.core->ReportHandoff(HandoffOf(ids[0], 1, {1})).ok());
  h.Advance(absl::Milliseconds(10));
  ASSERT_EQ(h.core->generation(), 2u);
  EXPECT_EQ(h.Info(ids[1]).rank(), -1);
  // It never leaves and stays alive: after lease_timeout it is admitted
  // again as any joiner is (TestOptions: handoff grace 0, so at once).
  for (int i = 0; i < 30 && h.core->generation() == 2u; ++i) {
    h.Advance(absl::Milliseconds(500));
    HeartbeatAll(h, ids);
  }
  ASSERT_EQ(h.core->generation(), 3u);
  EXPECT_EQ(h.Info(ids[0]).world_size(), 4);
  EXPECT_GE(h.Info(ids[1]).rank(), 0);
}

}  // namespace
}  // namespace zeroshard::server
