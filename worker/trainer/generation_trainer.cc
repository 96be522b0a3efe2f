#include "worker/trainer/generation_trainer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/control_collectives.h"

namespace zeroshard {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ActivationCheckpointing JobActivationCheckpointing(const JobConfig& job) {
  return job.activation_checkpointing;
}

GenerationTrainer::GenerationTrainer(const GenerationContext& ctx, Communicator* control,
                                     ShardedEngine* engine, UnitHooks* hooks)
    : ctx_(ctx),
      comm_(control),
      engine_(engine),
      hooks_(hooks),
      model_(CreateCausalLm(*ctx.model_config, JobActivationCheckpointing(*ctx.job),
                            ctx.kernels != nullptr ? *ctx.kernels : CpuKernels(),
                            ctx.model_device)),
      train_(*ctx.corpus, Split::kTrain, ctx.job->seed),
      validation_(*ctx.corpus, Split::kValidation, ctx.job->seed),
      last_comm_(engine->comm_stats()),
      reporter_([client = &ctx.session->client()](
                    const v1::StepReport& r) { return client->ReportStep(r); },
                kQueuedReports, ctx.job->rpc_timeout()) {
  model_->set_device_wait(ctx.job->collective_timeout());
  if (ctx_.rank == 0 && !ctx_.job->log_path.empty()) {
    log_.open(ctx_.job->log_path, std::ios::app);
  }
}

absl::StatusOr<double> GenerationTrainer::SumOverRanks(double value) {
  ZS_ASSIGN_OR_RETURN(const std::vector<double> sum,
                      AllReduceControl(*comm_, std::vector<double>{value}, ReduceOp::kSum,
                                       ctx_.job->collective_timeout()));
  return sum[0];
}

absl::StatusOr<double> GenerationTrainer::SumOverMicroBatches(const BatchSampler& sampler,
                                                              int64_t step,
                                                              const MicroBatchFn& run) {
  const JobConfig& job = *ctx_.job;
  const int T = ctx_.model_config->n_ctx;
  ZS_ASSIGN_OR_RETURN(const SampleSpan mine,
                      SampleRange(job.global_batch, ctx_.world_size, ctx_.rank));
  // SampleRange gives ranks floor or ceil of G/N samples: the widest has ceil.
  const int64_t widest = CeilDiv(job.global_batch, ctx_.world_size);
  const int64_t micro_batches = CeilDiv(std::max<int64_t>(1, widest), job.micro_batch);
  double loss_sum = 0;
  for (int64_t mb = 0; mb < micro_batches; ++mb) {
    const int64_t begin = mine.begin + mb * job.micro_batch;
    const int64_t end = std::min(mine.end, begin + job.micro_batch);
    const bool padding = begin >= end;  // Keeps the collective hooks in step.
    const int64_t b = padding ? 0 : begin, e = padding ? 1 : end;
    const int batch = static_cast<int>(e - b);
    inputs_.resize(static_cast<size_t>(batch) * T);
    targets_.resize(inputs_.size());
    ZS_RETURN_IF_ERROR(sampler.FillBatch(step, b, e, T, inputs_.data(), targets_.data()));
    ZS_ASSIGN_OR_RETURN(const double sum, run(batch, padding, mb + 1 == micro_batches));
    if (!padding) loss_sum += sum;
  }
  return loss_sum;
}

absl::StatusOr<GenerationTrainer::StepOutcome> GenerationTrainer::TrainStep(int64_t step) {
  const JobConfig& job = *ctx_.job;
  const int T = ctx_.model_config->n_ctx;
  // The mean over the global batch's counted targets (all of them, but for
  // fine-tuning pairs' prompts and padding): every rank counts alike.
  const int64_t counted = std::max<int64_t>(1, train_.CountedTargets(step, 0, job.global_batch, T));
  const float loss_scale = 1.0f / static_cast<float>(counted);
  ZS_ASSIGN_OR_RETURN(const double loss_sum,
                      SumOverMicroBatches(train_, step, [&](int batch, bool padding, bool last) {
                        // Stage 0 reduces in the last micro-batch's backward.
                        engine_->set_gradient_sync(last);
                        return model_->ForwardBackward(inputs_.data(), targets_.data(), batch, T,
                                                       padding ? 0.0f : loss_scale, *hooks_);
                      }));
  engine_->set_learning_rate(static_cast<float>(LearningRateAt(job, step)));
  StepOutcome outcome;
  ZS_ASSIGN_OR_RETURN(outcome.result, engine_->Step(static_cast<float>(ctx_.world_size)));
  ZS_ASSIGN_OR_RETURN(const double total, SumOverRanks(loss_sum));
  outcome.loss = total / static_cast<double>(counted);
  outcome.counted_tokens = counted;
  return outcome;
}

absl::StatusOr<double> GenerationTrainer::Evaluate() {
  const JobConfig& job = *ctx_.job;
  const int T = ctx_.model_config->n_ctx;
  double loss_sum = 0;
  int64_t counted = 0;
  engine_->BeginEvaluation();  // Its own gather order; nothing gathered after.
  for (int batch_index = 0; batch_index < job.eval_batches; ++batch_index) {
    counted += validation_.CountedTargets(batch_index, 0, job.global_batch, T);
    absl::StatusOr<double> sum =
        SumOverMicroBatches(validation_, batch_index, [&](int batch, bool, bool) {
          return model_->Forward(inputs_.data(), targets_.data(), batch, T, *hooks_);
        });
    if (!sum.ok()) {
      engine_->EndEvaluation().IgnoreError();  // The pass's error is the one to report.
      return sum.status();
    }
    loss_sum += *sum;
  }
  ZS_RETURN_IF_ERROR(engine_->EndEvaluation());
  ZS_ASSIGN_OR_RETURN(const double total, SumOverRanks(loss_sum));
  return total / static_cast<double>(std::max<int64_t>(1, counted));
}

RankStepStats GenerationTrainer::MyStats() {
  RankStepStats s;
  s.memory = engine_->memory();
  s.peak_memory = engine_->peak_memory();
  if (ctx_.replica != nullptr) {
    s.memory.redundancy = ctx_.replica->bytes();
    s.peak_memory.redundancy = ctx_.replica->peak_bytes();
  }
  s.memory.activations = model_->ActivationBytes();
  peak_activation_bytes_ = std::max(peak_activation_bytes_, s.memory.activations);
  s.peak_memory.activations = peak_activation_bytes_;
  const CommStats now = engine_->comm_stats();  // The data plane's.
  const CommOp ops[3] = {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce};
  for (int i = 0; i < 3; ++i) {
    s.comm_bytes[i] = now.of(ops[i]).bytes - last_comm_.of(ops[i]).bytes;
    s.comm_seconds[i] = now.of(ops[i]).seconds - last_comm_.of(ops[i]).seconds;
  }
  last_comm_ = now;
  return s;
}

absl::Status GenerationTrainer::Run(const GenerationStart& start) {
  const JobConfig& job = *ctx_.job;
  const int64_t start_step = start.step;
  start_ = start;
  if (ctx_.rank == 0 && !job.log_path.empty() && !log_.is_open()) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open the step log ", job.log_path));
  }
  // Peer copies of the state this generation starts from: until the first
  // refresh, a lost rank would lose its shard.
  if (ctx_.replica != nullptr && start_step < job.steps) {
    ZS_RETURN_IF_ERROR(ctx_.replica->Refresh(*engine_, *comm_, ctx_.generation, start_step,
                                             job.collective_timeout()));
  }
  for (int64_t step = start_step; step < job.steps; ++step) {
    if (ctx_.session->Ended(ctx_.generation)) {
      return absl::AbortedError(absl::StrCat("generation ", ctx_.generation, " ended"));
    }
    if (ctx_.crash.stop_requested()) return absl::AbortedError("crashed (fault injection)");
    const absl::Time start = absl::Now();
    ZS_ASSIGN_OR_RETURN(const StepOutcome outcome, TrainStep(step));
    // Step time covers the optimizer step only, not the evaluation below.
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const int64_t done = step + 1;
    double val_loss = -1;
    const bool last = done == job.steps;
    if (last || (job.eval_every > 0 && done % job.eval_every == 0)) {
      ZS_ASSIGN_OR_RETURN(val_loss, Evaluate());
    }
    std::string sample;
    if (job.sample_every > 0 && done % job.sample_every == 0) {
      ZS_ASSIGN_OR_RETURN(sample, Sample(done));
    }
    // Peer copies before the step record: the record is the commit, so a
    // copy never runs ahead of what the log shows.
    const absl::Time refresh_start = absl::Now();
    if (ctx_.replica != nullptr && !last && done % job.redundancy_every == 0) {
      ZS_RETURN_IF_ERROR(
          ctx_.replica->Refresh(*engine_, *comm_, ctx_.generation, done, job.collective_timeout()));
    }
    refresh_seconds_ = absl::ToDoubleSeconds(absl::Now() - refresh_start);
    bool requested = false;
    ZS_RETURN_IF_ERROR(Publish(done, outcome, val_loss, seconds, sample, &requested));
    // An operator's stop makes this step the job's last, saved like one.
    ZS_RETURN_IF_ERROR(MaybeCheckpoint(done, requested || stop_));
    if (stop_) break;
    if (yield_ && !last) {
      reporter_.Flush(job.rpc_timeout());
      ZS_RETURN_IF_ERROR(FinishCheckpoint());
      yielded_ = yield_;
      return absl::OkStatus();
    }
  }
  // The last step's report completes the job: it lands before Run returns.
  reporter_.Flush(job.rpc_timeout());
  ZS_RETURN_IF_ERROR(FinishCheckpoint());
  return comm_->Barrier(CollectiveOptions{ctx_.job->collective_timeout()});
}

}  // namespace zeroshard
