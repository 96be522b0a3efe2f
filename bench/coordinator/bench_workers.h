// What coordinator_bench's parts share: flags, simulated workers (a
// channel and member credential each) and the closed-loop unary heartbeat
// rate.
//
// Thread safety: HeartbeatRate drives the workers from its own threads;
// nothing else is shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/coordinator/stream_load.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/rpc_security.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard::bench {

struct Flags {
  int workers = 1000, threads = 8, runs = 3, trials = 7;
  int stream_threads = 2, server_stream_threads = 2;  // HeartbeatStream load, both sides.
  int stream_connections = 0;   // 0 = each worker's own; K = K shared by the streams.
  bool server_process = false;  // Only part 0: the coordinator in a child process.
  double seconds = 3, lease = 2, interval = 0.25, settle = 0.1;
  std::string tls_dir;  // "" = plaintext only.
};

struct SimWorker {
  std::unique_ptr<CoordinatorClient> client;  // Its own channel and identity.
  uint64_t member_id = 0;
  std::string member_secret;
  std::atomic<bool> silent{false};
  std::atomic<int64_t> last_ack_ns{0};
  std::atomic<int64_t> saw_ns{0};  // First reply showing the awaited generation.
};

// The p-quantile (0..1) of v, nearest rank; 0 for an empty v.
double Percentile(std::vector<double> v, double p);

// Prints "median M (runs: a b c)" of v (no newline).
void PrintMedianAndRuns(const std::vector<double>& v);

// A worker's client: its own channel (distinct args: its own connection)
// and identity (no token: the bench's coordinators have no token file).
absl::StatusOr<std::unique_ptr<CoordinatorClient>> WorkerClient(const std::string& address,
                                                                int index,
                                                                const ClientSecurity& security);

// Closed-loop heartbeats from `t_count` threads for `seconds`; returns
// successful calls per second. With `floor`, KvGet of the 1-byte key
// "floor" in `generation` instead.
double HeartbeatRate(int t_count, const std::vector<SimWorker>& workers, double seconds, bool floor,
                     uint64_t generation);

// The bench's coordinator: job "bench", no HTTP, 2..f.workers workers,
// f's settle, interval (at most lease / 2) and stream threads, and a
// stream limit for f.workers streams from this one host (production has a
// host a worker).
CoordinatorOptions BenchServerOptions(const Flags& f, absl::Duration lease);

// Gives each of `workers` its own client to `address` (WorkerClient) and
// joins it as "sim-<index>", keeping its member id and secret.
absl::Status JoinWorkers(const std::string& address, const ClientSecurity& security,
                         std::vector<SimWorker>& workers);

// The HeartbeatStream load of `workers`: each on its own channel, or, when
// `shared` is not empty, worker i on shared[i % size] with its member
// credential in its stream's metadata.
std::vector<StreamLoadWorker> StreamLoadOf(
    const std::vector<SimWorker>& workers,
    const std::vector<std::shared_ptr<grpc::Channel>>& shared);

// Waits (up to 6 s) until workers[0]'s heartbeat shows a generation of all
// of `workers`, then sets the 1-byte key "floor" that HeartbeatRate's floor
// reads in it; returns that generation. Over RPC only, so it serves a
// coordinator in this process or in a child (server_process.h) alike.
absl::StatusOr<uint64_t> PrepareFloor(std::vector<SimWorker>& workers);

// f.stream_connections channels to `address` without a member credential,
// for StreamLoadOf's `shared` (empty when the flag is 0).
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> SharedChannels(
    const Flags& f, const std::string& address, const ClientSecurity& security);

// The client side of --tls-dir's certificates, or plaintext.
ClientSecurity BenchClientSecurity(const Flags& f, bool tls);

// Prints the error; returns the exit code 1.
int Fail(const absl::Status& s);

}  // namespace zeroshard::bench
