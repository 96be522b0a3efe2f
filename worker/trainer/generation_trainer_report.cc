// GenerationTrainer: the per-step record (all-gather of rank figures, JSONL
// log on rank 0, step reports to the coordinator) and checkpoint saves.
#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/infra/process_memory.h"
#include "common/status_macros.h"
#include "worker/comm/control_collectives.h"
#include "worker/trainer/checkpointing.h"
#include "worker/trainer/coordinator_refusal.h"
#include "worker/trainer/generation_trainer.h"

namespace zeroshard {
namespace {

// + rank 0's checkpoint request, + each rank's yield flags.
constexpr int kGatherDoubles = RankStepStats::kDoubles + 2;
constexpr int kCheckpointSlot = RankStepStats::kDoubles;
constexpr int kYieldSlot = RankStepStats::kDoubles + 1;

void FillMemory(const MemoryByKind& m, v1::MemoryBytes* out) {
  out->set_params(m.params);
  out->set_grads(m.grads);
  out->set_optimizer(m.optimizer);
  out->set_buffers(m.buffers);
  out->set_redundancy(m.redundancy);
  out->set_offloaded(m.offloaded);
  out->set_activations(m.activations);
}

}  // namespace

absl::Status GenerationTrainer::Publish(int64_t step, const StepOutcome& outcome, double val_loss,
                                        double seconds, const std::string& sample,
                                        bool* checkpoint_requested) {
  std::vector<double> mine(kGatherDoubles, 0.0);
  const auto packed = MyStats().Pack();
  std::copy(packed.begin(), packed.end(), mine.begin());
  if (ctx_.rank == 0 && ctx_.checkpoints != nullptr) {
    mine[kCheckpointSlot] = PollCheckpointTrigger() ? 1 : 0;
  }
  mine[kYieldSlot] = MyStepFlags().Encode();
  ZS_ASSIGN_OR_RETURN(const std::vector<double> all,
                      AllGatherControl(*comm_, mine, ctx_.job->collective_timeout()));
  *checkpoint_requested = all[kCheckpointSlot] != 0;
  LifecycleEvent committed{LifecycleEventKind::kStepCommitted};
  committed.last_step = step >= ctx_.job->steps;
  for (int r = 0; r < ctx_.world_size; ++r) {
    committed.flags.push_back(
        StepFlags::Decode(all[static_cast<size_t>(r) * kGatherDoubles + kYieldSlot]));
  }
  AgreeAtStepBoundary(step, Decide({LifecyclePhase::kTraining}, committed));

  StepRecord record;
  record.step = step;
  record.loss = outcome.loss;
  record.val_loss = val_loss;
  record.lr = engine_->options().adamw.lr;
  record.grad_norm = outcome.result.grad_norm;
  record.world_size = ctx_.world_size;
  record.generation = ctx_.generation;
  record.stage = ctx_.job->stage;
  record.step_seconds = seconds;
  record.redundancy_seconds = refresh_seconds_;
  record.tokens_per_second =
      static_cast<double>(ctx_.job->global_batch) * ctx_.model_config->n_ctx / seconds;
  record.counted_tokens = outcome.counted_tokens;
  record.sample = sample;
  NoteEvents(record);
  for (int r = 0; r < ctx_.world_size; ++r) {
    record.ranks.push_back(RankStepStats::Unpack(&all[static_cast<size_t>(r) * kGatherDoubles]));
  }
  if (log_.is_open()) log_ << record.ToJsonLine() << "\n" << std::flush;
  ReportToCoordinator(record, outcome.result.clip_coef);
  return absl::OkStatus();
}

void GenerationTrainer::NoteEvents(StepRecord& record) {
  if (start_) {
    record.events.push_back(start_->event);
    record.start_step = start_->from_step;
    record.live_refused = start_->live_refused;
    start_.reset();
  }
  if (stop_) {
    record.events.push_back("stopped");
  } else if (yield_) {
    record.events.push_back(yield_->leaving.empty() ? "handed_off" : "left");
    record.leaving = yield_->leaving;
  }
}

StepFlags GenerationTrainer::MyStepFlags() const {
  return {.member_waiting = ctx_.rank == 0 && ctx_.session->ChangePending(),
          .leave = ctx_.stop.stop_requested(),
          .job_stopped = ctx_.session->JobStopped()};
}

void GenerationTrainer::AgreeAtStepBoundary(int64_t step, const LifecycleDecision& d) {
  const auto has = [&d](LifecycleAction a) {
    return std::find(d.actions.begin(), d.actions.end(), a) != d.actions.end();
  };
  stop_ = has(LifecycleAction::kStopTraining);
  yield_.reset();
  if (has(LifecycleAction::kYield)) yield_ = YieldInfo{step, d.leaving};
}

void GenerationTrainer::ReportToCoordinator(const StepRecord& record, double clip_coef) {
  v1::StepReport report;
  report.set_job_id(ctx_.session->job_id());
  report.set_member_id(ctx_.session->member_id());
  report.set_generation(ctx_.generation);
  report.set_rank(ctx_.rank);
  report.set_step(record.step);
  report.set_loss(record.loss);
  report.set_tokens_per_second(record.tokens_per_second);
  report.set_step_seconds(record.step_seconds);
  report.set_val_loss(record.val_loss >= 0 ? record.val_loss : std::nan(""));
  report.set_tokens(int64_t{ctx_.job->global_batch} * ctx_.model_config->n_ctx);
  report.set_grad_norm(record.grad_norm);
  report.set_clip_coef(clip_coef);
  if (std::optional<double> rss = ResidentMemoryBytes()) {
    report.set_rss_bytes(static_cast<int64_t>(*rss));
  }
  const RankStepStats& me = record.ranks[ctx_.rank];
  const Device& device = engine_->device();
  if (absl::StatusOr<MemoryInfo> info = device.memory_info(); info.ok()) {
    v1::DeviceMemory* d = report.mutable_device_memory();
    d->set_device(device.name());
    d->set_total_bytes(info->total_bytes);
    d->set_free_bytes(std::min(info->free_bytes, info->total_bytes));
  }
  FillMemory(me.memory, report.mutable_memory());
  FillMemory(me.peak_memory, report.mutable_peak_memory());
  const CommStats totals = engine_->comm_stats();
  const CommOp ops[3] = {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce};
  for (CommOp op : ops) {
    v1::CommStat* c = report.add_comm();
    c->set_op(CommOpName(op));
    c->set_bytes(totals.of(op).bytes);
    c->set_seconds(totals.of(op).seconds);
    c->set_calls(totals.of(op).calls);
  }
  // Sent in the background (step_reporter.h): a lost report costs a
  // metrics sample, not training, and a slow coordinator no step time.
  reporter_.Submit(std::move(report));
}

// The poll runs in the background and is read at the next step, so a slow
// coordinator never holds up training; a request made before the first
// answer counts from that answer on.
bool GenerationTrainer::PollCheckpointTrigger() {
  bool requested = false;
  if (trigger_poll_.valid()) {
    if (trigger_poll_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    const absl::StatusOr<int64_t> trigger = trigger_poll_.get();
    if (trigger.ok()) {
      requested = checkpoint_trigger_seen_ >= 0 && *trigger > checkpoint_trigger_seen_;
      checkpoint_trigger_seen_ = *trigger;
    }
  }
  checkpoint::CheckpointClient* client = ctx_.checkpoints;
  const absl::Duration timeout = ctx_.job->trigger_poll_timeout();
  trigger_poll_ = std::async(std::launch::async, [client, timeout] {
    return client->GetCheckpointTrigger(absl::Now() + timeout);
  });
  return requested;
}

absl::Status GenerationTrainer::MaybeCheckpoint(int64_t step, bool requested) {
  const JobConfig& job = *ctx_.job;
  if (ctx_.checkpoints == nullptr) return absl::OkStatus();
  const bool due = job.checkpoint_every > 0 && step % job.checkpoint_every == 0;
  if (!due && !requested) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(FinishCheckpoint());
  // The coordinator commits no save ahead of the step every rank reported
  // ([Note: bound checkpoint writes]): this rank's report of `step` lands
  // before its save begins.
  reporter_.Flush(job.rpc_timeout());
  auto started = StartCheckpointSave(ctx_, *engine_, step);
  if (!started.ok()) return MarkCoordinatorRefusal(started.status());
  pending_save_ = std::move(*started);
  return absl::OkStatus();
}

absl::Status GenerationTrainer::FinishCheckpoint() {
  if (!pending_save_) return absl::OkStatus();
  auto result = pending_save_->Wait(ctx_.job->checkpoint_timeout());
  pending_save_.reset();
  if (!result.ok()) {
    return MarkCoordinatorRefusal(absl::Status(
        result.status().code(), absl::StrCat("checkpoint save: ", result.status().message())));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
