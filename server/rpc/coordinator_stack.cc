#include "server/rpc/coordinator_stack.h"

#include "absl/strings/str_cat.h"
#include "common/listen_check.h"

namespace zeroshard {

absl::StatusOr<CoordinatorStack> StartCoordinatorStack(const CoordinatorOptions& options,
                                                       int keep_checkpoints) {
  // One line for a busy or bad address, before gRPC or civetweb try it.
  if (absl::Status s = CheckCanListen("--listen", options.listen); !s.ok()) return s;
  if (absl::Status s = CheckCanListen("--metrics-listen", options.metrics_listen); !s.ok()) {
    return s;
  }
  if (options.max_streams_per_caller < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-streams-per-caller ",
                                                   options.max_streams_per_caller, " is < 1"));
  }
  CoordinatorStack stack;
  stack.streams = std::make_unique<StreamLimits>(options.max_streams_per_caller);
  CoordinatorOptions served = options;
  served.stream_limits = stack.streams.get();
  if (!options.checkpoint_dir.empty()) {
    auto host = server::CheckpointHost::Open(options.checkpoint_dir, keep_checkpoints,
                                             stack.streams.get());
    if (!host.ok()) {
      return absl::Status(host.status().code(),
                          absl::StrCat("--checkpoint-dir: ", host.status().message()));
    }
    stack.checkpoints = *std::move(host);
    // Until the server (and its core) exists, Begin and job-scoped reads
    // are refused: no request is ever checked against nothing.
    stack.checkpoints->store()->SetJobSource(
        []() -> absl::StatusOr<server::CheckpointJob> {
          return absl::UnavailableError("the coordinator is starting");
        });
    served.checkpoint_service = stack.checkpoints->service();
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
  if (stack.checkpoints != nullptr) {
    stack.checkpoint_metrics =
        std::make_unique<server::CheckpointMetrics>(stack.server->metrics());
    stack.checkpoint_metrics->Attach(stack.checkpoints->store());
  }
  return stack;
}

}  // namespace zeroshard
