// Offload cost, measured in one run (medians of --reps):
//   1. step time of the engine (one rank, stage 1, CPU device, fp32) over
//      --units units of --elements parameters with a synthetic gradient,
//      with the optimizer state in device memory (none), host memory and
//      NVMe files, as ratios to none;
//   2. stage-3 whole-step time with the parameter shards resident and in
//      NVMe files (--offload-params nvme, prefetch 0 and 2), ratios to
//      resident (param_offload_bench.cc);
//   3. NVMe store write and read throughput (Load / Read of whole units, the
//      store's own path: staging slot, io_uring, O_DIRECT) against a plain
//      sequential O_DIRECT pwrite / pread loop of the same bytes in 4 MiB
//      requests (offload_io_bench.cc). Goal: >= 80%.
// The load average is printed: this machine may be shared.
//
// Usage: offload_bench [--dir D (default /tmp)] [--units U (24)]
//                      [--elements N (1Mi)] [--reps R (5)] [--steps S (3)]
#include "bench/offload/offload_bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/infra/cli.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_memory_store.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard::bench {

namespace {

struct Args {
  std::string dir = "/tmp";
  int units = 24;
  long elements = 1 << 20;
  int reps = 5;
  int steps = 3;
};

// Seconds per step (median over reps, each the mean of `steps` steps).
double StepSeconds(const Args& a, Communicator* comm, OffloadTarget target) {
  std::vector<UnitSpec> specs;
  for (int u = 0; u < a.units; ++u) {
    specs.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {a.elements}, DType::kFp32}}});
  }
  ShardPlan plan = *MakeShardPlan(specs, 1, 1);
  EngineOptions o;
  o.stage = 1;
  o.optimizer_threads = 0;
  o.offload = {target, a.dir, "", false};
  std::vector<std::vector<float>> init(a.units, std::vector<float>(a.elements, 0.25f));
  auto engine = ShardedEngine::Create(plan, comm, o, init);
  if (!engine.ok()) {
    std::fprintf(stderr, "offload_bench: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  std::vector<double> times;
  for (int rep = 0; rep < a.reps; ++rep) {
    double total = 0;
    for (int s = 0; s < a.steps; ++s) {
      for (int u = 0; u < a.units; ++u) {
        UnitBackwardView view = (*engine)->PreBackward(u);
        for (long i = 0; i < a.elements; ++i) view.grads[i] += 1e-3f * static_cast<float>(i % 97);
        (*engine)->PostBackward(u);
      }
      const auto t0 = std::chrono::steady_clock::now();
      if (!(*engine)->Step().ok()) std::exit(1);
      total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    times.push_back(total / a.steps);
  }
  return Median(times);
}

// The flags; std::nullopt to go on, else the exit code (0 after --help).
std::optional<int> Parse(int argc, char** argv, Args& a) {
  CLI::App app(
      "Offload step time (none / host / nvme; stage-3 params nvme) and the NVMe store's "
      "throughput against plain sequential O_DIRECT I/O of the same bytes");
  app.add_option("--dir", a.dir, "where the offload files go (an NVMe-backed dir)");
  app.add_option("--units", a.units, "units of the synthetic model")->check(CLI::PositiveNumber);
  app.add_option("--elements", a.elements, "fp32 elements per unit")->check(CLI::PositiveNumber);
  app.add_option("--reps", a.reps, "timed repetitions (median)")->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "steps per repetition (mean)")->check(CLI::PositiveNumber);
  return ParseCommandLine(app, argc, argv);
}

}  // namespace
}  // namespace zeroshard::bench

int main(int argc, char** argv) {
  using namespace zeroshard;
  bench::Args a;
  if (std::optional<int> code = bench::Parse(argc, argv, a)) return *code;
  std::ifstream load("/proc/loadavg");
  std::string l1;
  load >> l1;
  std::printf("offload_bench: %d units x %ld fp32, %d reps, dir %s, load average %s\n", a.units,
              a.elements, a.reps, a.dir.c_str(), l1.c_str());
  InMemoryStore store;
  auto comm = CreateGlooCommunicator(store, "bench", 0, 1, {"127.0.0.1", absl::Seconds(20)});
  if (!comm.ok()) return 1;
  // The update step only (the synthetic backward is outside the timing).
  const double none = bench::StepSeconds(a, comm->get(), OffloadTarget::kDevice);
  const double host = bench::StepSeconds(a, comm->get(), OffloadTarget::kHost);
  const double nvme = bench::StepSeconds(a, comm->get(), OffloadTarget::kNvme);
  std::printf("step (Step(): reduce, clip, AdamW, write-back), median seconds:\n");
  std::printf("  none %.4f   host %.4f (x%.2f)   nvme %.4f (x%.2f)\n", none, host, host / none,
              nvme, nvme / none);
  bench::ParamOffloadSteps(a.dir, a.units, a.elements, a.reps, a.steps, comm->get());
  bench::StoreThroughput(a.dir, a.units, a.elements, a.reps);
  return 0;
}
