#include "worker/trainer/generation_run.h"

#include <utility>

#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "worker/comm/communicator_factory.h"
#include "worker/model/model_init.h"
#include "worker/model/model_plan.h"
#include "worker/trainer/engine_setup.h"
#include "worker/trainer/state_handoff.h"

namespace zeroshard {

using Kind = LifecycleEventKind;

GenerationRun::GenerationRun(JobContext& job, WorkerSession& session,
                             const v1::GenerationInfo& info,
                             std::shared_ptr<CoordinatorClient> client)
    : job_(job),
      session_(session),
      store_(std::move(client), session.job_id(), info.generation()),
      units_(ModelUnits(job.model)) {}

GenerationRun::~GenerationRun() {
  // The engine first: while it waits for its collectives, the heartbeat may
  // still abort the communicators when the generation ends, which cuts the
  // wait short. Then the watch stops, before the communicators go, so the
  // heartbeat never aborts a destroyed one.
  engine_.reset();
  session_.StopWatching();
}

// The data plane on the job's backend, and the control one (host memory,
// Gloo) for control values, which is the data one itself when that works
// on host memory (Gloo or shm on the CPU).
absl::StatusOr<std::unique_ptr<GenerationRun>> GenerationRun::Start(
    const WorkerOptions& options, JobContext& job, std::shared_ptr<CoordinatorClient> client,
    WorkerSession& session, checkpoint::CheckpointClient* checkpoints,
    const v1::GenerationInfo& info) {
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, ShardPlanFromProto(info.plan()));
  std::unique_ptr<GenerationRun> run(new GenerationRun(job, session, info, std::move(client)));
  CommunicatorOptions o;
  o.hostname = options.host;
  o.timeout = job.job.collective_timeout();
  o.device = job.device.get();
  ZS_ASSIGN_OR_RETURN(
      run->data_, CreateCommunicator(std::string(WordOf(kBackendWords, job.backend)), run->store_,
                                     "comm/", info.rank(), info.world_size(), o));
  run->control_ = run->data_.get();
  if (job.backend != BackendChoice::kGloo && job.backend != BackendChoice::kShm) {
    ZS_ASSIGN_OR_RETURN(run->own_control_, CreateCommunicator("gloo", run->store_, "control/",
                                                              info.rank(), info.world_size(), o));
    run->control_ = run->own_control_.get();
  }
  session.WatchForEnd(info.generation(), [data = run->data_.get(), control = run->control_] {
    data->Abort();
    control->Abort();
  });
  ZS_ASSIGN_OR_RETURN(run->engine_,
                      ShardedEngine::Create(plan, run->data_.get(),
                                            MakeEngineOptions(job.job, job.model, job.device.get(),
                                                              job.kernels, run->control_),
                                            InitialUnits(job.job, job.model)));
  run->ctx_ = GenerationContext{&job.job,
                                &job.model,
                                job.corpus.get(),
                                &session,
                                checkpoints,
                                info.generation(),
                                info.rank(),
                                info.world_size(),
                                options.stop,
                                options.crash,
                                job.job.redundancy > 0 ? job.replica.get() : nullptr,
                                job.kernels.kernels,
                                job.device.get()};
  return run;
}

LifecycleEvent GenerationRun::Load() {
  absl::StatusOr<GenerationStart> start =
      LoadBestState(ctx_, job_.held, units_, *engine_, *control_);
  if (!start.ok()) return {Kind::kFailed, start.status()};
  start_ = *std::move(start);
  return {Kind::kStateLoaded};
}

LifecycleEvent GenerationRun::Train() {
  // The model computes on the engine's device (job.kernels), straight on
  // the engine's buffers.
  GenerationTrainer trainer(ctx_, control_, engine_.get(), engine_.get());
  const absl::Status trained = trainer.Run(start_);
  if (!trained.ok()) return {Kind::kFailed, trained};
  yielded_ = trainer.yielded();
  return {yielded_ ? Kind::kYielded : Kind::kLastStepTrained};
}

LifecycleEvent GenerationRun::HandOff() {
  absl::StatusOr<YieldOutcome> outcome =
      HandOffAtYield(ctx_, *yielded_, units_, *engine_, *control_, job_.held);
  if (!outcome.ok()) return {Kind::kFailed, outcome.status()};
  if (*outcome == YieldOutcome::kGaveAway) return {Kind::kGaveShardAway};
  LifecycleEvent e{Kind::kKeptHandoff};
  e.first_survivor = *outcome == YieldOutcome::kKeptFirstSurvivor;
  return e;
}

}  // namespace zeroshard
