// offload_bench's stage-3 parameter offload rows (--offload-params nvme):
// the whole step (forward gathers, backward gathers with a synthetic
// gradient, Step) of one rank at stage 3 over the same units, with the
// compute shards resident (none) and in NVMe files read ahead 0 and 2 units
// (also with the optimizer state in files), as ratios to none. The
// synthetic forward reads every gathered element and the backward writes
// every gradient element, so a read ahead has some work to hide behind.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "bench/offload/offload_bench.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard::bench {
namespace {

struct ParamCase {
  const char* name;
  bool params;
  int prefetch;
  OffloadTarget optimizer;
};

// One step through the hooks; returns a checksum so the reads are kept.
double OneStep(ShardedEngine& e, int units, long elements) {
  double sum = 0;
  for (int u = 0; u < units; ++u) {
    const float* p = e.PreForward(u);
    for (long i = 0; i < elements; ++i) sum += p[i];
    e.PostForward(u);
  }
  for (int u = units - 1; u >= 0; --u) {
    UnitBackwardView view = e.PreBackward(u);
    for (long i = 0; i < elements; ++i) view.grads[i] += 1e-3f * view.params[i];
    e.PostBackward(u);
  }
  if (!e.Step().ok()) std::exit(1);
  return sum;
}

double StepSeconds(const std::string& dir, int units, long elements, int reps, int steps,
                   Communicator* comm, const ParamCase& c) {
  std::vector<UnitSpec> specs;
  for (int u = 0; u < units; ++u) {
    specs.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {elements}, DType::kFp32}}});
  }
  ShardPlan plan = *MakeShardPlan(specs, 1, 1);
  EngineOptions o;
  o.stage = 3;
  o.optimizer_threads = 0;
  o.offload = {c.optimizer, dir, "", false};
  o.params_offload = {c.params, dir, "", false, c.prefetch};
  std::vector<std::vector<float>> init(units, std::vector<float>(elements, 0.25f));
  auto engine = ShardedEngine::Create(plan, comm, o, init);
  if (!engine.ok()) {
    std::fprintf(stderr, "offload_bench: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  OneStep(**engine, units, elements);  // Warm-up: the gather order is traced.
  std::vector<double> times;
  double keep = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) keep += OneStep(**engine, units, elements);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    steps);
  }
  if (keep == 42.0) std::printf(" ");
  return Median(times);
}

}  // namespace

void ParamOffloadSteps(const std::string& dir, int units, long elements, int reps, int steps,
                       Communicator* comm) {
  const ParamCase cases[] = {{"none", false, 2, OffloadTarget::kDevice},
                             {"params nvme d=0", true, 0, OffloadTarget::kDevice},
                             {"params nvme d=2", true, 2, OffloadTarget::kDevice},
                             {"params+opt nvme d=2", true, 2, OffloadTarget::kNvme}};
  std::printf("stage 3 step (forward, backward, Step), median seconds, ratio to none:\n");
  double none = 0;
  for (const ParamCase& c : cases) {
    const double t = StepSeconds(dir, units, elements, reps, steps, comm, c);
    if (none == 0) none = t;
    std::printf("  %-20s %.4f  x%.2f\n", c.name, t, t / none);
  }
}

}  // namespace zeroshard::bench
