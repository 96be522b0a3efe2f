#include "worker/trainer/worker_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/host_name.h"
#include "common/job_model.h"
#include "common/job_refusal.h"
#include "common/offload_config.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "common/tokenizer/job_tokenizer.h"
#include "worker/comm/communicator_factory.h"
#include "worker/device/device_factory.h"
#include "worker/model/gpt_model.h"
#include "worker/model/kernels.h"
#include "worker/model/model_init.h"
#include "worker/model/model_kernels.h"
#include "worker/model/model_plan.h"
#include "worker/optim/job_adamw.h"
#include "worker/rendezvous/coordinator_store.h"
#include "worker/trainer/checkpointing.h"
#include "worker/trainer/coordinator_refusal.h"
#include "worker/trainer/cpu_reserve.h"
#include "worker/trainer/engine_setup.h"
#include "worker/trainer/generation_trainer.h"
#include "worker/trainer/job_join.h"
#include "worker/trainer/state_handoff.h"
#include "worker/trainer/stop_signal.h"

namespace zeroshard {
namespace {

struct JobContext {
  JobConfig job;
  ModelConfig model;
  std::unique_ptr<TextCorpus> corpus;
  std::unique_ptr<Device> device;                // This worker's, for every generation.
  ModelKernels kernels;                          // The model's, on `device`.
  BackendChoice backend = BackendChoice::kGloo;  // job.backend resolved for the device.
  std::vector<HeldState> held;                   // Handed over by the last generation.
  // --redundancy 1's copies (a pointer: JobContext moves, the copies' byte
  // counters do not).
  std::unique_ptr<PeerReplica> replica = std::make_unique<PeerReplica>();
};

enum class GenerationEnd { kJobDone, kHandedOff, kLeft };

// "auto": NCCL on a CUDA device, Gloo on the CPU. Gloo over device memory
// is the host-staged backend.
BackendChoice ResolveBackend(BackendChoice backend, DeviceKind device) {
  const bool cuda = device == DeviceKind::kCuda;
  if (backend == BackendChoice::kAuto) return cuda ? BackendChoice::kNccl : BackendChoice::kGloo;
  if (backend == BackendChoice::kGloo && cuda) return BackendChoice::kHostStaged;
  return backend;
}

// The worker's --offload-* flags override the job's; an nvme dir is checked
// for room before any training (one rank's files).
absl::Status ApplyOffload(const WorkerOptions& options, JobConfig& job, const ModelConfig& model) {
  if (!options.offload_optimizer.empty()) {
    ZS_ASSIGN_OR_RETURN(job.offload_optimizer, ParseOptimizerOffload(options.offload_optimizer));
  }
  if (!options.offload_params.empty()) {
    const std::optional<ParamsOffload> params =
        FromWord(kParamsOffloadWords, options.offload_params);
    if (!params) {
      return absl::InvalidArgumentError(absl::StrCat("--offload-params ", options.offload_params,
                                                     " is not ", WordList(kParamsOffloadWords)));
    }
    job.offload_params = *params;
  }
  if (!options.offload_dir.empty()) job.offload_dir = options.offload_dir;
  if (options.offload_prefetch >= 0) job.offload_prefetch = options.offload_prefetch;
  ZS_RETURN_IF_ERROR(job.Validate());
  const bool opt = job.offload_optimizer == OptimizerOffload::kNvme,
             params = job.offload_params == ParamsOffload::kNvme;
  if (!opt && !params) return absl::OkStatus();
  const int64_t psi = ModelParamCount(model);
  return AsJobRefusal(CheckOffloadDir(
      job.offload_dir, OffloadBytesNeeded(psi, job.stage, 1, opt, params,
                                          static_cast<int>(DTypeSize(job.compute_dtype)),
                                          static_cast<int>(ModelUnits(model).size()))));
}

absl::StatusOr<JobContext> LoadJob(CoordinatorClient& client, const WorkerOptions& options,
                                   const std::string& job_id) {
  v1::GetGenerationRequest request;
  request.set_job_id(job_id);
  ZS_ASSIGN_OR_RETURN(const v1::GenerationInfo info, client.GetGeneration(request));
  JobContext ctx;
  ZS_ASSIGN_OR_RETURN(ctx.job, JobConfig::FromJson(info.job_config_json()));
  ZS_ASSIGN_OR_RETURN(ctx.model, JobModel(ctx.job.model, ctx.job.model_desc, ctx.job.seq_len));
  ZS_RETURN_IF_ERROR(ApplyOffload(options, ctx.job, ctx.model));
  // The same default as `zeroshard launch`: Python's stdlib sources.
  if (ctx.job.data.empty()) ctx.job.data = DefaultDataPaths();
  ZS_ASSIGN_OR_RETURN(const std::unique_ptr<tokenizer::Tokenizer> tok,
                      tokenizer::LoadJobTokenizer(ctx.job));
  ZS_ASSIGN_OR_RETURN(TextCorpus corpus,
                      TextCorpus::Load(ctx.job.data, {.vocab_size = ctx.model.vocab,
                                                      .tokenizer = tok.get(),
                                                      .threads = std::max(1, ctx.job.threads),
                                                      .context = ctx.model.n_ctx}));
  ctx.corpus = std::make_unique<TextCorpus>(std::move(corpus));
  ZS_ASSIGN_OR_RETURN(ctx.device, CreateDevice({std::string(WordOf(kDeviceWords, ctx.job.device)),
                                                -1, ctx.job.threads}));
  // Before the warm-up: its sgemm starts the OpenMP threads the job's matmuls
  // use, so their stacks are in the footprint before the engine's fit check.
  SetComputeThreads(options.threads > 0 ? options.threads : ctx.job.threads);
  if (ctx.device->kind() == DeviceKind::kCpu) ZS_RETURN_IF_ERROR(PrepareCpuCompute(*ctx.device));
  ZS_ASSIGN_OR_RETURN(ctx.kernels,
                      CreateModelKernels(*ctx.device, ctx.model, ctx.job.compute_dtype));
  ctx.backend = ResolveBackend(ctx.job.backend, ctx.device->kind());
  std::cout << "device " << ctx.device->name() << ", backend " << WordOf(kBackendWords, ctx.backend)
            << "\n"
            << std::flush;
  return ctx;
}

// Errors a peer's departure or the generation's end cause in this worker
// (abseil's retry guidance: UNAVAILABLE and DEADLINE_EXCEEDED retry the call,
// ABORTED retries higher up: here, the next generation; the coordinator
// answers ABORTED for a stale generation). Anything else, such as a
// checkpoint that does not match the model (FAILED_PRECONDITION) or a bad
// config, is this worker's own error and stops it at once.
bool IsGenerationLoss(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsCancelled(s);
}

// A credential the coordinator refused (a checkpoint RPC, marked by
// MarkCoordinatorRefusal) after it restarted and forgot every member: the
// heartbeat's NOT_FOUND confirms it within a beat or two. Any other error
// stays this worker's own.
bool IsForgottenMember(const WorkerSession& session, const absl::Status& s) {
  if (!IsCoordinatorRefusal(s)) return false;
  return session.AwaitForgotten(2 * session.heartbeat_interval() + absl::Seconds(1));
}

// The generation's communicators: the data plane on the job's backend, and
// the control one (host memory, Gloo) for control values, which is the data
// one itself when that works on host memory (Gloo or shm on the CPU).
struct GenerationComms {
  std::unique_ptr<Communicator> data, own_control;
  Communicator* control = nullptr;
};

absl::StatusOr<GenerationComms> ConnectGeneration(const WorkerOptions& options, JobContext& job,
                                                  Store& store, const v1::GenerationInfo& info) {
  CommunicatorOptions o;
  o.hostname = options.host;
  o.timeout = job.job.collective_timeout();
  o.device = job.device.get();
  GenerationComms comms;
  ZS_ASSIGN_OR_RETURN(comms.data,
                      CreateCommunicator(std::string(WordOf(kBackendWords, job.backend)), store,
                                         "comm/", info.rank(), info.world_size(), o));
  comms.control = comms.data.get();
  if (job.backend != BackendChoice::kGloo && job.backend != BackendChoice::kShm) {
    ZS_ASSIGN_OR_RETURN(comms.own_control, CreateCommunicator("gloo", store, "control/",
                                                              info.rank(), info.world_size(), o));
    comms.control = comms.own_control.get();
  }
  return comms;
}

// One generation: rendezvous, engine, the best state (live or a
// checkpoint), training, and the handoff when the ranks yield.
absl::StatusOr<GenerationEnd> RunGeneration(const WorkerOptions& options, JobContext& job,
                                            std::shared_ptr<CoordinatorClient> client,
                                            WorkerSession& session,
                                            checkpoint::CheckpointClient* checkpoints,
                                            const v1::GenerationInfo& info) {
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, ShardPlanFromProto(info.plan()));
  CoordinatorStore store(std::move(client), session.job_id(), info.generation());
  ZS_ASSIGN_OR_RETURN(GenerationComms comms, ConnectGeneration(options, job, store, info));
  Communicator* data = comms.data.get();
  Communicator* control = comms.control;
  session.WatchForEnd(info.generation(), [data, control] {
    data->Abort();
    control->Abort();
  });
  // Before the communicators go, so the heartbeat never aborts a destroyed one.
  absl::Cleanup stop_watching = [&session] { session.StopWatching(); };
  ZS_ASSIGN_OR_RETURN(
      std::unique_ptr<ShardedEngine> engine,
      ShardedEngine::Create(
          plan, data, MakeEngineOptions(job.job, job.model, job.device.get(), job.kernels, control),
          InitialUnits(job.job, job.model)));
  GenerationContext ctx{&job.job,
                        &job.model,
                        job.corpus.get(),
                        &session,
                        checkpoints,
                        info.generation(),
                        info.rank(),
                        info.world_size(),
                        &StopRequested,
                        job.job.redundancy > 0 ? job.replica.get() : nullptr,
                        job.kernels.kernels,
                        job.device.get()};
  const std::vector<UnitSpec> units = ModelUnits(job.model);
  ZS_ASSIGN_OR_RETURN(const GenerationStart start,
                      LoadBestState(ctx, job.held, units, *engine, *control));
  // The model computes on the engine's device (job.kernels), straight on the
  // engine's buffers.
  GenerationTrainer trainer(ctx, control, engine.get(), engine.get());
  absl::Status trained = trainer.Run(start);
  if (!trained.ok() && StopRequested()) {
    // Stopped while the generation broke: leave while this rank's
    // communicators still exist, so the generation ends as a leave.
    session.Leave();
    return GenerationEnd::kLeft;
  }
  ZS_RETURN_IF_ERROR(trained);
  if (!trainer.yielded()) return GenerationEnd::kJobDone;
  job.replica->Clear();  // The handoff is newer than any copy.
  ZS_ASSIGN_OR_RETURN(const YieldOutcome outcome,
                      HandOffAtYield(ctx, *trainer.yielded(), units, *engine, *control, job.held));
  return outcome == YieldOutcome::kLeft ? GenerationEnd::kLeft : GenerationEnd::kHandedOff;
}

struct WorkerState {
  const WorkerOptions& options;
  JobContext& job;
  std::shared_ptr<CoordinatorClient> client;
  checkpoint::CheckpointClient* checkpoints;
  WorkerSession::Identity identity;
  std::unique_ptr<WorkerSession> session;
};

// After a generation that ended cleanly: the worker's final status (the job
// is done, or this worker left), or nothing to go on to the next one.
std::optional<absl::Status> AfterCleanEnd(WorkerState& w, const v1::GenerationInfo& info,
                                          GenerationEnd end) {
  if (end == GenerationEnd::kJobDone) {
    if (w.session->JobStopped()) {
      std::cout << "job stopped by request; leaving\n" << std::flush;
    } else {
      std::cout << "job done: " << w.job.job.steps << " steps; leaving\n" << std::flush;
    }
    w.session->Leave(/*job_completed=*/true);
    return absl::OkStatus();
  }
  if (end == GenerationEnd::kLeft) {
    std::cout << "left the job on a stop signal (generation " << info.generation()
              << "), its shard handed to the others\n"
              << std::flush;
    return absl::OkStatus();
  }
  // Handed off for a membership change.
  if (!w.session->AwaitEnd(info.generation(), w.options.generation_end_timeout)) {
    return absl::DeadlineExceededError("the generation did not end after the handoff");
  }
  std::cout << "generation " << info.generation() << " handed off; waiting for the next\n"
            << std::flush;
  return std::nullopt;
}

// After a generation that failed with `s`: the worker's final status (it
// was stopped, or the error is its own), or nothing to go on to the next.
std::optional<absl::Status> AfterFailedEnd(WorkerState& w, const v1::GenerationInfo& info,
                                           const absl::Status& s) {
  // The peer copies of the last refreshed step (with what the generation
  // started from, until its first refresh passed). With none (it failed
  // while loading its state, before any step) what was handed over to it
  // is still the newest state: it stays.
  std::vector<HeldState> copies = w.job.replica->Take();
  if (!copies.empty()) w.job.held = std::move(copies);
  // A peer that vanished or a generation that ended shows up as a failed
  // collective: report it (the coordinator then forms the next generation
  // at once) and go on in the next one. Anything else is this worker's own
  // error and ends it.
  w.session->ReportFailure(info.generation(), -1, std::string(s.message()));
  if (StopRequested()) {
    // Stopped while the generation broke (or its handoff failed): leave.
    std::cout << "generation " << info.generation() << " ended (" << s.message()
              << ") after a stop request: leaving the job\n"
              << std::flush;
    w.session->Leave();
    return absl::OkStatus();
  }
  if (IsForgottenMember(*w.session, s)) {
    std::cout << "generation " << info.generation()
              << " ended: the coordinator no longer knows this member (" << s.message() << ")\n"
              << std::flush;
    return std::nullopt;  // AwaitGeneration says NOT_FOUND: Join again.
  }
  if (!IsGenerationLoss(s) ||
      !w.session->AwaitEnd(info.generation(), w.options.generation_end_timeout)) {
    return s;
  }
  std::cout << "generation " << info.generation() << " ended (" << s.message()
            << "); waiting for the next\n"
            << std::flush;
  return std::nullopt;
}

// Generation after generation until the job is done, this worker leaves, or
// an error that is not a lost generation. The coordinator keeps the restart
// budget (the job's max_failures): a worker goes on while the job does, and
// AwaitGeneration says when it has failed.
absl::Status RunGenerations(WorkerState& w) {
  while (true) {
    auto awaited = w.session->AwaitGeneration(w.options.join_timeout);
    if (absl::IsNotFound(awaited.status()) && !StopRequested()) {
      // The coordinator dropped this member (lease expired, or it restarted
      // and forgot members): join again as a new member.
      std::cout << "rejoining: " << awaited.status().message() << "\n" << std::flush;
      w.session.reset();
      ZS_ASSIGN_OR_RETURN(w.session,
                          JoinJob(*w.client, w.identity, w.job.model, w.options.held_id_wait));
      if (w.session == nullptr) return absl::OkStatus();
      continue;
    }
    if (StopRequested()) {
      std::cout << "stop requested while waiting for a generation: leaving the job\n" << std::flush;
      w.session->Leave();
      return absl::OkStatus();
    }
    ZS_RETURN_IF_ERROR(awaited.status());
    const v1::GenerationInfo& info = *awaited;
    if (info.job_state() == v1::JOB_STATE_COMPLETED) {
      std::cout << "job " << w.identity.job_id << " completed (" << info.job_state_reason()
                << "); leaving\n"
                << std::flush;
      w.session->Leave();
      return absl::OkStatus();
    }
    std::cout << "generation " << info.generation() << ": rank " << info.rank() << " of "
              << info.world_size() << "\n"
              << std::flush;
    absl::StatusOr<GenerationEnd> end =
        RunGeneration(w.options, w.job, w.client, *w.session, w.checkpoints, info);
    if (end.ok()) {
      std::optional<absl::Status> finished = AfterCleanEnd(w, info, *end);
      if (finished.has_value()) return *finished;
      continue;
    }
    if (std::optional<absl::Status> finished = AfterFailedEnd(w, info, end.status())) {
      return *finished;
    }
  }
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  std::cout << "connecting to the coordinator at " << options.coordinator << "\n" << std::flush;
  CoordinatorClient::Options client_options;
  client_options.security = options.security;
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<CoordinatorClient> client,
                      CoordinatorClient::Connect(options.coordinator, client_options));
  absl::StatusOr<v1::JobStatus> probed = WorkerSession::ProbeJob(*client, absl::Seconds(30));
  if (StopRequested()) {
    std::cout << "stop requested before joining: exiting\n" << std::flush;
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
    checkpoints = std::make_unique<checkpoint::CheckpointClient>(client->channel());
  }
  WorkerState w{
      options, job, client, checkpoints.get(), {status.job_id(), options.worker_id, options.host},
      nullptr};
  if (w.identity.worker_id.empty()) {
    w.identity.worker_id = absl::StrCat(HostName(), ":", getpid());
  }
  ZS_ASSIGN_OR_RETURN(w.session, JoinJob(*client, w.identity, job.model, options.held_id_wait));
  if (w.session == nullptr) return absl::OkStatus();
  return RunGenerations(w);
}

}  // namespace zeroshard
