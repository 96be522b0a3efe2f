// One generation's resources and the three blocking steps a worker takes in
// it, each ending in the lifecycle event it produced (lifecycle.h): load the
// best state, train, hand the state over. The runtime (worker_runtime.cc)
// owns a GenerationRun from the moment the generation forms until the
// lifecycle leaves it, so a Leave decided on a failure is sent while this
// rank's communicators still exist.
//
// Thread safety: the training thread only.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"
#include "worker/engine/sharded_engine.h"
#include "worker/rendezvous/coordinator_store.h"
#include "worker/trainer/generation_trainer.h"
#include "worker/trainer/job_context.h"
#include "worker/trainer/lifecycle.h"
#include "worker/trainer/worker_session.h"

namespace zeroshard {

class GenerationRun {
 public:
  // Rendezvous (the coordinator's store under the generation's prefix), the
  // data and control communicators, and the engine over the generation's
  // shard plan. Errors: the plan's, the rendezvous', the engine's.
  static absl::StatusOr<std::unique_ptr<GenerationRun>> Start(
      const WorkerOptions& options, JobContext& job, std::shared_ptr<CoordinatorClient> client,
      WorkerSession& session, checkpoint::CheckpointClient* checkpoints,
      const v1::GenerationInfo& info);
  ~GenerationRun();

  // kStateLoaded (live, a checkpoint, the model's weights or the seeded
  // init: state_handoff.h's LoadBestState) or kFailed.
  LifecycleEvent Load();
  // kLastStepTrained, kYielded or kFailed.
  LifecycleEvent Train();
  // At the yield: kKeptHandoff (first_survivor set on the rank that reports
  // it), kGaveShardAway, or kFailed.
  LifecycleEvent HandOff();

  // The step the ranks yielded at (after kYielded).
  int64_t yield_step() const { return yielded_ ? yielded_->step : -1; }
  // The ranks that gave their shards away at that yield, to leave the job.
  std::vector<int> yield_leaving() const {
    return yielded_ ? yielded_->leaving : std::vector<int>{};
  }

 private:
  GenerationRun(JobContext& job, WorkerSession& session, const v1::GenerationInfo& info,
                std::shared_ptr<CoordinatorClient> client);

  JobContext& job_;
  WorkerSession& session_;
  CoordinatorStore store_;
  std::unique_ptr<Communicator> data_, own_control_;
  Communicator* control_ = nullptr;
  std::unique_ptr<ShardedEngine> engine_;
  GenerationContext ctx_;
  std::vector<UnitSpec> units_;
  GenerationStart start_;
  std::optional<YieldInfo> yielded_;
};

}  // namespace zeroshard
