#include "server/rpc/coordinator_stack.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/formats/hf_weights.h"
#include "common/infra/listen_check.h"
#include "common/model/job_config.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

// The weights of a job whose model is a directory with init pretrained,
// checked against its units; null for any other job. They are served by
// the checkpoint service, which therefore must exist.
absl::StatusOr<std::shared_ptr<const HfWeights>> OpenModelWeights(const CoordinatorOptions& o) {
  if (o.core.job_config_json.empty()) return nullptr;
  ZS_ASSIGN_OR_RETURN(const JobConfig job, JobConfig::FromJson(o.core.job_config_json));
  if (!job.loads_model_weights()) return nullptr;
  if (o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config: model ", job.model,
                     " with init pretrained is served through the "
                     "checkpoint service: give a checkpoint directory"));
  }
  ZS_ASSIGN_OR_RETURN(const ModelConfig model, ModelConfigFromJson(job.model_desc));
  absl::StatusOr<HfWeights> weights = HfWeights::OpenFor(job.model, ModelUnits(model));
  if (!weights.ok()) {
    return absl::Status(weights.status().code(),
                        absl::StrCat("model ", job.model, ": ", weights.status().message()));
  }
  return std::make_shared<const HfWeights>(*std::move(weights));
}

// One line for a busy or bad address (before gRPC or civetweb try it) or
// a bad stream limit.
absl::Status CheckStackOptions(const CoordinatorOptions& options) {
  ZS_RETURN_IF_ERROR(CheckCanListen("--listen", options.listen));
  ZS_RETURN_IF_ERROR(CheckCanListen("--metrics-listen", options.metrics_listen));
  if (options.max_streams_per_caller < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-streams-per-caller ", options.max_streams_per_caller, " is < 1"));
  }
  if (options.max_streams < options.max_streams_per_caller) {
    return absl::InvalidArgumentError(absl::StrCat("--max-streams ", options.max_streams,
                                                   " is below --max-streams-per-caller ",
                                                   options.max_streams_per_caller));
  }
  return absl::OkStatus();
}

// The local-read socket over the stack's store, its requests checked as
// DownloadRange's are. A failure only costs speed: ranks then read through
// DownloadRange, so it is a warning.
void StartLocalReads(CoordinatorStack& stack) {
  const server::AuthGate* gate = stack.server->gate();
  // The worker role, not DownloadRange's reader: a descriptor is more than
  // a stream of bytes (local_read_server.h, "Who may connect").
  auto authorize = [gate](absl::string_view token) {
    return gate == nullptr ? absl::PermissionDeniedError("local reads: no auth gate")
                           : gate->AuthorizeToken("local reads", server::Role::kWorker, token);
  };
  absl::StatusOr<std::unique_ptr<server::LocalReadServer>> local =
      server::LocalReadServer::Start(stack.checkpoints->store(), std::move(authorize));
  if (!local.ok()) {
    std::fprintf(stderr, "warning: no local checkpoint reads: %s\n",
                 std::string(local.status().message()).c_str());
    return;
  }
  stack.local_reads = *std::move(local);
  stack.checkpoints->service()->SetLocalReadSocket(stack.local_reads->socket_path());
}

}  // namespace

absl::StatusOr<CoordinatorStack> StartCoordinatorStack(const CoordinatorOptions& options,
                                                       int keep_checkpoints) {
  ZS_RETURN_IF_ERROR(CheckStackOptions(options));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<const HfWeights> weights, OpenModelWeights(options));
  CoordinatorStack stack;
  stack.streams =
      std::make_unique<StreamLimits>(options.max_streams_per_caller, options.max_streams);
  CoordinatorOptions served = options;
  served.stream_limits = stack.streams.get();
  if (!options.checkpoint_dir.empty()) {
    auto host =
        server::CheckpointHost::Open(options.checkpoint_dir, keep_checkpoints, stack.streams.get());
    if (!host.ok()) {
      return absl::Status(host.status().code(),
                          absl::StrCat("--checkpoint-dir: ", host.status().message()));
    }
    stack.checkpoints = *std::move(host);
    // Until the server (and its core) exists, Begin and job-scoped reads
    // are refused: no request is ever checked against nothing.
    stack.checkpoints->store()->SetJobSource([]() -> absl::StatusOr<server::CheckpointJob> {
      return absl::UnavailableError("the coordinator is starting");
    });
    served.checkpoint_service = stack.checkpoints->service();
    stack.checkpoints->store()->SetModelWeights(std::move(weights));
  }
  auto server = CoordinatorServer::Start(served);
  if (!server.ok()) return server.status();
  stack.server = *std::move(server);
  if (stack.checkpoints != nullptr) {
    server::CoordinatorCore* core = stack.server->core();
    stack.checkpoints->store()->SetJobSource([core]() -> absl::StatusOr<server::CheckpointJob> {
      server::CoordinatorCore::JobSizes sizes = core->job_sizes();
      server::CheckpointJob job;
      job.job_id = core->job_id();
      job.units = std::move(sizes.units);
      job.alignment = sizes.alignment;
      job.max_world_size = sizes.max_workers;
      job.steps = sizes.steps;
      job.generation = sizes.generation;
      job.world_size = sizes.world_size;
      return job;
    });
  }
  if (stack.checkpoints != nullptr && options.local_reads) StartLocalReads(stack);
  if (stack.checkpoints != nullptr) {
    stack.checkpoint_metrics = std::make_unique<server::CheckpointMetrics>(stack.server->metrics());
    stack.checkpoint_metrics->Attach(stack.checkpoints->store());
  }
  return stack;
}

}  // namespace zeroshard
