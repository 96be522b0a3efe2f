// Training within one generation: the loop a worker runs between the moment
// its generation forms and the moment the job ends or the generation does.
//
// How a step works (rank r of N, global batch B sequences of T tokens):
//   1. Rank r takes samples SampleRange(B, N, r) of the step (data order
//      depends only on seed and step, never on N) and runs them through the
//      model in micro-batches. Every rank runs the same number of
//      micro-batches, ceil(max range / micro_batch), because the engine's
//      hooks are collective; a rank short of samples runs a padding
//      micro-batch with loss scale 0.
//   2. The model's gradient is d(sum of token losses / (B*T)); the engine
//      averages over ranks (sum / N), so Step gets grad_scale = N and the
//      update sees the gradient of the mean loss over the global batch.
//   3. One all-reduce sums the token losses; one all-gather collects every
//      rank's memory and communication figures (and rank 0's checkpoint
//      request), so rank 0 writes the whole step record.
// Validation runs every eval_every steps over eval_batches fixed batches of
// the held-out split.
//
// Not thread-safe: one training thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model/job_config.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/data/batch_sampler.h"
#include "worker/engine/sharded_engine.h"
#include "worker/model/causal_lm.h"
#include "worker/trainer/lifecycle.h"
#include "worker/trainer/peer_replica.h"
#include "worker/trainer/step_record.h"
#include "worker/trainer/step_reporter.h"
#include "worker/trainer/stop_token.h"
#include "worker/trainer/worker_session.h"

namespace zeroshard {

struct GenerationContext {
  const JobConfig* job = nullptr;
  const ModelConfig* model_config = nullptr;
  const TextCorpus* corpus = nullptr;
  WorkerSession* session = nullptr;
  checkpoint::CheckpointClient* checkpoints = nullptr;  // Null: no checkpoints.
  uint64_t generation = 0;
  int rank = 0;
  int world_size = 1;
  // Set when this rank is to leave the job (SIGTERM): it says so at the
  // next step boundary (StepFlags::leave).
  StopToken stop;
  // Set: this rank stops at the start of its next step as a killed process
  // would (WorkerOptions::crash, fault injection).
  StopToken crash;
  // Peer redundancy's copies, refreshed as the generation starts and every
  // job.redundancy_every steps; null = off.
  PeerReplica* replica = nullptr;
  // What the model computes with, and where its activations live (the
  // engine's device, whose memory the kernels use); null = CpuKernels on a
  // CPU device of the model's own.
  Kernels* kernels = nullptr;
  Device* model_device = nullptr;
};

// Why and where the ranks stopped early, all at the same step boundary:
// a member waits to join (the coordinator's change_pending), or ranks want
// to leave. The engines are intact at `step`.
struct YieldInfo {
  int64_t step = 0;          // Steps completed.
  std::vector<int> leaving;  // Ranks that leave, ascending.
};

// Where a generation's state came from (state_handoff.h's LoadBestState):
// the step to train from, and the start event of its first step record
// (StepRecord::events).
struct GenerationStart {
  int64_t step = 0;
  const char* event = "initialized";
  int64_t from_step = -1;    // The restored or resharded state's step; -1 for none.
  std::string live_refused;  // Why live resharding was refused ("" none).
};

// The job's activation_checkpointing as the model's mode (a validated job
// holds one of its names: checked).
ActivationCheckpointing JobActivationCheckpointing(const JobConfig& job);

class GenerationTrainer {
 public:
  // `control` carries the control values (loss sums, the step record) in
  // host memory: the data communicator itself with Gloo on the CPU, a Gloo
  // communicator beside it otherwise. `hooks` is what the model calls: the
  // engine (its buffers are memory of ctx.model_device), or HostHooks over a
  // device engine for a model on the host (worker/engine/host_hooks.h).
  GenerationTrainer(const GenerationContext& ctx, Communicator* control, ShardedEngine* engine,
                    UnitHooks* hooks);
  // Trains steps [start_step, job.steps). OK when the job's steps are done,
  // when an operator stopped the job (WorkerSession::JobStopped: the
  // ranks agree on the step, save a checkpoint there and end as if it were
  // the last), or when the ranks agreed to yield at a step boundary (then
  // yielded() is set); ABORTED when the generation ended under it; the first
  // engine/communication/data error otherwise.
  absl::Status Run(const GenerationStart& start);
  const std::optional<YieldInfo>& yielded() const { return yielded_; }

 private:
  struct StepOutcome {
    double loss = 0;             // Mean over the counted targets.
    int64_t counted_tokens = 0;  // Targets the loss counted, all ranks.
    StepResult result;
  };
  // Runs `run(batch, padding, last)` once per micro-batch of this rank's
  // part of `step`'s global batch, with inputs_/targets_ filled (`last`:
  // the step's last micro-batch); sums what it returns over the
  // non-padding micro-batches.
  using MicroBatchFn = std::function<absl::StatusOr<double>(int batch, bool padding, bool last)>;
  absl::StatusOr<double> SumOverMicroBatches(const BatchSampler& sampler, int64_t step,
                                             const MicroBatchFn& run);
  absl::StatusOr<StepOutcome> TrainStep(int64_t step);
  absl::StatusOr<double> Evaluate();
  absl::StatusOr<double> SumOverRanks(double value);
  absl::Status Publish(int64_t step, const StepOutcome& outcome, double val_loss, double seconds,
                       const std::string& sample, bool* checkpoint_requested);
  // A short text from the model as it is now (JobConfig::sample_every): every
  // rank runs the same forward passes (the engine gathers the units) over the
  // same tokens, a fixed number of them whatever they are, so the ranks stay
  // in step; the text is the same on each (generation_trainer_sample.cc).
  absl::StatusOr<std::string> Sample(int64_t step);
  // The record's events (StepRecord::events): the generation's start on its
  // first record, the early stop agreed in this Publish.
  void NoteEvents(StepRecord& record);
  // This rank's flags for the step record's all-gather.
  StepFlags MyStepFlags() const;
  // Sets stop_ and yield_ from the lifecycle's decision on the committed
  // step `step` (lifecycle.h: kStopTraining, kYield).
  void AgreeAtStepBoundary(int64_t step, const LifecycleDecision& d);
  // `clip_coef`: the step's clipping multiplier (StepResult::clip_coef).
  void ReportToCoordinator(const StepRecord& record, double clip_coef);
  absl::Status MaybeCheckpoint(int64_t step, bool requested);
  absl::Status FinishCheckpoint();
  bool PollCheckpointTrigger();  // Rank 0: has `zeroshard checkpoint now` been asked since?
  RankStepStats MyStats();

  GenerationContext ctx_;
  Communicator* comm_;
  ShardedEngine* engine_;
  UnitHooks* hooks_;
  std::unique_ptr<CausalLm> model_;
  std::unique_ptr<tokenizer::Tokenizer> sample_tok_;  // Loaded at the first sample.
  BatchSampler train_;
  BatchSampler validation_;
  std::vector<int32_t> inputs_, targets_;
  CommStats last_comm_;
  std::ofstream log_;
  int64_t checkpoint_trigger_seen_ = -1;
  std::unique_ptr<checkpoint::SaveHandle> pending_save_;
  std::future<absl::StatusOr<int64_t>> trigger_poll_;  // Rank 0's checkpoint-now poll.
  std::optional<YieldInfo> yield_;                     // Agreed in the last Publish.
  bool stop_ = false;                     // A rank saw the operator's stop (the last Publish).
  std::optional<GenerationStart> start_;  // Until the first record carries it.
  double refresh_seconds_ = 0;            // The last step's peer-copy refresh.
  int64_t peak_activation_bytes_ = 0;     // The model's, since the generation started.
  std::optional<YieldInfo> yielded_;      // Where Run stopped early.
  static constexpr int kQueuedReports = 64;
  StepReporter reporter_;  // Last: its thread stops first, while ctx_ lives.
};

}  // namespace zeroshard
