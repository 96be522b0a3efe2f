// Coordinator benchmark: N simulated workers (default 1,000) against an
// in-process CoordinatorServer over loopback gRPC.
//
// 1. Heartbeat throughput: T threads (own channel each) heartbeat their
//    workers in a closed loop for S seconds; reported as heartbeats/s,
//    median of R runs, and as a ratio to the gRPC floor measured the same
//    way in the same run (a Heartbeat the coordinator refuses before taking
//    KvGet of a 1-byte key: one unary RPC and the core's lock, no
//    membership work). Then the same workers over HeartbeatStream
//    (stream_load.h): a stream each, one heartbeat in flight on each.
// 2. Failure propagation: workers heartbeat every --interval; one worker
//    goes silent; for each survivor, the time from the victim's lease
//    expiry (its last acknowledged heartbeat + lease timeout) to the first
//    heartbeat reply showing the new generation of N-1. Reported per
//    survivor (median, p99 over all trials) and per trial for the last
//    survivor ("every survivor sees it"), against the bound tick + settle +
//    one heartbeat interval.
// 0. With --server-process, only this part (process_part.h): the same
//    floor, unary and HeartbeatStream rates against a coordinator in a
//    child process, with its own CPU per heartbeat.
// Each simulated worker has its own channel from the product's OpenChannel
// (a connection each) carrying its member credential from Join. With
// --tls-dir (made by `python3 tests/security/certs.py DIR`), part 1 runs
// against a plaintext and an mTLS coordinator, runs interleaved (TLS's cost
// on heartbeats/s); part 2 is skipped.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/coordinator/bench_workers.h"
#include "bench/coordinator/process_part.h"
#include "bench/coordinator/stream_load.h"
#include "common/infra/cli.h"
#include "common/infra/process_setup.h"
#include "common/rpc/coordinator_client.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard {
namespace {

using bench::BenchClientSecurity;
using bench::Fail;
using bench::Flags;
using bench::HeartbeatRate;
using bench::Percentile;
using bench::PrepareFloor;
using bench::PrintMedianAndRuns;
using bench::SharedChannels;
using bench::SimWorker;

// Starts a coordinator (with `tls` when set) and joins every worker to it.
absl::StatusOr<std::unique_ptr<CoordinatorServer>> StartAndJoin(const Flags& f,
                                                                absl::Duration lease,
                                                                std::vector<SimWorker>& workers,
                                                                bool tls = false) {
  CoordinatorOptions o = bench::BenchServerOptions(f, lease);
  const ClientSecurity security = BenchClientSecurity(f, tls);
  if (tls) {
    const std::string& d = f.tls_dir;
    o.security.tls = {d + "/ca.pem", d + "/server.pem", d + "/server.key"};
  }
  auto server = CoordinatorServer::Start(o);
  if (!server.ok()) return server.status();
  if (absl::Status s = bench::JoinWorkers((*server)->address(), security, workers); !s.ok()) {
    return s;
  }
  return server;
}

// Part 1's figures of one coordinator: per-run heartbeat, floor and
// HeartbeatStream rates.
struct Rates {
  std::vector<double> heartbeats, floors, streamed;
  // --stream-connections channels without a member credential (each
  // stream carries its own); empty = each worker's own channel.
  std::vector<std::shared_ptr<grpc::Channel>> shared;
  int64_t stream_errors = 0;
  void Measure(const Flags& f, const std::vector<SimWorker>& workers, uint64_t generation) {
    heartbeats.push_back(HeartbeatRate(f.threads, workers, f.seconds, false, generation));
    floors.push_back(HeartbeatRate(f.threads, workers, f.seconds, true, generation));
    bench::StreamLoadResult r = bench::RunStreamLoad(bench::StreamLoadOf(workers, shared),
                                                     f.stream_threads, 0.5, f.seconds);
    streamed.push_back(r.heartbeats_per_second);
    stream_errors += r.errors;
  }
};

void PrintRates(const char* name, const Rates& r) {
  const double rate = Percentile(r.heartbeats, 0.5), floor_rate = Percentile(r.floors, 0.5);
  std::printf("%sheartbeats/s: ", name);
  PrintMedianAndRuns(r.heartbeats);
  std::printf("\n%sfloor (KvGet of 1 byte) calls/s: median %.0f; heartbeat/floor ratio %.2f\n",
              name, floor_rate, rate / floor_rate);
  const double streamed = Percentile(r.streamed, 0.5);
  std::printf("%sHeartbeatStream heartbeats/s: ", name);
  PrintMedianAndRuns(r.streamed);
  std::printf("; streams ended early %lld; stream/floor ratio %.2f\n",
              static_cast<long long>(r.stream_errors), streamed / floor_rate);
}

// Paced heartbeats, as workers send them: f.threads threads heartbeat their
// workers every f.interval until Stop, recording each worker's last
// acknowledgement and when it first saw generation `awaited` (0: none).
class Pacers {
 public:
  Pacers(const Flags& f, std::vector<SimWorker>& workers) : f_(f), workers_(workers) {
    for (int t = 0; t < f_.threads; ++t) threads_.emplace_back([this, t] { Loop(t); });
  }
  ~Pacers() { Stop(); }

  void Await(uint64_t generation) { awaited_ = generation; }
  void Stop() {
    stop_ = true;
    for (auto& p : threads_) {
      if (p.joinable()) p.join();
    }
  }

 private:
  void Loop(int t) {
    while (!stop_.load()) {
      const absl::Time next = absl::Now() + absl::Seconds(f_.interval);
      for (int i = t; i < f_.workers; i += f_.threads) {
        SimWorker& w = workers_[i];
        if (w.silent.load()) continue;
        v1::HeartbeatRequest h;
        h.set_job_id("bench");
        h.set_member_id(w.member_id);
        auto r = w.client->Heartbeat(h);
        if (!r.ok()) continue;
        const int64_t now = absl::ToUnixNanos(absl::Now());
        w.last_ack_ns.store(now);
        const uint64_t want = awaited_.load();
        if (want != 0 && r->in_generation() && r->generation() >= want && w.saw_ns.load() == 0) {
          w.saw_ns.store(now);
        }
      }
      const absl::Duration left = next - absl::Now();
      if (left > absl::ZeroDuration()) absl::SleepFor(left);
    }
  }

  const Flags& f_;
  std::vector<SimWorker>& workers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> awaited_{0};
  std::vector<std::thread> threads_;
};

// World size of the running generation, 0 when none runs.
int World(CoordinatorClient& client) {
  auto st = client.GetJobStatus({});
  return st.ok() && st->state() == v1::GenerationInfo::STATE_RUNNING ? st->world_size() : 0;
}

// Milliseconds from a victim's lease expiry to survivors seeing the next
// generation: each survivor in each trial, and the slowest per trial.
struct Propagation {
  std::vector<double> per_survivor_ms, every_survivor_ms;
};

// Part 2's trials against one coordinator whose workers the pacers keep alive.
struct Trials {
  const Flags& f;
  CoordinatorServer& server;
  CoordinatorClient& client;
  Pacers& pacers;
  std::vector<SimWorker>& workers;
  int expected_world;  // Workers not yet silenced.
  Propagation out;

  // Silences the trial's victim and records how long the survivors take to
  // see the generation without it.
  void Run(int trial) {
    const int victim = (trial * 137 + 11) % f.workers;
    if (workers[victim].silent.load()) return;
    for (SimWorker& w : workers) w.saw_ns = 0;
    pacers.Await(server.generation() + 1);
    workers[victim].silent = true;
    --expected_world;
    const absl::Time deadline = absl::Now() + absl::Seconds(f.lease * 3 + 5);
    bool all = false;
    while (!all && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
      all = true;
      for (const SimWorker& w : workers) {
        if (!w.silent.load() && w.saw_ns.load() == 0) all = false;
      }
    }
    if (!all || World(client) != expected_world) {
      std::fprintf(stderr, "trial %d: survivors did not all see a generation of %d\n", trial,
                   expected_world);
      return;
    }
    const double expiry_ns =
        static_cast<double>(workers[victim].last_ack_ns.load()) + f.lease * 1e9;
    double slowest = 0;
    for (const SimWorker& w : workers) {
      if (w.silent.load()) continue;
      const double ms = (static_cast<double>(w.saw_ns.load()) - expiry_ns) / 1e6;
      out.per_survivor_ms.push_back(ms);
      slowest = std::max(slowest, ms);
    }
    out.every_survivor_ms.push_back(slowest);
  }
};

void PrintPropagation(const Flags& f, const Propagation& p) {
  const std::vector<double>& per_survivor_ms = p.per_survivor_ms;
  const std::vector<double>& every_survivor_ms = p.every_survivor_ms;
  const double bound_ms = (f.settle + f.interval) * 1e3 + 25;  // + tick (lease / 4 capped 25 ms)
  std::printf("lease %.2f s, heartbeat interval %.2f s, settle %.2f s, trials %zu\n", f.lease,
              f.interval, f.settle, every_survivor_ms.size());
  std::printf("lease expiry -> survivor sees new generation (ms): median %.1f, p99 %.1f\n",
              Percentile(per_survivor_ms, 0.5), Percentile(per_survivor_ms, 0.99));
  std::printf("lease expiry -> every survivor sees it (ms): median %.1f, p99 %.1f, max %.1f\n",
              Percentile(every_survivor_ms, 0.5), Percentile(every_survivor_ms, 0.99),
              Percentile(every_survivor_ms, 1.0));
  std::printf("bound tick + settle + interval = %.0f ms; median every-survivor / bound = %.2f\n",
              bound_ms, Percentile(every_survivor_ms, 0.5) / bound_ms);
}

// Part 2: a fresh coordinator with the real lease; f.trials victims in turn.
int PropagationPart(const Flags& f) {
  std::vector<SimWorker> workers(f.workers);
  auto server = StartAndJoin(f, absl::Seconds(f.lease), workers);
  if (!server.ok()) return Fail(server.status());
  Pacers pacers(f, workers);
  CoordinatorClient& client = *workers[0].client;
  // Wait for one generation with every worker in it.
  for (int i = 0; i < 600 && World(client) != f.workers; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (World(client) != f.workers) {
    std::fprintf(stderr, "no generation of %d formed\n", f.workers);
    pacers.Stop();
    return 1;
  }
  Trials trials{f, **server, client, pacers, workers, f.workers, {}};
  for (int trial = 0; trial < f.trials; ++trial) trials.Run(trial);
  pacers.Stop();
  PrintPropagation(f, trials.out);
  (*server)->Shutdown();
  return 0;
}

// One coordinator of part 1 (lease long enough that the floor runs expire
// no one) with its workers joined and the floor's key set.
struct ThroughputStack {
  std::vector<SimWorker> workers;
  std::unique_ptr<CoordinatorServer> server;
  uint64_t generation = 0;
  Rates rates;

  absl::Status Start(const Flags& f, bool tls) {
    workers = std::vector<SimWorker>(f.workers);
    auto started = StartAndJoin(f, absl::Seconds(600), workers, tls);
    if (!started.ok()) return started.status();
    server = *std::move(started);
    absl::StatusOr<uint64_t> g = PrepareFloor(workers);
    if (!g.ok()) return g.status();
    generation = *g;
    auto shared = SharedChannels(f, server->address(), BenchClientSecurity(f, tls));
    if (!shared.ok()) return shared.status();
    rates.shared = *std::move(shared);
    return absl::OkStatus();
  }
};

// Part 1: heartbeat rate against the floor, f.runs times; with --tls-dir a
// plaintext and an mTLS coordinator, runs interleaved.
int ThroughputPart(const Flags& f) {
  ThroughputStack plain, tls;
  if (absl::Status s = plain.Start(f, false); !s.ok()) return Fail(s);
  if (!f.tls_dir.empty()) {
    if (absl::Status s = tls.Start(f, true); !s.ok()) return Fail(s);
  }
  for (int run = 0; run < f.runs; ++run) {
    plain.rates.Measure(f, plain.workers, plain.generation);
    if (tls.server) tls.rates.Measure(f, tls.workers, tls.generation);
  }
  std::printf("workers %d (a connection each), client threads %d, runs %d x %.1f s\n", f.workers,
              f.threads, f.runs, f.seconds);
  std::printf("HeartbeatStream: %s, client threads %d, server threads %d\n",
              f.stream_connections == 0 ? "a stream per worker on its own connection"
                                        : absl::StrCat("a stream per worker over ",
                                                       f.stream_connections, " shared connections")
                                              .c_str(),
              f.stream_threads, f.server_stream_threads);
  PrintRates(tls.server ? "plaintext " : "", plain.rates);
  if (tls.server) {
    PrintRates("mTLS      ", tls.rates);
    std::printf("mTLS/plaintext heartbeats/s: %.2f\n",
                Percentile(tls.rates.heartbeats, 0.5) / Percentile(plain.rates.heartbeats, 0.5));
    tls.server->Shutdown();
  }
  plain.server->Shutdown();
  return 0;
}

int Run(const Flags& f) {
  if (int rc = ThroughputPart(f); rc != 0) return rc;
  return f.tls_dir.empty() ? PropagationPart(f) : 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::SetUpProcess(argv[0]);
  CLI::App app{"coordinator benchmark: heartbeat rate and failure propagation",
               "coordinator_bench"};
  zeroshard::bench::Flags f;
  app.add_option("--workers", f.workers)->check(CLI::Range(3, 100000));
  app.add_option("--threads", f.threads, "client threads of the unary heartbeats and the floor")
      ->check(CLI::Range(1, 256));
  app.add_option("--stream-threads", f.stream_threads,
                 "client threads driving the HeartbeatStream load")
      ->check(CLI::Range(1, 64));
  app.add_option("--stream-connections", f.stream_connections,
                 "HeartbeatStream load over K shared connections (0 = a connection each)")
      ->check(CLI::Range(0, 100000));
  app.add_flag(
      "--server-process", f.server_process,
      "only part 0: the coordinator in a child process: rates, floor, its CPU per heartbeat");
  app.add_option("--server-stream-threads", f.server_stream_threads,
                 "the coordinator's HeartbeatStream threads (heartbeat_stream_threads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--runs", f.runs)->check(CLI::Range(1, 100));
  app.add_option("--seconds", f.seconds)->check(CLI::Range(0.1, 600.0));
  app.add_option("--trials", f.trials)->check(CLI::Range(1, 100));
  app.add_option("--lease", f.lease)->check(CLI::Range(0.1, 60.0));
  app.add_option("--interval", f.interval)->check(CLI::Range(0.01, 10.0));
  app.add_option("--settle", f.settle)->check(CLI::Range(0.0, 10.0));
  app.add_option("--tls-dir", f.tls_dir, "certificates (tests/security/certs.py): TLS vs plaintext")
      ->check(CLI::ExistingDirectory);
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  if (f.server_process) {  // Forked before this process touches gRPC.
    auto process = zeroshard::bench::ServerProcess::Fork(
        zeroshard::bench::BenchServerOptions(f, absl::Seconds(600)));
    if (!process.ok()) return zeroshard::bench::Fail(process.status());
    return zeroshard::bench::ServerProcessPart(f, **process);
  }
  return zeroshard::Run(f);
}
