#include "tests/trainer/held_state_testing.h"

#include <cstring>

#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace zeroshard::testing {

void TrainSteps(ShardedEngine& engine, int rank, int n, int first, int count) {
  for (int step = first; step < first + count; ++step) {
    std::vector<Sample> batch;
    const int per = 12 / n;
    for (int k = 0; k < per; ++k) batch.push_back(MakeSample(kHeldDims, step, rank * per + k));
    MlpForwardBackward(kHeldDims, engine.plan(), engine, batch);
    ASSERT_TRUE(engine.Step(1.0f / per).ok());
  }
}

absl::StatusOr<std::unique_ptr<ShardedEngine>> HeldTestEngine(Communicator* comm, int stage,
                                                              uint32_t seed) {
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kHeldDims), comm->world_size(), 2));
  RunConfig config;
  config.stage = stage;
  return ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}),
                               MlpInit(plan, seed));
}

FullState AssembleState(const std::vector<HeldState>& held, const ShardPlan& old_plan) {
  FullState f;
  for (const UnitPlan& u : old_plan.units) {
    f.master.emplace_back(u.padded_numel, 0.0f);
    f.m.emplace_back(u.padded_numel, 0.0f);
    f.v.emplace_back(u.padded_numel, 0.0f);
  }
  for (const HeldState& h : held) {
    for (size_t u = 0; u < h.units.size(); ++u) {
      const HeldUnit& x = h.units[u];
      std::memcpy(f.master[u].data() + x.range.offset, x.master.data(), x.range.length * 4);
      std::memcpy(f.m[u].data() + x.range.offset, x.m.data(), x.range.length * 4);
      std::memcpy(f.v[u].data() + x.range.offset, x.v.data(), x.range.length * 4);
    }
  }
  return f;
}

void ExpectStateMatches(const FullState& want, ShardedEngine& engine, const std::string& what) {
  for (size_t u = 0; u < engine.plan().units.size(); ++u) {
    const ElementRange r = engine.OptimizerShard(static_cast<int>(u)).range;
    std::vector<float> master(r.length), m(r.length), v(r.length);
    ASSERT_TRUE(
        engine.CopyOptimizerState(static_cast<int>(u), r, master.data(), m.data(), v.data()).ok());
    const int64_t numel = engine.plan().units[u].numel;
    for (int64_t i = 0; i < r.length; ++i) {
      const int64_t e = r.offset + i;
      const float wm = e < numel ? want.master[u][e] : 0.0f;
      const float wmo = e < numel ? want.m[u][e] : 0.0f;
      const float wv = e < numel ? want.v[u][e] : 0.0f;
      ASSERT_TRUE(master[i] == wm && m[i] == wmo && v[i] == wv)
          << what << " unit " << u << " element " << e;
    }
  }
}

}  // namespace zeroshard::testing
