// The CPU backends' all-gather and reduce-scatter bus bandwidth (Gloo over
// loopback TCP, shm through shared memory), ranks as threads in this process
// (--ranks threads, the default) or as one forked process each (--ranks
// processes, as `zeroshard launch` runs workers), next to limits measured
// in the same run: a plain memcpy of the same bytes, one loopback TCP stream
// carrying them, and the loopback aggregate (the best of 1-8 streams at
// once) divided by N, the most any collective of N ranks over TCP can reach
// here (loopback_tcp.h); the streams read and write full-size buffers, and
// the aggregate from one reused 4 MiB block is printed beside it (hot).
//
// Size S is nccl-tests' size: the full (world_size * count) fp32 buffer.
// algbw = S / t, busbw = algbw * (N-1)/N (nccl-tests doc/PERFORMANCE.md),
// t = the slowest rank's issue-to-completion time of one op, each iteration
// started after a barrier. Figures are medians over `runs` iterations after
// one warm-up.
//
// Usage: comm_bandwidth_bench [--runs 5] [--max-mib 256] [--worlds 2,4]
//                             [--backends gloo,shm] [--ranks threads|processes]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/comm/loopback_tcp.h"
#include "bench/comm/rank_processes.h"
#include "common/infra/cli.h"
#include "worker/comm/communicator.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/in_memory_store.h"

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of memcpy of `bytes` (buffers touched first).
double MemcpySeconds(size_t bytes, int runs) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i <= runs; ++i) {
    const auto start = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) t.push_back(s);  // First is warm-up.
  }
  if (dst[bytes / 2] != 1) std::abort();  // Keep the copy observable.
  return Median(t);
}

// One rank's seconds for `runs` iterations of `op` after one warm-up, each
// started after a barrier (its buffers allocated and touched first).
std::vector<double> RankSeconds(Communicator& comm, CommOp op, int64_t count, int runs) {
  const int n = comm.world_size();
  std::vector<float> big(count * n, 1.0f), small(count, 1.0f);
  std::vector<double> seconds;
  for (int i = 0; i <= runs; ++i) {
    if (!comm.Barrier().ok()) std::abort();
    const auto start = Clock::now();
    std::unique_ptr<Work> w =
        op == CommOp::kAllGather
            ? comm.AllGather(small.data(), big.data(), count, DType::kFp32)
            : comm.ReduceScatter(big.data(), small.data(), count, DType::kFp32, ReduceOp::kSum);
    absl::Status s = w->Wait(absl::Minutes(5));
    if (!s.ok()) {
      std::fprintf(stderr, "%s failed: %s\n", CommOpName(op), s.ToString().c_str());
      std::abort();
    }
    if (i > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return seconds;
}

// Median over iterations of the slowest rank's seconds; the iterations are
// per_rank[r][first .. first + runs).
double SlowestMedian(const std::vector<std::vector<double>>& per_rank, size_t first, int runs) {
  std::vector<double> slowest(runs, 0.0);
  for (const std::vector<double>& rank : per_rank) {
    for (int i = 0; i < runs; ++i) slowest[i] = std::max(slowest[i], rank[first + i]);
  }
  return Median(slowest);
}

// Median over iterations of the slowest rank's seconds for one op, ranks as
// threads of this process.
double CollectiveSeconds(std::vector<std::unique_ptr<Communicator>>& comms, CommOp op,
                         int64_t count, int runs) {
  std::vector<std::vector<double>> per_rank(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] { per_rank[r] = RankSeconds(*comms[r], op, count, runs); });
  }
  for (auto& t : threads) t.join();
  return SlowestMedian(per_rank, 0, runs);
}

// n communicators of `backend`, connected concurrently; empty on failure.
std::vector<std::unique_ptr<Communicator>> Connect(const std::string& backend, int n) {
  static InMemoryStore store;
  const std::string prefix = backend + std::to_string(n) + "/";
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> made(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { made[r] = CreateCommunicator(backend, store, prefix, r, n); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& c : made) {
    if (!c.ok()) {
      std::fprintf(stderr, "connect %s: %s\n", backend.c_str(), c.status().ToString().c_str());
      return {};
    }
    comms.push_back(std::move(*c));
  }
  return comms;
}

struct Limits {
  double memcpy_gbs = 0, tcp_gbs = 0;
  double aggregate_gbs = 0;      // Loopback TCP, the best of 1-8 streams at once.
  double hot_aggregate_gbs = 0;  // The same from one reused 4 MiB block (LoopbackBuffers).
};

// The sizes measured, MiB: 1, 4, 16, ... from min_mib up to max_mib; each
// with its run count (sizes >= 64 MiB use max(3, runs / 2)).
struct SizeRuns {
  int mib;
  int runs;
};
std::vector<SizeRuns> Sizes(int min_mib, int max_mib, int runs) {
  std::vector<SizeRuns> sizes;
  for (int mib = 1; mib <= max_mib; mib *= 4) {
    if (mib >= min_mib) sizes.push_back({mib, mib >= 64 ? std::max(3, runs / 2) : runs});
  }
  return sizes;
}

constexpr CommOp kOps[] = {CommOp::kAllGather, CommOp::kReduceScatter};

// fp32 elements per rank for a size of `mib` at world size n.
int64_t CountFor(int mib, int n) {
  return static_cast<int64_t>((static_cast<size_t>(mib) << 20) / sizeof(float) / n);
}

void PrintRow(const std::string& backend, CommOp op, int n, int mib, double t,
              const Limits& limit) {
  const size_t exact = static_cast<size_t>(CountFor(mib, n)) * n * sizeof(float);
  const double busbw = exact / t / 1e9 * BusBandwidthFactor(op, n);
  const double per_rank = limit.aggregate_gbs / n;
  const double hot_per_rank = limit.hot_aggregate_gbs / n;
  std::printf(
      "%-6s %-15s %3d %8d %9.2f %10.3f %11.3f %8.3f %11.3f %8.3f %11.3f %8.3f %11.3f %8.3f\n",
      backend.c_str(), CommOpName(op), n, mib, t * 1e3, busbw, limit.memcpy_gbs,
      busbw / limit.memcpy_gbs, limit.tcp_gbs, busbw / limit.tcp_gbs, per_rank, busbw / per_rank,
      hot_per_rank, busbw / hot_per_rank);
  std::fflush(stdout);
}

// Prints one backend's rows at world size n against the limits per size,
// ranks as threads of this process.
void RunBackend(const std::string& backend, int n, const std::vector<SizeRuns>& sizes,
                const std::vector<Limits>& limits) {
  std::vector<std::unique_ptr<Communicator>> comms = Connect(backend, n);
  if (comms.empty()) return;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (CommOp op : kOps) {
      const double t = CollectiveSeconds(comms, op, CountFor(sizes[i].mib, n), sizes[i].runs);
      PrintRow(backend, op, n, sizes[i].mib, t, limits[i]);
    }
  }
}

// The same with each rank a process of its own (rank_processes.h): every
// size and op runs in the children, then the rows are printed.
void RunBackendProcesses(const std::string& backend, int n, const std::vector<SizeRuns>& sizes,
                         const std::vector<Limits>& limits) {
  const std::vector<std::vector<double>> per_rank =
      RunRankProcesses(backend, n, [&sizes](Communicator& comm) {
        std::vector<double> all;
        for (const SizeRuns& size : sizes) {
          for (CommOp op : kOps) {
            const std::vector<double> t =
                RankSeconds(comm, op, CountFor(size.mib, comm.world_size()), size.runs);
            all.insert(all.end(), t.begin(), t.end());
          }
        }
        return all;
      });
  if (per_rank.empty()) return;
  size_t first = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (CommOp op : kOps) {
      PrintRow(backend, op, n, sizes[i].mib, SlowestMedian(per_rank, first, sizes[i].runs),
               limits[i]);
      first += static_cast<size_t>(sizes[i].runs);
    }
  }
}

int Main(int argc, char** argv) {
  int runs = 5, min_mib = 1, max_mib = 256;
  std::vector<int> worlds = {2, 4};
  std::vector<std::string> backends = {"gloo", "shm"};
  std::string ranks = "threads";
  CLI::App app(
      "CPU all-gather / reduce-scatter bus bandwidth, ranks as threads or processes, against "
      "memcpy, one loopback TCP stream of the same bytes, and the loopback aggregate (best of 1-8 "
      "streams) / N (sizes 1, 4, 16, ... MiB from --min-mib up to --max-mib)");
  app.add_option("--runs", runs, "timed runs per size (median; sizes >= 64 MiB use max(3, runs/2))")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-mib", min_mib, "smallest message, MiB")->check(CLI::PositiveNumber);
  app.add_option("--max-mib", max_mib, "largest message, MiB")->check(CLI::PositiveNumber);
  app.add_option("--worlds", worlds, "world sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(2, 64));
  app.add_option("--backends", backends, "backends, comma-separated (gloo, shm)")
      ->delimiter(',')
      ->check(CLI::IsMember({"gloo", "shm"}));
  app.add_option("--ranks", ranks,
                 "threads (every rank in this process) or processes (one forked process a "
                 "rank, meeting through a file store, as workers do)")
      ->check(CLI::IsMember({"threads", "processes"}))
      ->capture_default_str();
  if (std::optional<int> code = ParseCommandLine(app, argc, argv)) return *code;
  if (min_mib > max_mib) {
    std::fprintf(stderr, "--min-mib %d is above --max-mib %d: no size to measure\n", min_mib,
                 max_mib);
    return 2;
  }
  const std::vector<SizeRuns> sizes = Sizes(min_mib, max_mib, runs);
  std::vector<Limits> limits;
  for (const SizeRuns& size : sizes) {
    const size_t bytes = static_cast<size_t>(size.mib) << 20;
    const int r = size.runs;
    limits.push_back(
        {bytes / MemcpySeconds(bytes, r) / 1e9,
         bytes / LoopbackTcpSeconds(bytes, r, LoopbackBuffers::kFullSize) / 1e9,
         LoopbackAggregateBytesPerSecond(bytes, r, LoopbackBuffers::kFullSize) / 1e9,
         LoopbackAggregateBytesPerSecond(bytes, r, LoopbackBuffers::kReused4MiB) / 1e9});
  }
  std::printf("ranks as %s\n", ranks.c_str());
  std::printf("%-6s %-15s %3s %8s %9s %10s %11s %8s %11s %8s %11s %8s %11s %8s\n", "backend", "op",
              "N", "size_MiB", "time_ms", "busbw_GB/s", "memcpy_GB/s", "/memcpy", "tcp_GB/s",
              "/tcp", "agg/N_GB/s", "/(agg/N)", "hot_agg/N", "/(hot)");
  for (int n : worlds) {
    for (const std::string& backend : backends) {
      if (ranks == "processes") {
        RunBackendProcesses(backend, n, sizes, limits);
      } else {
        RunBackend(backend, n, sizes, limits);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Main(argc, argv); }
