#include "worker/trainer/worker_runtime.h"

#include <unistd.h>

#include <iostream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "worker/comm/communicator_factory.h"
#include "worker/device/device_factory.h"
#include "worker/engine/host_hooks.h"
#include "worker/model/kernels.h"
#include "worker/rendezvous/coordinator_store.h"
#include "worker/trainer/checkpointing.h"
#include "worker/trainer/generation_trainer.h"
#include "worker/trainer/state_handoff.h"

namespace zeroshard {
namespace {

struct JobContext {
  JobConfig job;
  ModelConfig model;
  std::unique_ptr<TextCorpus> corpus;
  std::vector<std::vector<float>> initial_units;
  std::unique_ptr<Device> device;  // This worker's, for every generation.
  std::string backend;             // job.backend resolved for the device.
  std::optional<HeldState> held;   // Handed over by the last generation.
};

enum class GenerationEnd { kJobDone, kHandedOff, kLeft };

// "auto": NCCL on a CUDA device, Gloo on the CPU. Gloo over device memory
// is the host-staged backend.
std::string ResolveBackend(const std::string& backend, DeviceKind device) {
  const bool cuda = device == DeviceKind::kCuda;
  if (backend == "auto") return cuda ? "nccl" : "gloo";
  if (backend == "gloo" && cuda) return "host-staged";
  return backend;
}

absl::StatusOr<JobContext> LoadJob(CoordinatorClient& client, const std::string& job_id) {
  v1::GetGenerationRequest request;
  request.set_job_id(job_id);
  ZS_ASSIGN_OR_RETURN(const v1::GenerationInfo info, client.GetGeneration(request));
  JobContext ctx;
  ZS_ASSIGN_OR_RETURN(ctx.job, JobConfig::FromJson(info.job_config_json()));
  ZS_ASSIGN_OR_RETURN(ctx.model, ModelPreset(ctx.job.model));
  // The same default as `zeroshard launch`: Python's stdlib sources.
  if (ctx.job.data.empty()) ctx.job.data = DefaultDataPaths();
  ZS_ASSIGN_OR_RETURN(TextCorpus corpus, TextCorpus::Load(ctx.job.data));
  ctx.corpus = std::make_unique<TextCorpus>(std::move(corpus));
  ctx.initial_units = InitUnits(ctx.model, ctx.job.seed);
  ZS_ASSIGN_OR_RETURN(ctx.device, CreateDevice({ctx.job.device, -1, ctx.job.threads}));
  ctx.backend = ResolveBackend(ctx.job.backend, ctx.device->kind());
  std::cout << "device " << ctx.device->name() << ", backend " << ctx.backend << "\n"
            << std::flush;
  return ctx;
}

EngineOptions MakeEngineOptions(const JobConfig& job, Device* device, Communicator* control) {
  EngineOptions o;
  o.stage = job.stage;
  o.compute_dtype = job.compute_dtype;
  o.reduce_dtype = job.reduce_dtype;
  o.adamw.lr = static_cast<float>(job.lr);
  o.adamw.beta1 = static_cast<float>(job.beta1);
  o.adamw.beta2 = static_cast<float>(job.beta2);
  o.adamw.eps = static_cast<float>(job.eps);
  o.adamw.weight_decay = static_cast<float>(job.weight_decay);
  o.max_grad_norm = static_cast<float>(job.max_grad_norm);
  o.optimizer_threads = job.threads;
  o.collective_timeout = job.collective_timeout();
  o.device = device;
  o.control_comm = control;
  return o;
}

constexpr int kMaxGenerationRestarts = 20;

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

// The generation's communicators: the data plane on the job's backend, and
// the control one (host memory, Gloo) for control values, which is the data
// one itself when that is Gloo on the CPU.
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
  ZS_ASSIGN_OR_RETURN(comms.data, CreateCommunicator(job.backend, store, "comm/", info.rank(),
                                                     info.world_size(), o));
  comms.control = comms.data.get();
  if (job.backend != "gloo") {
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
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<ShardedEngine> engine,
                      ShardedEngine::Create(plan, data,
                                            MakeEngineOptions(job.job, job.device.get(), control),
                                            job.initial_units));
  GenerationContext ctx{&job.job, &job.model, job.corpus.get(), &session, checkpoints,
                        info.generation(), info.rank(), info.world_size(), options.leave_requested};
  const std::vector<UnitSpec> units = ModelUnits(job.model);
  ZS_ASSIGN_OR_RETURN(const int64_t start_step,
                      LoadBestState(ctx, job.held, units, *engine, *control));
  // The CPU model computes on the host: over device buffers it goes through
  // HostHooks (until the model has device kernels).
  std::unique_ptr<HostHooks> host_hooks;
  UnitHooks* hooks = engine.get();
  if (job.device->kind() != DeviceKind::kCpu) {
    host_hooks = std::make_unique<HostHooks>(engine->plan(), job.device.get(), engine.get(),
                                             job.job.collective_timeout());
    hooks = host_hooks.get();
  }
  GenerationTrainer trainer(ctx, control, engine.get(), hooks);
  ZS_RETURN_IF_ERROR(trainer.Run(start_step));
  if (!trainer.yielded()) return GenerationEnd::kJobDone;
  ZS_ASSIGN_OR_RETURN(const YieldOutcome outcome,
                      HandOffAtYield(ctx, *trainer.yielded(), units, *engine, *control, job.held));
  return outcome == YieldOutcome::kLeft ? GenerationEnd::kLeft : GenerationEnd::kHandedOff;
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  std::cout << "connecting to the coordinator at " << options.coordinator << "\n" << std::flush;
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<CoordinatorClient> client,
                      CoordinatorClient::Connect(options.coordinator));
  absl::StatusOr<v1::JobStatus> probed = WorkerSession::ProbeJob(*client, absl::Seconds(30));
  if (!probed.ok()) {
    return absl::Status(probed.status().code(),
                        absl::StrCat("no reachable coordinator at ", options.coordinator, ": ",
                                     probed.status().message()));
  }
  const v1::JobStatus& status = *probed;
  ZS_ASSIGN_OR_RETURN(JobContext job, LoadJob(*client, status.job_id()));
  SetComputeThreads(options.threads > 0 ? options.threads : job.job.threads);
  std::unique_ptr<checkpoint::CheckpointClient> checkpoints;
  if (!job.job.checkpoint_dir.empty()) {
    ZS_ASSIGN_OR_RETURN(checkpoints, checkpoint::CheckpointClient::Connect(options.coordinator));
  }
  WorkerSession::Identity identity{status.job_id(), options.worker_id, options.host};
  if (identity.worker_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    identity.worker_id = absl::StrCat(host, ":", getpid());
  }
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<WorkerSession> session,
                      WorkerSession::Join(*client, identity, ModelUnits(job.model)));
  for (int attempt = 0;; ++attempt) {
    auto awaited = session->AwaitGeneration(options.join_timeout);
    if (absl::IsNotFound(awaited.status()) && attempt < kMaxGenerationRestarts) {
      // The coordinator dropped this member (lease expired, or it restarted
      // and forgot members): join again as a new member.
      std::cout << "rejoining: " << awaited.status().message() << "\n" << std::flush;
      session.reset();
      ZS_ASSIGN_OR_RETURN(session, WorkerSession::Join(*client, identity, ModelUnits(job.model)));
      continue;
    }
    ZS_RETURN_IF_ERROR(awaited.status());
    const v1::GenerationInfo& info = *awaited;
    std::cout << "generation " << info.generation() << ": rank " << info.rank() << " of "
              << info.world_size() << "\n" << std::flush;
    absl::StatusOr<GenerationEnd> end =
        RunGeneration(options, job, client, *session, checkpoints.get(), info);
    if (end.ok() && *end == GenerationEnd::kLeft) {
      std::cout << "left the job after handing off its shard\n" << std::flush;
      return absl::OkStatus();
    }
    if (end.ok() && *end == GenerationEnd::kHandedOff) {
      --attempt;  // A membership change, not a failure.
      if (!session->AwaitEnd(info.generation(), options.generation_end_timeout)) {
        return absl::DeadlineExceededError("the generation did not end after the handoff");
      }
      std::cout << "generation " << info.generation() << " handed off; waiting for the next\n"
                << std::flush;
      continue;
    }
    if (end.ok()) break;
    const absl::Status s = end.status();
    job.held.reset();  // Whatever was handed over is stale after a failure.
    // A peer that vanished or a generation that ended shows up as a failed
    // collective: report it (the coordinator then forms the next generation
    // at once) and go on in the next one. Anything else is this worker's own
    // error and ends it.
    session->ReportFailure(info.generation(), -1, std::string(s.message()));
    if (!IsGenerationLoss(s) || attempt >= kMaxGenerationRestarts ||
        !session->AwaitEnd(info.generation(), options.generation_end_timeout)) {
      return s;
    }
    std::cout << "generation " << info.generation() << " ended (" << s.message()
              << "); waiting for the next\n" << std::flush;
  }
  std::cout << "job done: " << job.job.steps << " steps; leaving\n" << std::flush;
  session->Leave();
  return absl::OkStatus();
}

}  // namespace zeroshard
