// The stage-3 all-gather prefetch in the recorded order (sharded_engine.h):
// a GPT-shaped bracket order (unit 0 the tied embedding/head, used first
// and last in forward and in backward; blocks 1..4) over five units of the
// same padded size P, N = 2 ranks as threads over loopback Gloo, 2
// micro-batches a step. Checked against the rule written out here, not
// against the engine's own order:
//   - from the second step on, after every Pre* the gather buffers hold
//     exactly the open unit and the next `prefetch` distinct units of the
//     step's sequence (so the head's forward does not hold block 1 through
//     the backward, as a u+1 guess did), plus the bracket's gradient view
//     and the one reduce-scatter in flight;
//   - in every step, the first included, peak buffers stay under
//     (1 + prefetch) gathers + gradient view + one reduce-scatter staging,
//     for fp32 and bf16 compute and reduce;
//   - nothing stays gathered after a step or after an evaluation, whose
//     forward passes do not disturb the training order;
//   - the all-gather count of a step equals PredictTraffic's;
//   - results are bit-equal whatever the prefetch distance;
//   - with buckets (EngineOptions::bucket_bytes of 2 or 4 units), the
//     all-gathers and reduce-scatters of a step are the counts worked out
//     by hand below (and PredictTraffic's), peak buffers stay under the
//     bound by bucket written out here, nothing stays gathered, and the
//     parameters equal the unbucketed run's within 1e-6 (the tied unit's
//     brackets are reduced once, summed first).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/traffic_model.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"

namespace zeroshard::testing {
namespace {

constexpr int kUnits = 5;
constexpr int64_t kNumel = 64;  // Padded = numel at N = 2, alignment 8.
constexpr int kMicroBatches = 2;

// One micro-batch's opens: forward 0 1 2 3 4 0, backward 0 4 3 2 1 0.
std::vector<UnitBracket> GptBrackets() {
  std::vector<UnitBracket> b;
  for (int u : {0, 1, 2, 3, 4, 0}) b.push_back({u, false});
  for (int u : {0, 4, 3, 2, 1, 0}) b.push_back({u, true});
  return b;
}

ShardPlan Plan(int n) {
  std::vector<UnitSpec> units;
  for (int u = 0; u < kUnits; ++u) {
    units.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {kNumel}, DType::kFp32}}});
  }
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(units, n, 8);
  ZS_CHECK(plan.ok());
  return *plan;
}

struct Config {
  int prefetch = 1;
  DType compute = DType::kFp32, reduce = DType::kFp32;
  int64_t bucket_bytes = 0;
  std::string Name() const {
    return absl::StrCat("prefetch ", prefetch, " ", DTypeName(compute), "/", DTypeName(reduce),
                        bucket_bytes > 0 ? absl::StrCat(" bucket ", bucket_bytes) : "");
  }
};

// Distinct units of seq[i] and the `d` opens after it: what is gathered
// once seq[i] has opened, in the steady state.
int64_t ExpectedGathered(const std::vector<UnitBracket>& seq, size_t i, int d) {
  std::set<int> units{seq[i].unit};
  for (size_t j = i + 1; j < seq.size() && j <= i + d; ++j) units.insert(seq[j].unit);
  return static_cast<int64_t>(units.size());
}

struct Observed {
  std::vector<std::vector<float>> params;
  int64_t gathers_per_step = 0;  // The last step's all-gather calls.
  int64_t reduces_per_step = 0;  // And reduce-scatter calls.
};

struct Limits {
  int64_t base = 0;   // Resident buffers (none on the CPU).
  int64_t bound = 0;  // base + (1 + d) gathers + view + gradient view + one staging.
};

// One step's brackets over `seq`; from the second step on (fp32), checks the
// exact gather buffers after every Pre*.
void StepBrackets(ShardedEngine& engine, const std::vector<UnitBracket>& seq, const Config& k,
                  const Limits& lim, bool steady, const std::string& where) {
  const int64_t P = kNumel;
  bool reduced = false;  // A reduce-scatter is in flight once a backward closed.
  for (size_t i = 0; i < seq.size(); ++i) {
    const int u = seq[i].unit;
    const float* params = nullptr;
    if (seq[i].backward) {
      const UnitBackwardView v = engine.PreBackward(u);
      for (int64_t e = 0; e < kNumel; ++e)
        v.grads[e] += 0.5f * v.params[e] + 0.001f * static_cast<float>(i);
      params = v.params;
    } else {
      params = engine.PreForward(u);
    }
    EXPECT_TRUE(std::isfinite(params[kNumel - 1])) << where;
    if (steady && k.compute == DType::kFp32 && k.reduce == DType::kFp32 && k.bucket_bytes == 0) {
      const int64_t want = ExpectedGathered(seq, i, k.prefetch) * 4 * P +
                           (seq[i].backward ? 4 * P : 0) + (reduced ? 4 * P : 0);
      EXPECT_EQ(engine.memory().buffers - lim.base, want) << where << " open " << i;
    }
    if (seq[i].backward) {
      engine.PostBackward(u);
      reduced = true;
    } else {
      engine.PostForward(u);
    }
  }
}

void ExpectNear(const std::vector<std::vector<float>>& got,
                const std::vector<std::vector<float>>& want, double tol, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t u = 0; u < got.size(); ++u) {
    ASSERT_EQ(got[u].size(), want[u].size()) << where;
    for (size_t e = 0; e < got[u].size(); ++e) {
      ASSERT_LE(std::fabs(got[u][e] - want[u][e]), tol * std::max(1.0f, std::fabs(want[u][e])))
          << where << " unit " << u << " element " << e;
    }
  }
}

// Two forward-only passes; nothing may stay gathered after them.
absl::Status Evaluate(ShardedEngine& engine, const Limits& lim, const std::string& where) {
  engine.BeginEvaluation();
  for (int pass = 0; pass < 2; ++pass) {
    for (int u : {0, 1, 2, 3, 4, 0}) {
      EXPECT_TRUE(std::isfinite(engine.PreForward(u)[0])) << where;
      EXPECT_LE(engine.memory().buffers, lim.bound) << where;
      engine.PostForward(u);
    }
  }
  ZS_RETURN_IF_ERROR(engine.EndEvaluation());
  EXPECT_EQ(engine.memory().buffers, lim.base) << where << ": gathered after evaluation";
  return absl::OkStatus();
}

// Runs `steps` steps with an evaluation after each.
absl::StatusOr<Observed> RunSteps(const Config& k, Communicator* comm, int steps) {
  const ShardPlan plan = Plan(comm->world_size());
  EngineOptions o;
  o.stage = 3;
  o.compute_dtype = k.compute;
  o.reduce_dtype = k.reduce;
  o.prefetch = k.prefetch;
  o.bucket_bytes = k.bucket_bytes;
  std::vector<std::vector<float>> init(kUnits, std::vector<float>(kNumel));
  for (int u = 0; u < kUnits; ++u) {
    for (int64_t i = 0; i < kNumel; ++i) init[u][i] = 0.01f * static_cast<float>((u * 31 + i) % 17);
  }
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<ShardedEngine> engine,
                      ShardedEngine::Create(plan, comm, o, init));
  Limits lim;
  lim.base = engine->memory().buffers;
  const int64_t P = kNumel, c = DTypeSize(k.compute), g = DTypeSize(k.reduce);
  const int64_t view = k.compute == DType::kBf16 ? 4 * P : 0;
  lim.bound = lim.base + (1 + k.prefetch) * c * P + view + 4 * P + g * P;
  if (k.bucket_bytes > 0) {
    // (1 + d) gather buckets of G elements (at most every unit), the
    // bracket's view, a reduce bucket waiting (fp32, under B / g elements:
    // a full one is issued) and one of R in flight (reduce dtype).
    const int64_t total = kUnits * P;
    const int64_t G = std::max(P, std::min(k.bucket_bytes / c, total));
    const int64_t R = std::max(P, std::min(k.bucket_bytes / g, total));
    const int64_t waiting = std::min(k.bucket_bytes / g, total);
    lim.bound =
        lim.base + std::min((1 + k.prefetch) * G, total) * c + view + 4 * P + g * R + 4 * waiting;
  }
  std::vector<UnitBracket> seq;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    for (const UnitBracket& b : GptBrackets()) seq.push_back(b);
  }
  Observed out;
  for (int step = 0; step < steps; ++step) {
    const std::string where = absl::StrCat(k.Name(), " rank ", comm->rank(), " step ", step);
    engine->ResetPeakMemory();
    const int64_t gathers = comm->stats().of(CommOp::kAllGather).calls;
    const int64_t reduces = comm->stats().of(CommOp::kReduceScatter).calls;
    StepBrackets(*engine, seq, k, lim, step > 0, where);
    EXPECT_LE(engine->peak_memory().buffers, lim.bound) << where;
    ZS_RETURN_IF_ERROR(engine->Step(0.5f).status());
    out.gathers_per_step = comm->stats().of(CommOp::kAllGather).calls - gathers;
    out.reduces_per_step = comm->stats().of(CommOp::kReduceScatter).calls - reduces;
    EXPECT_EQ(engine->memory().buffers, lim.base) << where << ": gathered after the step";
    ZS_RETURN_IF_ERROR(Evaluate(*engine, lim, where));
  }
  for (int u = 0; u < kUnits; ++u) {
    ZS_ASSIGN_OR_RETURN(std::vector<float> full, engine->GatherFullParams(u));
    out.params.push_back(std::move(full));
  }
  return out;
}

// The counts worked out by hand for configs[0..1] (no buckets, prefetch 0
// and 1) and configs[first_bucketed..+3] (buckets of 2 units at prefetch
// 0-2, of 4 at 1).
void ExpectCountsByHand(const std::vector<Config>& configs, const std::vector<Observed>& seen,
                        size_t first_bucketed) {
  // By hand, prefetch 1, one micro-batch of 12 opens: every open gathers but
  // the head's backward (kept from its forward), and the second micro-batch's
  // first forward (kept from the first's last backward): 2 * 11 - 1.
  EXPECT_EQ(seen[1].gathers_per_step, 21);
  // Prefetch 0 gathers at every open: 24.
  EXPECT_EQ(seen[0].gathers_per_step, 24);
  // By hand, buckets of 2 units over a step's 24 opens: [0 1] [2 3]
  // [4 0 0 4] [3 2] [1 0 0 1] [2 3] [4 0 0 4] [3 2] [1 0], one all-gather
  // each at distance 0 or 1. At 2 a bucket is prefetched while the one two
  // before is still held: [3 2] finds both gathered, [4 0] and [1 0] one of
  // theirs, so 6. Gradients go in pairs, 3 reduce-scatters a micro-batch
  // (0 4, 3 2, 1 0) where each backward bracket made one (12).
  for (size_t i = first_bucketed; i < first_bucketed + 3; ++i) {
    EXPECT_EQ(seen[i].gathers_per_step, configs[i].prefetch == 2 ? 6 : 9) << configs[i].Name();
    EXPECT_EQ(seen[i].reduces_per_step, 3 * kMicroBatches) << configs[i].Name();
  }
  // Buckets of 4: [0 1 2 3] [4 0 0 4 3 2] [1 0 0 1 2 3] [4 0 0 4 3 2] [1 0];
  // the reduce bucket (0 4 3 2), (1 0 | next micro-batch's head 0 joins its
  // 0, then 4 3), (2 1 0 at Step): 3.
  EXPECT_EQ(seen[first_bucketed + 3].gathers_per_step, 5);
  EXPECT_EQ(seen[first_bucketed + 3].reduces_per_step, 3);
}

TEST(EnginePrefetchTest, RecordedOrderBoundsAndEquality) {
  std::vector<Config> configs;
  for (int d : {0, 1, 2, 3}) configs.push_back({d});
  configs.push_back({1, DType::kBf16, DType::kFp32});
  configs.push_back({2, DType::kBf16, DType::kBf16});
  // Buckets of 2 and 4 units (a unit is 64 fp32 elements, 256 bytes).
  const size_t first_bucketed = configs.size();
  for (int d : {0, 1, 2}) configs.push_back({d, DType::kFp32, DType::kFp32, 512});
  configs.push_back({1, DType::kFp32, DType::kFp32, 1024});
  configs.push_back({1, DType::kBf16, DType::kBf16, 512});
  std::vector<std::vector<Observed>> seen(2, std::vector<Observed>(configs.size()));
  absl::Status run = RunRanksAsThreads(2, "prefetch", [&](int r, Communicator* comm) {
    for (size_t i = 0; i < configs.size(); ++i) {
      ZS_ASSIGN_OR_RETURN(seen[r][i], RunSteps(configs[i], comm, 3));
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run;
  const ShardPlan plan = Plan(2);
  for (size_t i = 0; i < configs.size(); ++i) {
    TrafficInputs in{3,
                     configs[i].compute,
                     configs[i].reduce,
                     kMicroBatches,
                     GptBrackets(),
                     configs[i].prefetch,
                     configs[i].bucket_bytes};
    absl::StatusOr<TrafficPrediction> t = PredictTraffic(plan, in);
    ASSERT_TRUE(t.ok()) << t.status();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(seen[r][i].gathers_per_step, t->of(Collective::kAllGather).calls)
          << configs[i].Name();
      EXPECT_EQ(seen[r][i].reduces_per_step, t->of(Collective::kReduceScatter).calls)
          << configs[i].Name();
      // The same math whatever the distance: bit-equal to prefetch 0;
      // buckets sum the tied unit's brackets before reducing: 1e-6.
      if (configs[i].compute == DType::kFp32 && configs[i].reduce == DType::kFp32) {
        if (configs[i].bucket_bytes == 0) {
          EXPECT_EQ(seen[r][i].params, seen[r][0].params) << configs[i].Name();
        } else {
          ExpectNear(seen[r][i].params, seen[r][0].params, 1e-6, configs[i].Name());
        }
      }
      EXPECT_EQ(seen[r][i].params, seen[0][i].params) << configs[i].Name() << " rank " << r;
    }
    std::printf("%-22s all-gathers per step %ld\n", configs[i].Name().c_str(),
                seen[0][i].gathers_per_step);
  }
  ExpectCountsByHand(configs, seen[0], first_bucketed);
}

}  // namespace
}  // namespace zeroshard::testing
