// Checkpoint save and restore throughput through the CheckpointService over
// loopback gRPC, against the limit of the same disk measured in the same run.
// The service runs in a process of its own (checkpoint_bench_server, linked
// with the coordinator's malloc, server_child.h); this process is the ranks'
// side, on the workers' malloc. Each side's CPU seconds per GB are printed,
// and the service's VmRSS / VmHWM after the last run's save and restore.
//   save:    N ranks (threads, one channel each) Save their shards of fp32
//            master/m/v (Begin, chunked upload with XXH64, commit = fsync +
//            hash read-back + renames + manifest); vs one sequential write of
//            the same bytes to a file in the same dir, then fsync.
//   restore: the N ranks Restore their shards (GetInfo + Restore, chunk
//            XXH64 checked, bytes compared); vs one sequential read of the
//            baseline file. Then the same restore from a service restarted
//            on the same dir (its first read of the checkpoint: each block
//            verified as it is read), and again with the manifest stripped
//            of its block hashes (the format before them: the files are
//            read and hashed whole first).
// --cache cold (the default) evicts the files from the page cache
// (posix_fadvise DONTNEED; they are fsynced, so clean) before every restore
// and plain read: both then read the disk, the limit this measures.
// --cache warm leaves them cached (just written): both then read memory.
// MB = 10^6 bytes. Medians of --runs; the modes run interleaved.
// With --tls-dir (ca.pem, server.pem/.key, client.pem/.key, as
// `python3 tests/security/certs.py DIR` makes them), a second service on
// mTLS (the product's MakeServerCredentials/OpenChannel) is measured in the
// same runs, interleaved with the plaintext one: TLS's cost on save/restore.
// Usage: checkpoint_bench [--mib 256] [--ranks 2] [--runs 5] [--dir /tmp]
//                         [--chunk-kib 1024] [--streams 4] [--cache cold|warm]
//                         [--tls-dir DIR]
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "bench/checkpoint/bench_report.h"
#include "bench/checkpoint/manifest_format.h"
#include "bench/checkpoint/plain_io.h"
#include "bench/checkpoint/server_child.h"
#include "bench/support/proc_stat.h"
#include "common/infra/allocator.h"
#include "common/infra/cli.h"
#include "common/rpc/rpc_security.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/reshard.h"

namespace zs = zeroshard;

namespace {

using zs::bench::CpuSeconds;
using zs::bench::Die;
using zs::bench::DirectRead;
using zs::bench::EvictTree;
using zs::bench::Median;
using zs::bench::PlainRead;
using zs::bench::PlainReadFiles;
using zs::bench::PlainWrite;
using zs::bench::Timings;

// CPU seconds used so far by the bench's process (the ranks' side) and by
// the service's.
CpuSeconds TakeCpu(pid_t service) {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return {static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec),
          zs::bench::ProcessCpuSeconds(service)};
}
CpuSeconds Since(const CpuSeconds& start, pid_t service) {
  const CpuSeconds now = TakeCpu(service);
  return {now.ranks - start.ranks, now.service - start.service};
}

struct Flags {
  int64_t mib = 256;
  int ranks = 2, runs = 5;
  int64_t chunk_kib = 1024;
  int streams = zs::checkpoint::CheckpointClientOptions{}.streams;
  std::string base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string tls_dir;  // "" = plaintext only.
  std::string cache = "cold";
};

// The flags; std::nullopt to go on, else the exit code (0 after --help).
std::optional<int> ParseFlags(int argc, char** argv, Flags& flags) {
  CLI::App app(
      "Checkpoint save and restore through the checkpoint service against a plain "
      "sequential write+fsync / read of the same bytes to the same disk");
  app.add_option("--mib", flags.mib, "state bytes in all (MiB)")->check(CLI::PositiveNumber);
  app.add_option("--ranks", flags.ranks, "uploading ranks")->check(CLI::PositiveNumber);
  app.add_option("--runs", flags.runs, "timed runs (median)")->check(CLI::PositiveNumber);
  app.add_option("--dir", flags.base, "where the checkpoints and the plain files go");
  app.add_option("--chunk-kib", flags.chunk_kib, "upload chunk, KiB")->check(CLI::PositiveNumber);
  app.add_option("--streams", flags.streams, "concurrent upload/download streams per rank")
      ->check(CLI::Range(1, 64));
  app.add_option("--cache", flags.cache,
                 "cold: evict the files before every read (the disk); warm: read the page cache")
      ->check(CLI::IsMember({"cold", "warm"}));
  app.add_option("--tls-dir", flags.tls_dir,
                 "also run over mTLS with certificates generated here (openssl)");
  return zs::ParseCommandLine(app, argc, argv);
}

// 8 units; total state bytes = 3 kinds * numel * 4 = mib MiB.
zs::ShardPlan BenchPlan(int64_t mib, int ranks) {
  const int64_t unit_numel = (mib << 20) / (3 * 4 * 8);
  std::vector<zs::UnitSpec> units;
  for (int u = 0; u < 8; ++u) {
    units.push_back({"block." + std::to_string(u),
                     {{"w" + std::to_string(u), {unit_numel}, zs::DType::kFp32}}});
  }
  return *zs::MakeShardPlan(units, ranks, 64);
}

// `security` empty = plaintext; channels from the product's OpenChannel.
// `local_reads`: restore through the service's local-read socket.
std::vector<std::unique_ptr<zs::checkpoint::CheckpointClient>> MakeClients(
    int port, const Flags& flags, const zs::ClientSecurity& security, bool local_reads = true) {
  std::vector<std::unique_ptr<zs::checkpoint::CheckpointClient>> clients;
  for (int r = 0; r < flags.ranks; ++r) {
    grpc::ChannelArguments args;
    args.SetInt("zeroshard_rank", r);  // A distinct channel (TCP connection) per rank.
    args.SetMaxReceiveMessageSize(8 << 20);
    auto channel = zs::OpenChannel("127.0.0.1:" + std::to_string(port), security, args);
    if (!channel.ok()) {
      std::fprintf(stderr, "%s\n", channel.status().ToString().c_str());
      std::exit(1);
    }
    zs::checkpoint::CheckpointClientOptions options;
    options.chunk_bytes = flags.chunk_kib << 10;
    options.streams = flags.streams;
    options.local_reads = local_reads;
    clients.push_back(std::make_unique<zs::checkpoint::CheckpointClient>(*channel, options));
  }
  return clients;
}

// Each rank's shard buffers (master, m, v per unit), filled with a pattern,
// and the views Save takes of them.
struct Shards {
  std::vector<std::vector<std::vector<float>>> data;
  std::vector<std::vector<zs::checkpoint::UnitShardView>> views;
};

Shards FillShards(const zs::ShardPlan& plan, int ranks) {
  Shards s;
  s.data.resize(ranks);
  s.views.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto ranges = zs::checkpoint::SaveRanges(plan, r);
    s.data[r].resize(plan.units.size() * 3);
    for (size_t u = 0; u < plan.units.size(); ++u) {
      for (int k = 0; k < 3; ++k) {
        auto& v = s.data[r][u * 3 + k];
        v.resize(ranges[u].length);
        // Padding (elements past the unit's numel) is zero, as Restore writes it.
        for (size_t i = 0; i < v.size(); ++i) {
          const bool pad = ranges[u].offset + static_cast<int64_t>(i) >= plan.units[u].numel;
          v[i] = pad ? 0.f : static_cast<float>((i * 2654435761u + r + k) % 1000) * 1e-3f;
        }
      }
      s.views[r].push_back({plan.units[u].name, ranges[u], s.data[r][u * 3].data(),
                            s.data[r][u * 3 + 1].data(), s.data[r][u * 3 + 2].data()});
    }
  }
  return s;
}

using Clients = std::vector<std::unique_ptr<zs::checkpoint::CheckpointClient>>;

// Seconds for every rank to Save its shards as checkpoint `step`.
// `cpu` gets the CPU both processes used meanwhile.
double TimeSave(const zs::ShardPlan& plan, Clients& clients, const Shards& shards, int step,
                pid_t service, CpuSeconds* cpu) {
  const int ranks = static_cast<int>(clients.size());
  const CpuSeconds cpu0 = TakeCpu(service);
  absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  std::vector<int> committed(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      zs::checkpoint::SaveMetadata m;
      m.job_id = "bench";
      m.step = step;
      m.rank = r;
      m.stage = 3;
      m.plan = plan;
      auto res = clients[r]->Save(m, shards.views[r], absl::Now() + absl::Minutes(10));
      if (!res.ok()) {
        Die("save failed: " + res.status().ToString());
      }
      committed[r] = res->committed;
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  *cpu = Since(cpu0, service);
  // The last rank to commit commits; a rank whose Commit comes after that
  // is told committed too.
  if (std::count(committed.begin(), committed.end(), 1) < 1) Die("no rank committed");
  return seconds;
}

// Seconds for every rank to restore its shards of checkpoint `step` through
// the product's path (GetInfo, then Restore of every unit and kind) into
// buffers allocated and touched before the clock starts, as the engine's
// are; checked against what was saved after it stops.
double TimeRestore(const zs::ShardPlan& plan, Clients& clients, const Shards& shards, int step,
                   pid_t service, CpuSeconds* cpu) {
  const int ranks = static_cast<int>(clients.size());
  std::vector<std::vector<std::vector<float>>> dst(ranks);
  std::vector<std::vector<zs::checkpoint::RestoreTarget>> targets(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto ranges = zs::checkpoint::SaveRanges(plan, r);
    dst[r].resize(plan.units.size() * 3);
    for (size_t u = 0; u < plan.units.size(); ++u) {
      int k = 0;
      for (auto kind : {zs::v1::TENSOR_KIND_MASTER, zs::v1::TENSOR_KIND_EXP_AVG,
                        zs::v1::TENSOR_KIND_EXP_AVG_SQ}) {
        std::vector<float>& d = dst[r][u * 3 + k++];
        d.assign(ranges[u].length, -1.f);
        targets[r].push_back({plan.units[u].name, kind, ranges[u], d.data()});
      }
    }
  }
  const CpuSeconds cpu0 = TakeCpu(service);
  absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      const absl::Time deadline = absl::Now() + absl::Minutes(10);
      auto info = clients[r]->GetInfo("bench", step, deadline);
      if (!info.ok()) Die("get info: " + info.status().ToString());
      absl::Status st = clients[r]->Restore(*info, plan, targets[r], deadline);
      if (!st.ok()) Die("restore failed: " + st.ToString());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  *cpu = Since(cpu0, service);
  for (int r = 0; r < ranks; ++r) {
    if (dst[r] != shards.data[r]) Die("restored bytes differ");
  }
  return seconds;
}

// A fresh plaintext service on dir/ckpt, as a coordinator restarting: it
// has read no checkpoint file yet.
void RestartService(const std::string& dir, const Flags& flags,
                    std::unique_ptr<zs::bench::ServerChild>& service, Clients& clients,
                    Clients& grpc_clients) {
  static int restarts = 0;  // A log of its own: the last one names the old address.
  clients.clear();
  grpc_clients.clear();
  service.reset();
  service = std::make_unique<zs::bench::ServerChild>(
      dir + "/ckpt", zs::TlsFiles{},
      dir + "/server-restart-" + std::to_string(++restarts) + ".log");
  clients = MakeClients(service->port(), flags, {});
  grpc_clients = MakeClients(service->port(), flags, {}, /*local_reads=*/false);
}

// Checkpoint `step`'s restore by a service just restarted, with its
// manifest's block hashes and then without them (the format before: the
// whole files are read and hashed on first access), each from the disk
// with --cache cold.
void TimeRestartRestores(const std::string& dir, const Flags& flags, const zs::ShardPlan& plan,
                         const Shards& shards, int step,
                         std::unique_ptr<zs::bench::ServerChild>& service, Clients& clients,
                         Clients& grpc_clients, Timings& t) {
  const bool cold = flags.cache == "cold";
  t.service_memory = zs::bench::ReadProcessMemory(service->pid());
  RestartService(dir, flags, service, clients, grpc_clients);
  if (cold) EvictTree(dir);
  t.restart_restore_s.push_back(TimeRestore(plan, clients, shards, step, service->pid(),
                                            &t.restart_restore_cpu.emplace_back()));
  zs::bench::StripBlockHashes(dir + "/ckpt", step);
  RestartService(dir, flags, service, clients, grpc_clients);
  if (cold) EvictTree(dir);
  t.restart_whole_restore_s.push_back(TimeRestore(plan, clients, shards, step, service->pid(),
                                                  &t.restart_whole_restore_cpu.emplace_back()));
}

// The second service, on mTLS with the certificates in --tls-dir.
void StartTlsService(const std::string& dir, const Flags& flags,
                     std::unique_ptr<zs::bench::ServerChild>& service, Clients& clients) {
  const std::string& td = flags.tls_dir;
  service = std::make_unique<zs::bench::ServerChild>(
      dir + "/ckpt-tls", zs::TlsFiles{td + "/ca.pem", td + "/server.pem", td + "/server.key"},
      dir + "/server-tls.log");
  clients = MakeClients(service->port(), flags,
                        {{td + "/ca.pem", td + "/client.pem", td + "/client.key"}, ""},
                        /*local_reads=*/false);
}

// Checkpoint `step`'s directory name in the store (checkpoint_manifest.h).
std::string StepDir(int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  return name;
}

// The restore's plain baselines, each after an eviction with --cache cold:
// checkpoint `step`'s own files with as many readers as the restore has
// streams, then the plain file `plain` buffered and O_DIRECT.
void TimePlainReads(const std::string& dir, const std::string& plain, const Flags& flags, int step,
                    std::vector<char>& buf, Timings& t) {
  const bool cold = flags.cache == "cold";
  if (cold) EvictTree(dir);
  t.files_read_s.push_back(
      PlainReadFiles(dir + "/ckpt/" + StepDir(step), flags.ranks * flags.streams));
  if (cold) EvictTree(dir);
  t.read_s.push_back(PlainRead(plain, buf));
  if (cold) EvictTree(dir);
  t.direct_read_s.push_back(DirectRead(plain, buf));
}

// The report's first line: the run's shape.
std::string Header(const Flags& flags, int64_t total_bytes) {
  char header[256];
  std::snprintf(header, sizeof(header),
                "checkpoint_bench: %.1f MB state, %d ranks x %d streams, chunk %lld KiB, %d runs "
                "(medians), %s cache",
                static_cast<double>(total_bytes) / 1e6, flags.ranks, flags.streams,
                static_cast<long long>(flags.chunk_kib), flags.runs, flags.cache.c_str());
  return header;
}

}  // namespace

int main(int argc, char** argv) {
  zs::SetUpWorkerMalloc();  // This process is the ranks' side: the worker's malloc.
  Flags flags;
  if (std::optional<int> code = ParseFlags(argc, argv, flags)) return *code;
  const std::string dir = flags.base + "/zeroshard_ckpt_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const zs::ShardPlan plan = BenchPlan(flags.mib, flags.ranks);
  const int64_t total_bytes = plan.total_padded_numel() * 3 * 4;

  auto service =
      std::make_unique<zs::bench::ServerChild>(dir + "/ckpt", zs::TlsFiles{}, dir + "/server.log");
  Clients clients = MakeClients(service->port(), flags, {});
  Clients grpc_clients = MakeClients(service->port(), flags, {}, /*local_reads=*/false);
  const bool tls = !flags.tls_dir.empty();
  std::unique_ptr<zs::bench::ServerChild> tls_service;
  Clients tls_clients;
  if (tls) StartTlsService(dir, flags, tls_service, tls_clients);
  const Shards shards = FillShards(plan, flags.ranks);

  Timings t;
  const bool cold = flags.cache == "cold";
  std::vector<char> buf(4 << 20, 'x');
  for (int run = 0; run < flags.runs; ++run) {
    // Plain sequential write of the same bytes, then fsync.
    // The last run's file goes first, outside the timing: truncating it
    // inside would charge the plain write for freeing its blocks.
    const std::string plain = dir + "/plain.bin";
    ::unlink(plain.c_str());
    t.write_s.push_back(PlainWrite(plain, buf, total_bytes));
    const pid_t pid = service->pid();
    t.save_s.push_back(TimeSave(plan, clients, shards, run + 1, pid, &t.save_cpu.emplace_back()));
    if (cold) EvictTree(dir);
    t.restore_s.push_back(
        TimeRestore(plan, clients, shards, run + 1, pid, &t.restore_cpu.emplace_back()));
    if (cold) EvictTree(dir);
    t.grpc_restore_s.push_back(
        TimeRestore(plan, grpc_clients, shards, run + 1, pid, &t.grpc_restore_cpu.emplace_back()));
    TimePlainReads(dir, plain, flags, run + 1, buf, t);
    TimeRestartRestores(dir, flags, plan, shards, run + 1, service, clients, grpc_clients, t);
    if (tls) {
      CpuSeconds unused;
      const pid_t tls_pid = tls_service->pid();
      t.tls_save_s.push_back(TimeSave(plan, tls_clients, shards, run + 1, tls_pid, &unused));
      if (cold) EvictTree(dir);
      t.tls_restore_s.push_back(TimeRestore(plan, tls_clients, shards, run + 1, tls_pid, &unused));
    }
  }
  zs::bench::PrintReport(Header(flags, total_bytes), total_bytes, t);
  zs::bench::PrintServiceMemory(t.service_memory);
  clients.clear();
  grpc_clients.clear();
  tls_clients.clear();
  service.reset();
  tls_service.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
