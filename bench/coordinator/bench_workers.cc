#include "bench/coordinator/bench_workers.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zeroshard::bench {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

void PrintMedianAndRuns(const std::vector<double>& v) {
  std::printf("median %.0f (runs:", Percentile(v, 0.5));
  for (double x : v) std::printf(" %.0f", x);
  std::printf(")");
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> WorkerClient(const std::string& address,
                                                                int index,
                                                                const ClientSecurity& security) {
  grpc::ChannelArguments args;
  args.SetInt("zeroshard.bench_worker", index);
  CoordinatorClient::Options options;
  options.security = security;
  options.identity = std::make_shared<CallIdentity>("");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      OpenChannel(address, security, args, options.identity);
  if (!channel.ok()) return channel.status();
  return std::make_unique<CoordinatorClient>(*channel, options);
}

double HeartbeatRate(int t_count, const std::vector<SimWorker>& workers, double seconds, bool floor,
                     uint64_t generation) {
  std::atomic<int64_t> calls{0};
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  std::vector<std::thread> threads;
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
          ok = workers[i].client->KvGet(g).ok();
        } else {
          v1::HeartbeatRequest h;
          h.set_job_id("bench");
          h.set_member_id(workers[i].member_id);
          ok = workers[i].client->Heartbeat(h).ok();
        }
        if (ok) ++mine;
      }
      calls += mine;
    });
  }
  for (auto& th : threads) th.join();
  return static_cast<double>(calls.load()) / seconds;
}

CoordinatorOptions BenchServerOptions(const Flags& f, absl::Duration lease) {
  CoordinatorOptions o;
  o.core.job_id = "bench";
  o.metrics_listen = "";
  o.core.min_workers = 2;
  o.core.max_workers = f.workers;
  o.core.settle = absl::Seconds(f.settle);
  o.core.heartbeat_interval = std::min(absl::Seconds(f.interval), lease / 2);
  o.core.lease_timeout = lease;
  o.heartbeat_stream_threads = f.server_stream_threads;
  o.max_streams_per_caller = 2 * f.workers + 16;
  return o;
}

absl::Status JoinWorkers(const std::string& address, const ClientSecurity& security,
                         std::vector<SimWorker>& workers) {
  for (size_t i = 0; i < workers.size(); ++i) {
    auto client = WorkerClient(address, static_cast<int>(i), security);
    if (!client.ok()) return client.status();
    workers[i].client = *std::move(client);
    v1::JoinRequest j;
    j.set_job_id("bench");
    j.set_worker_id("sim-" + std::to_string(i));
    auto r = workers[i].client->Join(j);
    if (!r.ok()) return r.status();
    workers[i].member_id = r->member_id();
    workers[i].member_secret = r->member_secret();
  }
  return absl::OkStatus();
}

std::vector<StreamLoadWorker> StreamLoadOf(
    const std::vector<SimWorker>& workers,
    const std::vector<std::shared_ptr<grpc::Channel>>& shared) {
  std::vector<StreamLoadWorker> load;
  for (size_t i = 0; i < workers.size(); ++i) {
    const SimWorker& w = workers[i];
    if (shared.empty()) {
      load.push_back({w.client->channel(), "bench", w.member_id, ""});
    } else {
      load.push_back({shared[i % shared.size()], "bench", w.member_id,
                      absl::StrCat(w.member_id, ":", w.member_secret)});
    }
  }
  return load;
}

absl::StatusOr<uint64_t> PrepareFloor(std::vector<SimWorker>& workers) {
  v1::HeartbeatRequest h;
  h.set_job_id("bench");
  h.set_member_id(workers[0].member_id);
  const auto whole = [&workers](const v1::HeartbeatResponse& r) {
    return r.in_generation() && r.world_size() == static_cast<int>(workers.size());
  };
  absl::StatusOr<v1::HeartbeatResponse> seen = workers[0].client->Heartbeat(h);
  for (int i = 1; i < 600 && !(seen.ok() && whole(*seen)); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    seen = workers[0].client->Heartbeat(h);
  }
  if (!seen.ok()) return seen.status();
  if (!whole(*seen)) {
    return absl::DeadlineExceededError(absl::StrCat("the generation holds ", seen->world_size(),
                                                    " of ", workers.size(), " workers after 6 s"));
  }
  v1::KvSetRequest set;
  set.set_job_id("bench");
  set.set_generation(seen->generation());
  set.set_key("floor");
  set.set_value("x");
  if (absl::Status s = workers[0].client->KvSet(set); !s.ok()) return s;
  return seen->generation();
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> SharedChannels(
    const Flags& f, const std::string& address, const ClientSecurity& security) {
  std::vector<std::shared_ptr<grpc::Channel>> shared;
  for (int k = 0; k < f.stream_connections; ++k) {
    auto c = WorkerClient(address, f.workers + k, security);
    if (!c.ok()) return c.status();
    shared.push_back((*c)->channel());
  }
  return shared;
}

ClientSecurity BenchClientSecurity(const Flags& f, bool tls) {
  ClientSecurity security;
  const std::string& d = f.tls_dir;
  if (tls) security.tls = {d + "/ca.pem", d + "/client.pem", d + "/client.key"};
  return security;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "coordinator_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace zeroshard::bench
