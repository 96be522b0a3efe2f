#include "worker/trainer/job_context.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/job_refusal.h"
#include "common/model/job_model.h"
#include "common/offload_config.h"
#include "common/status_macros.h"
#include "common/tokenizer/job_tokenizer.h"
#include "worker/device/device_factory.h"
#include "worker/model/kernels.h"
#include "worker/model/model_kernels.h"
#include "worker/model/model_plan.h"
#include "worker/trainer/cpu_reserve.h"

namespace zeroshard {
namespace {

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

}  // namespace

BackendChoice ResolveBackend(BackendChoice backend, DeviceKind device) {
  const bool cuda = device == DeviceKind::kCuda;
  if (backend == BackendChoice::kAuto) return cuda ? BackendChoice::kNccl : BackendChoice::kGloo;
  if (backend == BackendChoice::kGloo && cuda) return BackendChoice::kHostStaged;
  return backend;
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

}  // namespace zeroshard
