#include "bench/coordinator/process_part.h"

#include <cstdio>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace zeroshard::bench {

int ServerProcessPart(const Flags& f, ServerProcess& process) {
  std::vector<SimWorker> workers(f.workers);
  if (absl::Status s = JoinWorkers(process.address(), ClientSecurity{}, workers); !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<uint64_t> generation = PrepareFloor(workers);
  if (!generation.ok()) return Fail(generation.status());
  auto shared = SharedChannels(f, process.address(), ClientSecurity{});
  if (!shared.ok()) return Fail(shared.status());
  const std::vector<StreamLoadWorker> load = StreamLoadOf(workers, *shared);
  std::vector<double> floors, unary, unary_us, streamed, streamed_us;
  const auto cpu = [&process] { return process.CpuSeconds(); };
  for (int run = 0; run < f.runs; ++run) {
    floors.push_back(HeartbeatRate(f.threads, workers, f.seconds, true, *generation));
    const double c0 = cpu();
    const double rate = HeartbeatRate(f.threads, workers, f.seconds, false, 0);
    unary.push_back(rate);
    unary_us.push_back((cpu() - c0) / (rate * f.seconds) * 1e6);
    StreamLoadResult r = RunStreamLoad(load, f.stream_threads, 0.5, f.seconds, cpu);
    streamed.push_back(r.heartbeats_per_second);
    streamed_us.push_back(r.sampled / (r.heartbeats_per_second * f.seconds) * 1e6);
  }
  const double cores = static_cast<double>(std::thread::hardware_concurrency());
  const double floor_rate = Percentile(floors, 0.5);
  std::printf(
      "coordinator in its own process; %d workers (a connection each; streams over %s), "
      "runs %d x %.1f s\n",
      f.workers,
      f.stream_connections > 0 ? (std::to_string(f.stream_connections) + " shared").c_str()
                               : "their own",
      f.runs, f.seconds);
  std::printf("floor (KvGet of 1 byte) calls/s: ");
  PrintMedianAndRuns(floors);
  std::printf("\n");
  for (auto [name, rates, us] : {std::tuple{"unary Heartbeat", &unary, &unary_us},
                                 std::tuple{"HeartbeatStream", &streamed, &streamed_us}}) {
    const double m = Percentile(*us, 0.5);
    std::printf("%s heartbeats/s: ", name);
    PrintMedianAndRuns(*rates);
    std::printf(
        ", %.2f x the floor; coordinator CPU %.1f us a heartbeat (median); "
        "%.0f cores / that = %.0f heartbeats/s\n",
        Percentile(*rates, 0.5) / floor_rate, m, cores, cores / m * 1e6);
  }
  return 0;
}

}  // namespace zeroshard::bench
