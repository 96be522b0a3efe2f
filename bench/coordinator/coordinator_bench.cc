// Coordinator benchmark: N simulated workers (default 1,000) against an
// in-process CoordinatorServer over loopback gRPC.
//
// 1. Heartbeat throughput: T threads (own channel each) heartbeat their
//    workers in a closed loop for S seconds; reported as heartbeats/s,
//    median of R runs, and as a ratio to the gRPC floor measured the same
//    way in the same run (a Heartbeat the coordinator refuses before taking
//    KvGet of a 1-byte key: one unary RPC and the core's lock, no
//    membership work).
// 2. Failure propagation: workers heartbeat every --interval; one worker
//    goes silent; for each survivor, the time from the victim's lease
//    expiry (its last acknowledged heartbeat + lease timeout) to the first
//    heartbeat reply showing the new generation of N-1. Reported per
//    survivor (median, p99 over all trials) and per trial for the last
//    survivor ("every survivor sees it"), against the bound tick + settle +
//    one heartbeat interval.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "common/rpc/coordinator_client.h"
#include "grpcpp/create_channel.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard {
namespace {

struct Flags {
  int workers = 1000;
  int threads = 8;
  int runs = 3;
  double seconds = 3;
  int trials = 7;
  double lease = 2;
  double interval = 0.25;
  double settle = 0.1;
};

struct SimWorker {
  uint64_t member_id = 0;
  std::atomic<bool> silent{false};
  std::atomic<int64_t> last_ack_ns{0};
  std::atomic<int64_t> saw_ns{0};  // First reply showing the awaited generation.
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

std::vector<std::unique_ptr<CoordinatorClient>> MakeClients(const std::string& address, int n) {
  std::vector<std::unique_ptr<CoordinatorClient>> out;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("zeroshard.bench_channel", i);  // Distinct args: a connection per thread.
    out.push_back(std::make_unique<CoordinatorClient>(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args),
        CoordinatorClient::Options{}));
  }
  return out;
}

// Closed-loop heartbeats for `seconds`; returns successful calls per
// second. With `floor`, KvGet of the 1-byte key "floor" instead.
double HeartbeatRate(std::vector<std::unique_ptr<CoordinatorClient>>& clients,
                     const std::vector<SimWorker>& workers, double seconds, bool floor,
                     uint64_t generation) {
  std::atomic<int64_t> calls{0};
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  std::vector<std::thread> threads;
  const int t_count = static_cast<int>(clients.size());
  for (int t = 0; t < t_count; ++t) {
    threads.emplace_back([&, t] {
      int64_t mine = 0;
      for (size_t i = t; absl::Now() < end; i += t_count) {
        if (i >= workers.size()) i = t;
        bool ok = false;
        if (floor) {
          v1::KvGetRequest g;
          g.set_job_id("bench");
          g.set_generation(generation);
          g.set_key("floor");
          ok = clients[t]->KvGet(g).ok();
        } else {
          v1::HeartbeatRequest h;
          h.set_job_id("bench");
          h.set_member_id(workers[i].member_id);
          ok = clients[t]->Heartbeat(h).ok();
        }
        if (ok) ++mine;
      }
      calls += mine;
    });
  }
  for (auto& th : threads) th.join();
  return static_cast<double>(calls.load()) / seconds;
}

// Starts a coordinator and joins every worker to it.
absl::StatusOr<std::unique_ptr<CoordinatorServer>> StartAndJoin(
    const Flags& f, absl::Duration lease, std::vector<SimWorker>& workers,
    std::vector<std::unique_ptr<CoordinatorClient>>& clients) {
  CoordinatorOptions o;
  o.core.job_id = "bench";
  o.metrics_listen = "";
  o.core.min_workers = 2;
  o.core.max_workers = f.workers;
  o.core.settle = absl::Seconds(f.settle);
  o.core.heartbeat_interval = std::min(absl::Seconds(f.interval), lease / 2);
  o.core.lease_timeout = lease;
  auto server = CoordinatorServer::Start(o);
  if (!server.ok()) return server.status();
  clients = MakeClients((*server)->address(), f.threads);
  for (int i = 0; i < f.workers; ++i) {
    v1::JoinRequest j;
    j.set_job_id("bench");
    j.set_worker_id("sim-" + std::to_string(i));
    auto r = clients[i % f.threads]->Join(j);
    if (!r.ok()) return r.status();
    workers[i].member_id = r->member_id();
  }
  return server;
}

using Clients = std::vector<std::unique_ptr<CoordinatorClient>>;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "coordinator_bench: %s\n", s.ToString().c_str());
  return 1;
}

// Waits for every worker to hold a rank, then sets the 1-byte key the floor
// reads in that generation; returns the generation.
absl::StatusOr<uint64_t> PrepareFloor(const Flags& f, CoordinatorServer& server, Clients& clients) {
  for (int i = 0;
       i < 600 && server.core()->RankedMembers().size() != static_cast<size_t>(f.workers); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const uint64_t generation = server.generation();
  v1::KvSetRequest set;
  set.set_job_id("bench");
  set.set_generation(generation);
  set.set_key("floor");
  set.set_value("x");
  if (absl::Status s = clients[0]->KvSet(set); !s.ok()) return s;
  return generation;
}

// Part 1: heartbeat rate against the floor, f.runs times each; prints both.
void MeasureThroughput(const Flags& f, Clients& clients, const std::vector<SimWorker>& workers,
                       uint64_t generation) {
  std::vector<double> rates, floors;
  for (int run = 0; run < f.runs; ++run) {
    rates.push_back(HeartbeatRate(clients, workers, f.seconds, false, generation));
    floors.push_back(HeartbeatRate(clients, workers, f.seconds, true, generation));
  }
  const double rate = Percentile(rates, 0.5), floor_rate = Percentile(floors, 0.5);
  std::printf("workers %d, client threads %d, runs %d x %.1f s\n", f.workers, f.threads, f.runs,
              f.seconds);
  std::printf("heartbeats/s: median %.0f (runs:", rate);
  for (double r : rates) std::printf(" %.0f", r);
  std::printf(")\nfloor (KvGet of 1 byte) calls/s: median %.0f; heartbeat/floor ratio %.2f\n",
              floor_rate,
              rate / floor_rate);
}

// Paced heartbeats, as workers send them: f.threads threads heartbeat their
// workers every f.interval until Stop, recording each worker's last
// acknowledgement and when it first saw generation `awaited` (0: none).
class Pacers {
 public:
  Pacers(const Flags& f, Clients& clients, std::vector<SimWorker>& workers)
      : f_(f), clients_(clients), workers_(workers) {
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
        auto r = clients_[t]->Heartbeat(h);
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
  Clients& clients_;
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
  Clients clients;
  std::vector<SimWorker> workers(f.workers);
  auto server = StartAndJoin(f, absl::Seconds(f.lease), workers, clients);
  if (!server.ok()) return Fail(server.status());
  Pacers pacers(f, clients, workers);
  // Wait for one generation with every worker in it.
  for (int i = 0; i < 600 && World(*clients[0]) != f.workers; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (World(*clients[0]) != f.workers) {
    std::fprintf(stderr, "no generation of %d formed\n", f.workers);
    pacers.Stop();
    return 1;
  }
  Trials trials{f, **server, *clients[0], pacers, workers, f.workers, {}};
  for (int trial = 0; trial < f.trials; ++trial) trials.Run(trial);
  pacers.Stop();
  PrintPropagation(f, trials.out);
  (*server)->Shutdown();
  return 0;
}

// Part 1 against a coordinator whose lease is long enough that the floor
// runs expire no one.
int ThroughputPart(const Flags& f) {
  Clients clients;
  std::vector<SimWorker> workers(f.workers);
  auto server = StartAndJoin(f, absl::Seconds(600), workers, clients);
  if (!server.ok()) return Fail(server.status());
  // The floor needs a running generation holding the key.
  absl::StatusOr<uint64_t> generation = PrepareFloor(f, **server, clients);
  if (!generation.ok()) return Fail(generation.status());
  MeasureThroughput(f, clients, workers, *generation);
  (*server)->Shutdown();
  return 0;
}

int Run(const Flags& f) {
  if (int rc = ThroughputPart(f); rc != 0) return rc;
  return PropagationPart(f);
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  CLI::App app{"coordinator benchmark: heartbeat rate and failure propagation", "coordinator_bench"};
  zeroshard::Flags f;
  app.add_option("--workers", f.workers)->check(CLI::Range(3, 100000));
  app.add_option("--threads", f.threads)->check(CLI::Range(1, 256));
  app.add_option("--runs", f.runs)->check(CLI::Range(1, 100));
  app.add_option("--seconds", f.seconds)->check(CLI::Range(0.1, 600.0));
  app.add_option("--trials", f.trials)->check(CLI::Range(1, 100));
  app.add_option("--lease", f.lease)->check(CLI::Range(0.1, 60.0));
  app.add_option("--interval", f.interval)->check(CLI::Range(0.01, 10.0));
  app.add_option("--settle", f.settle)->check(CLI::Range(0.0, 10.0));
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  return zeroshard::Run(f);
}
