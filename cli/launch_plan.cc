#include "cli/launch_plan.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <ranges>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/byte_format.h"
#include "common/run_plan.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"
#include "worker/device/device_factory.h"
#include "worker/model/model_plan.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<PlanMachine> LaunchMachine(const LaunchOptions& o) {
  PlanMachine m;
  m.workers = o.workers;
  if (const char* env = std::getenv(kMemoryAvailableEnv); env != nullptr && *env != '\0') {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(env, &bytes) || bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kMemoryAvailableEnv, "='", env, "' (expected bytes > 0)"));
    }
    m.cuda = o.job.device == DeviceChoice::kCuda;
    m.nvme = std::numeric_limits<int64_t>::max();
    m.host_memory = bytes;
    m.device_memory = bytes;
    return m;
  }
  // The offload dir's space is CheckOffload's (launch_checks.cc), which names
  // --offload-dir; here NVMe never limits.
  m.nvme = std::numeric_limits<int64_t>::max();
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> cpu, CreateDevice({"cpu", -1, 1}));
  ZS_ASSIGN_OR_RETURN(const MemoryInfo host, cpu->memory_info());
  m.host_memory = host.free_bytes;
  if (o.job.device == DeviceChoice::kCuda) {  // auto is checked as the CPU: the stricter bound.
    m.cuda = true;
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> gpu, CreateDevice({"cuda", -1, 1}));
    ZS_ASSIGN_OR_RETURN(const MemoryInfo info, gpu->memory_info());
    m.device_memory = info.free_bytes;
  }
  return m;
}

// "params 1.20 GiB, grads ... = 9.00 GiB per worker" for one choice; on the
// CPU the terms add up to the figure (run_plan.h CheckFit).
std::string Breakdown(const PlanChoice& c, const PlanMachine& m, const PlanModel& pm) {
  const MemoryPrediction& p = c.memory;
  auto b = [](int64_t bytes) { return FormatBinaryBytes(bytes); };
  std::string s =
      absl::StrCat("params ", b(p.state.params), ", grads ", b(p.state.grads), ", optimizer ",
                   b(p.state.optimizer + p.host_offload), ", buffers ",
                   b(p.gather_buffers + p.state.buffers), ", activations ", b(p.activations));
  if (p.state.redundancy > 0) absl::StrAppend(&s, ", redundancy ", b(p.state.redundancy));
  if (!m.cuda) {
    absl::StrAppend(&s, ", initial unit ", b(pm.worker_host_bytes), ", process ",
                    b(m.process_overhead));
  }
  return absl::StrCat(s, " = ", b(c.device_need), " per worker");
}

// The plan's choices for the job's own checkpointing and offload: the one
// --stage auto chooses (the lowest stage that fits) and the stage under it,
// and the one reported when it does not fit (the stage asked for; under
// auto, the stage that shards the most).
struct PickedChoices {
  const PlanChoice* chosen = nullptr;
  const PlanChoice* wanted = nullptr;
  const PlanChoice* below = nullptr;
};

PickedChoices PickChoice(const RunPlan& plan, const JobConfig& job, bool auto_stage) {
  const bool checkpointing = job.activation_checkpointing == ActivationCheckpointing::kBlocks;
  auto same_setup = plan.choices | std::views::filter([&](const PlanChoice& c) {
                      return c.checkpointing == checkpointing && c.offload == job.offload_optimizer;
                    });
  PickedChoices p;
  if (!auto_stage) {
    auto it = std::ranges::find(same_setup, job.stage, &PlanChoice::stage);
    if (it != same_setup.end()) p.wanted = &*it;
    return p;
  }
  for (const PlanChoice& c : same_setup) {  // Stage by stage, lowest first.
    if (p.chosen == nullptr) (c.fits ? p.chosen : p.below) = &c;
    if (ZeroStageOf(c.stage).shards_params) p.wanted = &c;
  }
  return p;
}

}  // namespace

absl::Status PlanLaunchMemory(LaunchOptions& o, const ModelConfig& model, bool auto_stage) {
  ZS_ASSIGN_OR_RETURN(const PlanMachine m, LaunchMachine(o));
  const int micro_batches = MicroBatchesPerStep(o.job.global_batch, o.workers, o.job.micro_batch);
  PlanModel pm = MakePlanModel(model, o.job.micro_batch, model.n_ctx, micro_batches,
                               o.job.compute_dtype, o.job.reduce_dtype, m.cuda);
  pm.offload_params_nvme = o.job.offload_params == ParamsOffload::kNvme;
  pm.offload_prefetch = o.job.offload_prefetch;
  pm.gather_prefetch = o.job.gather_prefetch;
  pm.bucket_bytes = o.job.bucket_bytes();
  ZS_ASSIGN_OR_RETURN(const RunPlan plan, MakeRunPlan(pm, m));
  const auto [chosen, wanted, below] = PickChoice(plan, o.job, auto_stage);
  ZS_CHECK(wanted != nullptr);
  const std::string have = m.cuda
                               ? absl::StrCat(FormatBinaryBytes(m.device_memory), " free per GPU")
                               : absl::StrCat(FormatBinaryBytes(m.host_memory), " available");
  if (auto_stage && chosen != nullptr) {
    o.job.stage = chosen->stage;
    std::cout << "zeroshard launch: --stage auto chose "
              << absl::StrCat("stage ", chosen->stage, ": it is the lowest stage that fits ")
              << o.workers << " workers in " << have << "\n  " << Breakdown(*chosen, m, pm) << "\n";
    if (below != nullptr) {
      std::cout << absl::StrCat("  stage ", below->stage, " would need ")
                << FormatBinaryBytes(below->device_need) << " per worker"
                << (m.cuda ? absl::StrCat(" (", below->why_not, ")")
                           : absl::StrCat(", ", FormatBinaryBytes(below->host_need), " for ",
                                          o.workers, " workers"))
                << "\n";
    }
    std::cout << "  (`zeroshard plan --model " << o.job.model << " --workers " << o.workers
              << "` prints every stage, checkpointing and offload choice)\n"
              << std::flush;
    return absl::OkStatus();
  }
  if (wanted->fits) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "model '", o.job.model, "' (", pm.params, " parameters) does not fit at ",
      auto_stage ? "any stage; at stage 3 it needs " : absl::StrCat("stage ", o.job.stage, ": "),
      Breakdown(*wanted, m, pm), ", x ", o.workers,
      " workers = ", FormatBinaryBytes(wanted->host_need), m.cuda ? "" : " of host memory", "; ",
      have, m.cuda ? absl::StrCat(" (", wanted->why_not, ")") : std::string()));
}

}  // namespace zeroshard::cli
