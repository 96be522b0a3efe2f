// The loading half of bench/model/hf_load_bench.py: N ranks (threads, each
// with its own connection, as N worker processes have) download their
// ZeRO-3 shard of a model directory's weights from a running
// zeroshard-coordinator (CheckpointClient::RestoreModelWeights, the path a
// worker's first generation takes), and the wall time of all of them is
// printed as one JSON line: {"seconds": S, "bytes": fp32 bytes received,
// "source_bytes": the safetensors' data bytes}. The engine's own copy of
// each shard (LoadShardState) is not included.
//
// Usage: model_load_client --coordinator HOST:PORT --model DIR [--ranks 4]
//        [--job default] [--streams 4]
// Exit codes: 0 done, 1 failure (one line on stderr), 2 usage.
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cli.h"
#include "common/hf_weights.h"
#include "common/job_model.h"
#include "common/status_macros.h"
#include "worker/checkpoint/checkpoint_client.h"

namespace zeroshard {
namespace {

struct Flags {
  std::string coordinator, model, job = "default";
  int ranks = 4, streams = 4;
};

absl::Status LoadRank(const Flags& f, const ShardPlan& plan, int rank, int64_t* bytes) {
  checkpoint::CheckpointClientOptions o;
  o.streams = f.streams;
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::CheckpointClient> client,
                      checkpoint::CheckpointClient::Connect(f.coordinator, o));
  std::vector<std::vector<float>> shards(plan.units.size());
  std::vector<checkpoint::RestoreTarget> targets;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const ElementRange range = plan.units[u].shard(rank);
    shards[u].resize(range.length);
    targets.push_back({plan.units[u].name, v1::TENSOR_KIND_MASTER, range, shards[u].data()});
    *bytes += range.length * 4;
  }
  return client->RestoreModelWeights(f.job, plan, targets, absl::Now() + absl::Minutes(30));
}

absl::Status Run(const Flags& f) {
  ZS_ASSIGN_OR_RETURN(const ModelConfig model, ResolveModel(f.model));
  ZS_ASSIGN_OR_RETURN(const HfWeights weights, HfWeights::Open(f.model));
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, MakeShardPlan(ModelUnits(model), f.ranks, 16));
  std::vector<absl::Status> status(f.ranks);
  std::vector<int64_t> bytes(f.ranks, 0);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int r = 0; r < f.ranks; ++r) {
    threads.emplace_back([&, r] { status[r] = LoadRank(f, plan, r, &bytes[r]); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  int64_t total = 0;
  for (int r = 0; r < f.ranks; ++r) {
    ZS_RETURN_IF_ERROR(status[r]);
    total += bytes[r];
  }
  std::cout << "{\"seconds\": " << seconds << ", \"bytes\": " << total
            << ", \"source_bytes\": " << weights.data_bytes() << "}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Flags f;
  CLI::App app{"Every rank's ZeRO-3 shard of a model directory from a coordinator",
               "model_load_client"};
  app.add_option("--coordinator", f.coordinator, "HOST:PORT")->required();
  app.add_option("--model", f.model, "the model directory the coordinator serves")->required();
  app.add_option("--ranks", f.ranks, "world size N")->check(CLI::Range(1, 256));
  app.add_option("--job", f.job, "the coordinator's job id");
  app.add_option("--streams", f.streams, "download streams per rank")->check(CLI::Range(1, 64));
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status s = zeroshard::Run(f);
  if (!s.ok()) {
    std::cerr << "model_load_client: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
