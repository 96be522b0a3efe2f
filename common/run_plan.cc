#include "common/run_plan.h"

#include "absl/strings/str_cat.h"
#include "common/byte_format.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"

namespace zeroshard {
namespace {

// Fills the needs of `c` and whether they fit `m` (see run_plan.h).
void CheckFit(const PlanMachine& m, int64_t worker_host_bytes, PlanChoice& c) {
  const MemoryPrediction& p = c.memory;
  if (m.cuda) {
    c.device_need = p.device_peak();
    c.host_need = m.workers * (p.host_extra() + worker_host_bytes);
  } else {
    c.device_need = p.cpu_worker_bytes() + worker_host_bytes + m.process_overhead;
    c.host_need = m.workers * c.device_need;
  }
  c.nvme_need = m.workers * p.nvme;
  c.fits = true;
  auto fail = [&c](std::string why) {
    if (c.fits) c.why_not = std::move(why);
    c.fits = false;
  };
  if (m.cuda && m.device_memory > 0 && c.device_need > m.device_memory) {
    fail(absl::StrCat("device memory: needs ", FormatDecimalBytes(c.device_need), " per rank, has ",
                      FormatDecimalBytes(m.device_memory)));
  }
  if (m.host_memory > 0 && c.host_need > m.host_memory) {
    fail(absl::StrCat("host memory: needs ", FormatDecimalBytes(c.host_need), " for ", m.workers,
                      " workers, has ", FormatDecimalBytes(m.host_memory)));
  }
  if (c.nvme_need > 0 && c.nvme_need > m.nvme) {
    fail(m.nvme == 0 ? std::string("nvme: no --nvme size given")
                     : absl::StrCat("nvme: needs ", FormatDecimalBytes(c.nvme_need), ", has ",
                                    FormatDecimalBytes(m.nvme)));
  }
}

// "; stage s-1 does not (<its first limit exceeded>)" for the choice one
// stage below `pick` with the same checkpointing and offload: the last such
// choice before it (the choices run in stage order); "" at stage 0.
std::string WhyNotBelow(const RunPlan& plan, const PlanChoice& pick) {
  const PlanChoice* below = nullptr;
  for (const PlanChoice& c : plan.choices) {
    if (&c == &pick) break;
    if (c.checkpointing == pick.checkpointing && c.offload == pick.offload) below = &c;
  }
  return below == nullptr
             ? ""
             : absl::StrCat("; stage ", below->stage, " does not (", below->why_not, ")");
}

// The recommendation rule of run_plan.h.
void Recommend(RunPlan& plan) {
  for (OptimizerOffload offload :
       {OptimizerOffload::kNone, OptimizerOffload::kHost, OptimizerOffload::kNvme}) {
    int a = -1, b = -1;  // Lowest fitting stage without / with checkpointing.
    for (int i = 0; i < static_cast<int>(plan.choices.size()); ++i) {
      const PlanChoice& c = plan.choices[i];
      if (!c.fits || c.offload != offload) continue;
      int& slot = c.checkpointing ? b : a;
      if (slot < 0) slot = i;
    }
    if (a < 0 && b < 0) continue;
    const std::string off =
        offload == OptimizerOffload::kNone
            ? "without offload"
            : absl::StrCat("with the optimizer state offloaded to ", OptimizerOffloadName(offload),
                           " (nothing fits without)");
    const PlanChoice* pa = a >= 0 ? &plan.choices[a] : nullptr;
    const PlanChoice* pb = b >= 0 ? &plan.choices[b] : nullptr;
    // The choices run in stage order, so b < a: checkpointing fits a lower stage.
    const bool take_b =
        pb != nullptr &&
        (pa == nullptr || (b < a && pb->traffic.wire_bytes() < pa->traffic.wire_bytes()));
    const PlanChoice& pick = take_b ? *pb : *pa;
    plan.recommended = take_b ? b : a;
    plan.reason = absl::StrCat("stage ", pick.stage, " is the lowest stage that fits ", off, " (",
                               FormatDecimalBytes(pick.device_need), " per rank");
    if (take_b && pa != nullptr) {
      absl::StrAppend(&plan.reason, "); block checkpointing at stage ", pb->stage, " sends ",
                      FormatDecimalBytes(pb->traffic.wire_bytes()), " per rank and step against ",
                      FormatDecimalBytes(pa->traffic.wire_bytes()), " at stage ", pa->stage,
                      ", for one forward recompute per block");
    } else if (take_b) {
      absl::StrAppend(&plan.reason, "), only with block checkpointing");
    } else {
      absl::StrAppend(&plan.reason, ")", WhyNotBelow(plan, pick));
    }
    return;
  }
  plan.reason = "nothing fits: every choice exceeds a limit";
}

}  // namespace

std::string PlanChoice::Name() const {
  return absl::StrCat("stage ", stage, ", checkpointing ", checkpointing ? "blocks" : "none",
                      ", offload ", OptimizerOffloadName(offload));
}

absl::StatusOr<RunPlan> MakeRunPlan(const PlanModel& model, const PlanMachine& machine) {
  if (machine.workers < 1) return absl::InvalidArgumentError("workers: must be >= 1");
  if (model.micro_batches < 1) return absl::InvalidArgumentError("micro batches: must be >= 1");
  ShardPlan shard;
  if (model.has_structure()) {
    ZS_ASSIGN_OR_RETURN(shard, MakeShardPlan(model.units, machine.workers, model.alignment));
  } else if (model.params < 0) {
    return absl::InvalidArgumentError("params: must be >= 0");
  }
  const int64_t psi = model.has_structure() ? shard.total_numel() : model.params;
  RunPlan plan;
  for (const ZeroStage& z : ZeroStages()) {
    const int stage = z.number;
    for (int ckpt = 0; ckpt < (model.has_structure() ? 2 : 1); ++ckpt) {
      for (OptimizerOffload offload :
           {OptimizerOffload::kNone, OptimizerOffload::kHost, OptimizerOffload::kNvme}) {
        PlanChoice c;
        c.stage = stage;
        c.checkpointing = ckpt == 1;
        c.offload = offload;
        MemoryModelInputs in;
        in.stage = stage;
        in.compute_dtype = model.compute_dtype;
        in.reduce_dtype = model.reduce_dtype;
        in.offload_optimizer = offload;
        in.offload_params_nvme = model.offload_params_nvme && z.shards_params;
        in.offload_prefetch = model.offload_prefetch;
        in.gather_prefetch = model.gather_prefetch;
        in.bucket_bytes = model.bucket_bytes;
        in.cuda = machine.cuda;
        in.activation_bytes = model.activation_bytes[ckpt];
        const TrafficInputs t{stage,
                              model.compute_dtype,
                              model.reduce_dtype,
                              model.micro_batches,
                              model.brackets[ckpt],
                              model.gather_prefetch,
                              model.bucket_bytes};
        if (model.has_structure()) {
          ZS_ASSIGN_OR_RETURN(c.memory, PredictMemory(shard, in));
          ZS_ASSIGN_OR_RETURN(c.traffic, PredictTraffic(shard, t));
        } else {
          ZS_ASSIGN_OR_RETURN(c.memory, PredictMemoryFromParams(psi, machine.workers, in));
          c.traffic = PredictTrafficFromParams(psi, machine.workers, t);
        }
        c.comm_seconds = c.traffic.seconds(machine.link_bytes_per_second);
        CheckFit(machine, model.worker_host_bytes, c);
        plan.choices.push_back(std::move(c));
      }
    }
  }
  Recommend(plan);
  return plan;
}

}  // namespace zeroshard
