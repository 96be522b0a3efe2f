// The loading half of bench/model/hf_load_bench.py: N ranks (threads, each
// with its own connection, as N worker processes have) download their
// ZeRO-3 shard of a model directory's weights from a running
// zeroshard-coordinator (CheckpointClient::RestoreModelWeights, the path a
// worker's first generation takes), and the wall time of all of them is
// printed as one JSON line: {"seconds": S, "bytes": fp32 bytes received,
// "source_bytes": the safetensors' data bytes}. The shards are received
// into arrays allocated and zeroed before the clock starts, as a worker
// receives them into its engine's master shards.
//
// Usage: model_load_client --coordinator HOST:PORT --model DIR [--ranks 4]
//        [--job default] [--streams 4] [--chunk-kib 1024]
// Exit codes: 0 done, 1 failure (one line on stderr), 2 usage.
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/formats/hf_weights.h"
#include "common/infra/allocator.h"
#include "common/infra/cli.h"
#include "common/model/job_model.h"
#include "common/status_macros.h"
#include "worker/checkpoint/checkpoint_client.h"

namespace zeroshard {
namespace {

struct Flags {
  std::string coordinator, model, job = "default";
  int ranks = 4, streams = 4;
  int64_t chunk_kib = 1024;  // fp32 KiB per DownloadRange chunk (BF16 travels as half).
};

// Rank `rank`'s shard of every unit: zeroed fp32 arrays, faulted in before
// the clock starts, as the engine's master shards are when a worker loads
// into them (RestoreModelWeights in worker/trainer/checkpointing.cc).
std::vector<std::vector<float>> ShardArrays(const ShardPlan& plan, int rank) {
  std::vector<std::vector<float>> shards(plan.units.size());
  for (size_t u = 0; u < plan.units.size(); ++u) shards[u].resize(plan.units[u].shard(rank).length);
  return shards;
}

absl::Status LoadRank(const Flags& f, const ShardPlan& plan, int rank,
                      std::vector<std::vector<float>>& shards) {
  checkpoint::CheckpointClientOptions o;
  o.streams = f.streams;
  o.chunk_bytes = f.chunk_kib << 10;
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::CheckpointClient> client,
                      checkpoint::CheckpointClient::Connect(f.coordinator, o));
  std::vector<checkpoint::RestoreTarget> targets;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    targets.push_back(
        {plan.units[u].name, v1::TENSOR_KIND_MASTER, plan.units[u].shard(rank), shards[u].data()});
  }
  return client->RestoreModelWeights(f.job, plan, targets, absl::Now() + absl::Minutes(30));
}

absl::Status Run(const Flags& f) {
  ZS_ASSIGN_OR_RETURN(const ModelConfig model, ResolveModel(f.model));
  ZS_ASSIGN_OR_RETURN(const HfWeights weights, HfWeights::Open(f.model));
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, MakeShardPlan(ModelUnits(model), f.ranks, 16));
  std::vector<absl::Status> status(f.ranks);
  std::vector<std::vector<std::vector<float>>> shards;
  int64_t total = 0;
  for (int r = 0; r < f.ranks; ++r) {
    shards.push_back(ShardArrays(plan, r));
    for (const std::vector<float>& s : shards.back()) total += static_cast<int64_t>(s.size()) * 4;
  }
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int r = 0; r < f.ranks; ++r) {
    threads.emplace_back([&, r] { status[r] = LoadRank(f, plan, r, shards[r]); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (int r = 0; r < f.ranks; ++r) ZS_RETURN_IF_ERROR(status[r]);
  std::cout << "{\"seconds\": " << seconds << ", \"bytes\": " << total
            << ", \"source_bytes\": " << weights.data_bytes() << "}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::SetUpWorkerMalloc();  // As the worker runs: its ranks' side.
  zeroshard::Flags f;
  CLI::App app{"Every rank's ZeRO-3 shard of a model directory from a coordinator",
               "model_load_client"};
  app.add_option("--coordinator", f.coordinator, "HOST:PORT")->required();
  app.add_option("--model", f.model, "the model directory the coordinator serves")->required();
  app.add_option("--ranks", f.ranks, "world size N")->check(CLI::Range(1, 256));
  app.add_option("--job", f.job, "the coordinator's job id");
  app.add_option("--streams", f.streams, "download streams per rank")->check(CLI::Range(1, 64));
  app.add_option("--chunk-kib", f.chunk_kib, "KiB of fp32 per DownloadRange chunk")
      ->check(CLI::Range(1, 4032));  // The service's limit: 4 MiB - 64 KiB.
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status s = zeroshard::Run(f);
  if (!s.ok()) {
    std::cerr << "model_load_client: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
