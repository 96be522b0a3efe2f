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
  CoordinatorStack stack;
  CoordinatorOptions served = options;
  if (!options.checkpoint_dir.empty()) {
    auto host = server::CheckpointHost::Open(options.checkpoint_dir, keep_checkpoints);
    if (!host.ok()) {
      return absl::Status(host.status().code(),
                          absl::StrCat("--checkpoint-dir: ", host.status().message()));
    }
    stack.checkpoints = *std::move(host);
    served.checkpoint_service = stack.checkpoints->service();
  }
  auto server = CoordinatorServer::Start(served);
  if (!server.ok()) return server.status();
  stack.server = *std::move(server);
  if (stack.checkpoints != nullptr) {
    stack.checkpoint_metrics =
        std::make_unique<server::CheckpointMetrics>(stack.server->metrics());
    stack.checkpoint_metrics->Attach(stack.checkpoints->store());
  }
  return stack;
}

}  // namespace zeroshard
