#include "bench/coordinator/process_part.h"

#include <cstdio>
#include <thread>
#include <tuple>
#include <vector>


namespace zeroshard::bench {

int ServerProcessPart(const Flags& f, ServerProcess& process) {
  std::vector<SimWorker> workers(f.workers);
  if (absl::Status s = JoinWorkers(process.address(), ClientSecurity{}, workers); !s.ok()) {
    return Fail(s);
  }
  const std::vector<StreamLoadWorker> load = StreamLoadOf(workers, {});
  std::vector<double> unary, unary_us, streamed, streamed_us;
  const auto cpu = [&process] { return process.CpuSeconds(); };
  for (int run = 0; run < f.runs; ++run) {
    const double c0 = cpu();
    const double rate = HeartbeatRate(f.threads, workers, f.seconds, false, 0);
    unary.push_back(rate);
    unary_us.push_back((cpu() - c0) / (rate * f.seconds) * 1e6);
    StreamLoadResult r = RunStreamLoad(load, f.stream_threads, 0.5, f.seconds, cpu);
    streamed.push_back(r.heartbeats_per_second);
    streamed_us.push_back(r.sampled / (r.heartbeats_per_second * f.seconds) * 1e6);
  }
  const double cores = static_cast<double>(std::thread::hardware_concurrency());
  std::printf("coordinator in its own process; %d workers (a connection each), runs %d x %.1f s\n",
              f.workers, f.runs, f.seconds);
  for (auto [name, rates, us] : {std::tuple{"unary Heartbeat", &unary, &unary_us},
                                 std::tuple{"HeartbeatStream", &streamed, &streamed_us}}) {
    const double m = Percentile(*us, 0.5);
    std::printf("%s: %.0f heartbeats/s (median); coordinator CPU %.1f us a heartbeat (median); "
                "%.0f cores / that = %.0f heartbeats/s\n",
                name, Percentile(*rates, 0.5), m, cores, cores / m * 1e6);
  }
  return 0;
}

}  // namespace zeroshard::bench
