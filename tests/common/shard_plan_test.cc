// Property tests of the shard plan: shards cover each unit exactly once, are
// disjoint, equal in length (so they differ by at most one alignment), and
// deterministic; tiny units, zero-size params and N = 1 all work.
#include "common/shard_plan.h"

#include <random>

#include "common/rpc/plan_proto.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::vector<UnitSpec> RandomUnits(std::mt19937& rng) {
  std::vector<UnitSpec> units;
  const int n_units = 1 + rng() % 5;
  for (int u = 0; u < n_units; ++u) {
    UnitSpec unit{"unit" + std::to_string(u), {}};
    const int n_params = rng() % 4;  // 0 params is allowed too
    for (int p = 0; p < n_params; ++p) {
      std::vector<int64_t> shape;
      const int dims = rng() % 3;
      for (int d = 0; d < dims; ++d) shape.push_back(rng() % 40);  // 0 dims happen
      unit.params.push_back({unit.name + ".p" + std::to_string(p), shape, DType::kFp32});
    }
    units.push_back(unit);
  }
  return units;
}

void ExpectValid(const ShardPlan& plan, const std::vector<UnitSpec>& units) {
  ASSERT_EQ(plan.units.size(), units.size());
  for (const UnitPlan& u : plan.units) {
    // Params tile [0, numel) in order.
    int64_t cursor = 0;
    for (const ParamPlacement& p : u.params) {
      EXPECT_EQ(p.offset, cursor);
      cursor += p.numel;
    }
    EXPECT_EQ(cursor, u.numel);
    EXPECT_GE(u.padded_numel, u.numel);
    EXPECT_LT(u.padded_numel - u.numel, plan.world_size * plan.alignment);
    // Every element of the padded buffer belongs to exactly one rank.
    std::vector<int> owners(u.padded_numel, 0);
    for (int r = 0; r < plan.world_size; ++r) {
      ElementRange s = u.shard(r);
      EXPECT_EQ(s.length % plan.alignment, 0);
      EXPECT_EQ(s.length, u.shard(0).length);  // equal lengths
      for (int64_t i = s.offset; i < s.end(); ++i) owners[i]++;
      // Slices of params inside the shard cover exactly its non-padding part.
      int64_t covered = 0;
      for (const ParamSlice& sl : ParamsInRange(u, s)) covered += sl.length;
      const int64_t real_end = std::min(s.end(), u.numel);
      EXPECT_EQ(covered, std::max<int64_t>(0, real_end - s.offset));
    }
    for (int c : owners) EXPECT_EQ(c, 1);
  }
}

TEST(ShardPlanTest, RandomUnitsCoverDisjointEqualDeterministic) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    auto units = RandomUnits(rng);
    const int n = 1 + rng() % 9;
    const int64_t align = 1 << (rng() % 5);
    auto plan = MakeShardPlan(units, n, align);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectValid(*plan, units);
    auto again = MakeShardPlan(units, n, align);
    ASSERT_TRUE(again.ok());
    for (size_t i = 0; i < plan->units.size(); ++i) {
      EXPECT_EQ(plan->units[i].padded_numel, again->units[i].padded_numel);
    }
  }
}

TEST(ShardPlanTest, UnitSmallerThanWorldSize) {
  auto plan = MakeShardPlan({{"u", {{"w", {3}, DType::kFp32}}}}, 8, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->units[0].padded_numel, 8);
  EXPECT_EQ(plan->units[0].shard(7), (ElementRange{7, 1}));
  EXPECT_TRUE(ParamsInRange(plan->units[0], plan->units[0].shard(5)).empty());
}

TEST(ShardPlanTest, ZeroSizeParamsAndWorldSizeOne) {
  auto plan = MakeShardPlan({{"u", {{"a", {0, 5}, DType::kFp32}, {"b", {7}, DType::kFp32}}}}, 1, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->units[0].numel, 7);
  EXPECT_EQ(plan->units[0].params[1].offset, 0);
  EXPECT_EQ(plan->units[0].shard(0), (ElementRange{0, 7}));
}

TEST(ShardPlanTest, OddSizesPadToAlignment) {
  auto plan = MakeShardPlan({{"u", {{"w", {10007}, DType::kFp32}}}}, 3, 4);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->units[0].padded_numel, 10008);  // 12 * 834
  EXPECT_EQ(plan->units[0].shard_numel, 3336);
  EXPECT_EQ(plan->total_shard_numel(), 3336);
}

TEST(ShardPlanTest, BadInputNamesTheField) {
  auto bad_n = MakeShardPlan({}, 0, 1);
  EXPECT_EQ(bad_n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_n.status().message().find("world_size"), std::string::npos);
  auto neg = MakeShardPlan({{"u", {{"w", {3, -1}, DType::kFp32}}}}, 2, 1);
  EXPECT_NE(neg.status().message().find("shape[1]"), std::string::npos);
  auto dup =
      MakeShardPlan({{"u", {{"w", {3}, DType::kFp32}}}, {"v", {{"w", {3}, DType::kFp32}}}}, 2, 1);
  EXPECT_NE(dup.status().message().find("duplicated"), std::string::npos);
  auto huge = MakeShardPlan({{"u", {{"w", {1 << 30, 1 << 30, 4}, DType::kFp32}}}}, 2, 1);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  auto align = MakeShardPlan({}, 2, 0);
  EXPECT_NE(align.status().message().find("alignment"), std::string::npos);
}

TEST(ShardPlanTest, ProtoRoundTrip) {
  std::vector<UnitSpec> units = {{"embed", {{"wte", {256, 8}, DType::kFp32}}},
                                 {"h0", {{"w", {8, 8}, DType::kFp32}, {"b", {8}, DType::kFp32}}}};
  auto plan = MakeShardPlan(units, 3, 2);
  ASSERT_TRUE(plan.ok());
  v1::ShardPlan msg;
  ShardPlanToProto(*plan, &msg);
  EXPECT_EQ(msg.units(1).shards(2).offset(), plan->units[1].shard(2).offset);
  auto back = ShardPlanFromProto(msg);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->units[1].params[1].offset, 64);
  msg.mutable_units(0)->set_padded_numel(5);
  EXPECT_FALSE(ShardPlanFromProto(msg).ok());
}

}  // namespace
}  // namespace zeroshard
