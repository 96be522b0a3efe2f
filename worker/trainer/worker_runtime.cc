// The thin runtime around the worker's lifecycle machine (lifecycle.h): in
// each state it runs that state's one blocking operation, reads the stop
// token into the event, asks Decide, says what happened, and applies the
// actions in order.
#include "worker/trainer/worker_runtime.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/infra/host_name.h"
#include "common/status_macros.h"
#include "worker/trainer/generation_run.h"
#include "worker/trainer/job_context.h"
#include "worker/trainer/job_join.h"
#include "worker/trainer/lifecycle.h"

namespace zeroshard {
namespace {

using Phase = LifecyclePhase;
using Kind = LifecycleEventKind;
using Action = LifecycleAction;

struct Runtime {
  const WorkerOptions& options;
  JobContext& job;
  std::shared_ptr<CoordinatorClient> client;
  checkpoint::CheckpointClient* checkpoints;
  WorkerSession::Identity identity;
  std::unique_ptr<WorkerSession> session;
  v1::GenerationInfo info;             // The generation this worker is (or was last) in.
  std::unique_ptr<GenerationRun> run;  // From its formation until the lifecycle leaves it.
};

void Say(const std::string& line) { std::cout << line << "\n" << std::flush; }

LifecycleEvent Wait(Runtime& r) {
  absl::StatusOr<v1::GenerationInfo> awaited = r.session->AwaitGeneration(r.options.join_timeout);
  if (absl::IsNotFound(awaited.status())) {
    return {Kind::kMemberForgotten, awaited.status()};
  }
  if (!awaited.ok()) {
    return {Kind::kWaitFailed, awaited.status()};
  }
  r.info = *std::move(awaited);
  return {r.info.job_state() == v1::JOB_STATE_COMPLETED ? Kind::kJobCompleted
                                                        : Kind::kGenerationFormed};
}

LifecycleEvent Rejoin(Runtime& r) {
  r.session.reset();
  absl::StatusOr<std::unique_ptr<WorkerSession>> joined =
      JoinJob(*r.client, r.identity, r.job.model, r.options.held_id_wait, r.options.stop);
  if (joined.ok() && *joined != nullptr) {
    r.session = *std::move(joined);
    return {Kind::kRejoined};
  }
  return {Kind::kNothingToJoin, joined.status()};
}

LifecycleEvent Load(Runtime& r) {
  absl::StatusOr<std::unique_ptr<GenerationRun>> run =
      GenerationRun::Start(r.options, r.job, r.client, *r.session, r.checkpoints, r.info);
  if (!run.ok()) {
    return {Kind::kFailed, run.status()};
  }
  r.run = *std::move(run);
  return r.run->Load();
}

LifecycleEvent AwaitEnd(Runtime& r) {
  return {r.session->AwaitEnd(r.info.generation(), r.options.generation_end_timeout)
              ? Kind::kGenerationEnded
              : Kind::kEndTimedOut};
}

// A heartbeat's NOT_FOUND within a beat or two confirms that a restarted
// coordinator forgot this member.
LifecycleEvent ConfirmForgotten(Runtime& r) {
  const WorkerSession& s = *r.session;
  return {s.AwaitForgotten(2 * s.heartbeat_interval() + absl::Seconds(1))
              ? Kind::kForgottenConfirmed
              : Kind::kForgottenNotConfirmed};
}

// The blocking operation `phase` stands for, as the event it ended in.
LifecycleEvent Observe(Runtime& r, Phase phase) {
  switch (phase) {
    case Phase::kWaiting:
      return Wait(r);
    case Phase::kRejoining:
      return Rejoin(r);
    case Phase::kLoading:
      return Load(r);
    case Phase::kTraining:
      return r.run->Train();
    case Phase::kHandingOff:
      return r.run->HandOff();
    case Phase::kConfirmingForgotten:
      return ConfirmForgotten(r);
    case Phase::kEndingAfterHandoff:
    case Phase::kEndingAfterFailure:
      return AwaitEnd(r);
    case Phase::kDone:
      break;
  }
  return {Kind::kWaitFailed, absl::InternalError("no operation in state done")};
}

void Apply(Runtime& r, Action action, const LifecycleEvent& event) {
  const uint64_t generation = r.info.generation();
  switch (action) {
    case Action::kReportFailure:
      r.session->ReportFailure(generation, -1, std::string(event.status.message()));
      return;
    case Action::kReportHandoff:
      r.session->ReportHandoff(generation, r.run->yield_step(), r.run->yield_leaving());
      return;
    case Action::kLeave:
      r.session->Leave();
      return;
    case Action::kLeaveCompleted:
      r.session->Leave(/*job_completed=*/true);
      return;
    case Action::kTakePeerCopies: {
      // With none (it failed before its first refresh) what was handed
      // over to it is still the newest state: it stays.
      std::vector<HeldState> copies = r.job.replica->Take();
      if (!copies.empty()) r.job.held = std::move(copies);
      return;
    }
    case Action::kDropPeerCopies:
      r.job.replica->Clear();
      return;
    case Action::kStopTraining:
    case Action::kYield:
      return;  // The trainer's own, at a step boundary.
  }
}

}  // namespace

namespace {

bool InGeneration(Phase phase) {
  return phase == Phase::kLoading || phase == Phase::kTraining || phase == Phase::kHandingOff;
}

// What the worker says on a transition (nothing where nothing changed).
void Narrate(const Runtime& r, const LifecycleState& from, const LifecycleEvent& e) {
  const std::string g = absl::StrCat("generation ", r.info.generation());
  if (from.phase == Phase::kWaiting && e.stop) {
    Say("stop requested while waiting for a generation: leaving the job");
    return;
  }
  switch (e.kind) {
    case Kind::kMemberForgotten:
      Say(absl::StrCat("rejoining: ", e.status.message()));
      return;
    case Kind::kJobCompleted:
      Say(absl::StrCat("job ", r.identity.job_id, " completed (", r.info.job_state_reason(),
                       "); leaving"));
      return;
    case Kind::kGenerationFormed:
      Say(absl::StrCat(g, ": rank ", r.info.rank(), " of ", r.info.world_size()));
      return;
    case Kind::kLastStepTrained:
      Say(r.session->JobStopped() ? std::string("job stopped by request; leaving")
                                  : absl::StrCat("job done: ", r.job.job.steps, " steps; leaving"));
      return;
    case Kind::kGaveShardAway:
      Say(absl::StrCat("left the job on a stop signal (", g, "), its shard handed to the others"));
      return;
    case Kind::kFailed:
      if (e.stop)
        Say(absl::StrCat(g, " ended (", e.status.message(),
                         ") after a stop request: leaving the job"));
      return;
    case Kind::kForgottenConfirmed:
      Say(absl::StrCat(g, " ended: the coordinator no longer knows this member (",
                       from.failure.message(), ")"));
      return;
    case Kind::kGenerationEnded:
      Say(from.phase == Phase::kEndingAfterHandoff
              ? absl::StrCat(g, " handed off; waiting for the next")
              : absl::StrCat(g, " ended (", from.failure.message(), "); waiting for the next"));
      return;
    default:
      return;
  }
}

// WorkerOptions::crash: what a killed process leaves behind, and nothing
// more. A killed process decides nothing, so this is no lifecycle event:
// the communicators close with the generation's resources, the heartbeats
// stop with the session, and no RPC is sent.
absl::Status Vanish(Runtime& r) {
  r.run.reset();
  r.session.reset();
  Say("vanished (fault injection)");
  return absl::AbortedError("vanished (fault injection: WorkerOptions::crash)");
}

// Generation after generation until the job is done, this worker leaves, or
// an error that is not a lost generation. The coordinator keeps the restart
// budget (the job's max_failures): a worker goes on while the job does, and
// AwaitGeneration says when it has failed.
absl::Status RunLifecycle(Runtime& r) {
  LifecycleState state;
  while (true) {
    LifecycleEvent event = Observe(r, state.phase);
    if (r.options.crash.stop_requested()) return Vanish(r);
    event.stop = r.options.stop.stop_requested();
    const LifecycleDecision d = Decide(state, event);
    Narrate(r, state, event);
    const bool leaves_generation = !InGeneration(d.next.phase);
    if (leaves_generation && !d.before_teardown) r.run.reset();
    for (Action action : d.actions) Apply(r, action, event);
    if (leaves_generation) r.run.reset();
    if (d.exit) return *d.exit;
    state = d.next;
  }
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  Say(absl::StrCat("connecting to the coordinator at ", options.coordinator));
  CoordinatorClient::Options client_options;
  client_options.security = options.security;
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<CoordinatorClient> client,
                      CoordinatorClient::Connect(options.coordinator, client_options));
  absl::StatusOr<v1::JobStatus> probed =
      WorkerSession::ProbeJob(*client, absl::Seconds(30), options.stop);
  if (options.stop.stop_requested()) {
    Say("stop requested before joining: exiting");
    return absl::OkStatus();
  }
  if (!probed.ok()) {
    return absl::Status(probed.status().code(),
                        absl::StrCat("no reachable coordinator at ", options.coordinator, ": ",
                                     probed.status().message()));
  }
  const v1::JobStatus& status = *probed;
  // A finished job has nothing for a new worker: say so before loading data.
  if (JobEnded(status)) return EndedJobOutcome(status);
  ZS_ASSIGN_OR_RETURN(JobContext job, LoadJob(*client, options, status.job_id()));
  std::unique_ptr<checkpoint::CheckpointClient> checkpoints;
  if (!job.job.checkpoint_dir.empty()) {
    // The coordinator client's channel: uploads carry this worker's member credential.
    checkpoint::CheckpointClientOptions checkpoint_options;
    if (client->options().identity != nullptr) {
      checkpoint_options.token = client->options().identity->token();  // For local reads.
    }
    checkpoints =
        std::make_unique<checkpoint::CheckpointClient>(client->channel(), checkpoint_options);
  }
  Runtime r{
      options, job, client, checkpoints.get(), {status.job_id(), options.worker_id, options.host},
      nullptr, {},  nullptr};
  if (r.identity.worker_id.empty()) r.identity.worker_id = absl::StrCat(HostName(), ":", getpid());
  ZS_ASSIGN_OR_RETURN(r.session,
                      JoinJob(*client, r.identity, job.model, options.held_id_wait, options.stop));
  if (r.session == nullptr) return absl::OkStatus();
  return RunLifecycle(r);
}

}  // namespace zeroshard
