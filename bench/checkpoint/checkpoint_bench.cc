// Checkpoint save and restore throughput through the CheckpointService over
// loopback gRPC, against the limit of the same disk measured in the same run:
//   save:    N ranks (threads, one channel each) Save their shards of fp32
//            master/m/v (Begin, chunked upload with XXH64, commit = fsync +
//            hash read-back + renames + manifest); vs one sequential write of
//            the same bytes to a file in the same dir, then fsync.
//   restore: the N ranks download their shards (chunk XXH64 checked); vs one
//            sequential read of the baseline file.
// Both reads find the data in the page cache (it was just written); the
// ratio compares equal conditions. MB = 10^6 bytes. Medians of --runs.
// Usage: checkpoint_bench [--mib 256] [--ranks 2] [--runs 5] [--dir /tmp]
//                         [--chunk-kib 1024]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/checkpoint/checkpoint_service.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/reshard.h"

namespace zs = zeroshard;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double PlainWrite(const std::string& path, const std::vector<char>& buf, int64_t bytes) {
  absl::Time t0 = absl::Now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (int64_t done = 0; done < bytes;) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(buf.size()), bytes - done);
    if (::write(fd, buf.data(), static_cast<size_t>(n)) != n) std::abort();
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

double PlainRead(const std::string& path, std::vector<char>& buf) {
  absl::Time t0 = absl::Now();
  int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 256;
  int ranks = 2, runs = 5;
  int64_t chunk_kib = 1024;
  std::string base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "--mib") mib = std::atoll(argv[i + 1]);
    else if (f == "--ranks") ranks = std::atoi(argv[i + 1]);
    else if (f == "--runs") runs = std::atoi(argv[i + 1]);
    else if (f == "--dir") base = argv[i + 1];
    else if (f == "--chunk-kib") chunk_kib = std::atoll(argv[i + 1]);
    else { std::fprintf(stderr, "unknown flag %s\n", f.c_str()); return 2; }
  }
  const std::string dir = base + "/zeroshard_ckpt_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  // 8 units; total state bytes = 3 kinds * numel * 4 = mib MiB.
  const int64_t unit_numel = (mib << 20) / (3 * 4 * 8);
  std::vector<zs::UnitSpec> units;
  for (int u = 0; u < 8; ++u) {
    units.push_back({"block." + std::to_string(u), {{"w" + std::to_string(u), {unit_numel}, zs::DType::kFp32}}});
  }
  const zs::ShardPlan plan = *zs::MakeShardPlan(units, ranks, 64);
  const int64_t total_bytes = plan.total_padded_numel() * 3 * 4;

  auto store = *zs::server::CheckpointStore::Open({dir + "/ckpt", 1, nullptr, nullptr});
  zs::server::CheckpointServiceImpl service(store.get());
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  b.SetMaxReceiveMessageSize(8 << 20);
  auto server = b.BuildAndStart();
  std::vector<std::unique_ptr<zs::checkpoint::CheckpointClient>> clients;
  for (int r = 0; r < ranks; ++r) {
    grpc::ChannelArguments args;
    args.SetInt("zeroshard_rank", r);  // A distinct channel (TCP connection) per rank.
    args.SetMaxReceiveMessageSize(8 << 20);
    clients.push_back(std::make_unique<zs::checkpoint::CheckpointClient>(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args),
        zs::checkpoint::CheckpointClientOptions{chunk_kib << 10}));
  }
  // Each rank's shard buffers (master, m, v per unit), filled with a pattern.
  std::vector<std::vector<std::vector<float>>> data(ranks);
  std::vector<std::vector<zs::checkpoint::UnitShardView>> views(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto ranges = zs::checkpoint::SaveRanges(plan, r);
    data[r].resize(plan.units.size() * 3);
    for (size_t u = 0; u < plan.units.size(); ++u) {
      for (int k = 0; k < 3; ++k) {
        auto& v = data[r][u * 3 + k];
        v.resize(ranges[u].length);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 2654435761u + r + k) % 1000) * 1e-3f;
      }
      views[r].push_back({plan.units[u].name, ranges[u], data[r][u * 3].data(), data[r][u * 3 + 1].data(),
                          data[r][u * 3 + 2].data()});
    }
  }

  std::vector<double> save_s, write_s, restore_s, read_s;
  std::vector<char> buf(4 << 20, 'x');
  for (int run = 0; run < runs; ++run) {
    // Plain sequential write of the same bytes, then fsync.
    const std::string plain = dir + "/plain.bin";
    write_s.push_back(PlainWrite(plain, buf, total_bytes));

    absl::Time t0 = absl::Now();
    std::vector<std::thread> threads;
    std::vector<int> committed(ranks, 0);
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        zs::checkpoint::SaveMetadata m;
        m.job_id = "bench";
        m.step = run + 1;
        m.rank = r;
        m.stage = 3;
        m.plan = plan;
        auto res = clients[r]->Save(m, views[r], absl::Now() + absl::Minutes(10));
        if (!res.ok()) {
          std::fprintf(stderr, "save failed: %s\n", std::string(res.status().message()).c_str());
          std::abort();
        }
        committed[r] = res->committed;
      });
    }
    for (auto& t : threads) t.join();
    save_s.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
    if (std::count(committed.begin(), committed.end(), 1) != 1) std::abort();

    t0 = absl::Now();
    threads.clear();
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        auto ranges = zs::checkpoint::SaveRanges(plan, r);
        std::vector<float> dst;
        for (size_t u = 0; u < plan.units.size(); ++u) {
          dst.resize(ranges[u].length);
          for (auto k : {zs::v1::TENSOR_KIND_MASTER, zs::v1::TENSOR_KIND_EXP_AVG, zs::v1::TENSOR_KIND_EXP_AVG_SQ}) {
            absl::Status st = clients[r]->Download("bench", run + 1, plan.units[u].name, k, ranges[u], dst.data(),
                                                   absl::Now() + absl::Minutes(10));
            if (!st.ok()) std::abort();
          }
          if (dst != data[r][u * 3 + 2]) std::abort();  // The last kind read is v.
        }
      });
    }
    for (auto& t : threads) t.join();
    restore_s.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
    read_s.push_back(PlainRead(plain, buf));
  }
  const double mb = static_cast<double>(total_bytes) / 1e6;
  const double save = mb / Median(save_s), write = mb / Median(write_s);
  const double restore = mb / Median(restore_s), read = mb / Median(read_s);
  std::printf("checkpoint_bench: %.1f MB state, %d ranks, chunk %lld KiB, %d runs (medians)\n", mb, ranks,
              static_cast<long long>(chunk_kib), runs);
  std::printf("  save    through service: %8.1f MB/s   plain write+fsync: %8.1f MB/s   ratio %.2f\n", save, write,
              save / write);
  std::printf("  restore through service: %8.1f MB/s   plain read:        %8.1f MB/s   ratio %.2f\n", restore, read,
              restore / read);
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  std::filesystem::remove_all(dir);
  return 0;
}
