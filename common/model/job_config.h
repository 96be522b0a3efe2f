// The job's configuration: what `zeroshard launch` decides and every worker
// reads back from the coordinator (GenerationInfo.job_config_json), so all
// ranks train the same model on the same data with the same optimizer.
// Thread-compatible value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/dtype.h"
#include "common/job_choices.h"

namespace zeroshard {

struct JobConfig {
  // A preset name (common/model/model_config.h ModelPreset) or a Hugging Face
  // model directory (config.json + safetensors) on the coordinator's host.
  std::string model = "small";
  // The model's description as JSON (ModelConfigToJson): filled by the
  // coordinator from a model directory (PrepareServedJobConfig), so workers,
  // which never read the directory, learn the model from the job config.
  // "" for presets.
  std::string model_desc;
  // Weights of a model directory: pretrained (its safetensors, served by
  // the coordinator, each rank receiving only its shard) or random
  // (InitUnits: its architecture trained from scratch). Presets: random.
  ModelInit init = ModelInit::kPretrained;
  // Tokens per training sequence for a model directory (0 = its
  // max_position_embeddings, at most kDefaultHfContext); presets train on
  // their own context, so 0.
  int seq_len = 0;
  // How text given in `data` becomes tokens: a tokenizer.json, a
  // SentencePiece .model or a directory holding one; "bytes" (each byte a
  // token); "" = the model directory's own tokenizer where it has one, else
  // bytes (common/tokenizer/job_tokenizer.h). Token files are read as they
  // are either way.
  std::string tokenizer;
  int stage = 3;                  // ZeRO stage 0..3.
  int64_t steps = 300;            // Optimizer steps to run in total.
  int global_batch = 16;          // Sequences per optimizer step, all ranks together.
  int micro_batch = 4;            // Sequences per forward/backward on one rank.
  std::vector<std::string> data;  // Text files or directories; empty = defaults.
  uint64_t seed = 1234;           // Initialisation and data order.
  DType compute_dtype = DType::kFp32;
  DType reduce_dtype = DType::kFp32;
  double lr = 3e-3;           // Peak learning rate.
  int64_t warmup_steps = 20;  // Linear warm-up, then cosine decay to lr/10.
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double max_grad_norm = 1.0;  // <= 0 disables clipping.
  int64_t eval_every = 50;     // Validation loss every this many steps (0 = only at end).
  // A short text sampled from the model every this many steps (0 = never),
  // `sample_tokens` long, after `sample_prompt` (empty: the model's BOS, or
  // a newline for the byte-level presets); in the step log and on the
  // launch's console, as llm.c prints its samples.
  int64_t sample_every = 0;
  int sample_tokens = 32;
  std::string sample_prompt;
  int eval_batches = 4;                          // Global batches per validation estimate.
  std::string log_path;                          // JSONL step log written by rank 0 ("" = none).
  int threads = 1;                               // Compute threads per worker.
  DeviceChoice device = DeviceChoice::kCpu;      // common/job_choices.h
  BackendChoice backend = BackendChoice::kAuto;  // common/job_choices.h
  std::string checkpoint_dir;         // Where the coordinator stores checkpoints ("" = none).
  int64_t checkpoint_every = 0;       // Save every this many steps (0 = never).
  bool resume = false;                // Start from the latest committed checkpoint.
  int64_t resume_step = -1;           // Start from this step's checkpoint (-1 = latest).
  double collective_timeout_s = 120;  // Longest wait for one collective or rendezvous, seconds.
  double checkpoint_timeout_s = 600;  // Longest checkpoint save or restore transfer, seconds.
  double rpc_timeout_s = 30;          // Deadline of one control RPC (checkpoint lookup), seconds.
  double trigger_poll_timeout_s =
      5;  // Deadline of rank 0's background checkpoint-now poll, seconds.
  // Peer redundancy: 1 = each rank also keeps its ring neighbour's
  // optimizer shard (host memory), so one lost rank is rebuilt live.
  int redundancy = 0;
  int64_t redundancy_every = 1;  // Refresh the copies every this many steps.
  // Offload (worker/offload): where each rank keeps its optimizer state,
  // device memory, host memory or files under offload_dir (NVMe);
  // offload_params kNvme (stage 3: parameter shards in files under
  // offload_dir, read offload_prefetch units ahead of their all-gather,
  // 0..64). Results do not depend on where the state lives; a worker's own
  // --offload-* flags override these.
  OptimizerOffload offload_optimizer = OptimizerOffload::kNone;
  ParamsOffload offload_params = ParamsOffload::kNone;
  std::string offload_dir;
  int offload_prefetch = 2;
  // Stage 3: units all-gathered ahead of their use, in the order the
  // previous step used them (worker/engine/sharded_engine.h), 0..64. Every
  // rank must use the same value (it fixes the collective sequence), so it
  // is the job's only: no worker flag overrides it.
  int gather_prefetch = 1;
  // Stages 2-3: units' collectives fused into buckets of up to this many
  // MiB (worker/engine/sharded_engine.h "buckets"), in [0, 4096]; 0 = one
  // unit per collective. 25, as PyTorch DDP's bucket_cap_mb: a large
  // model's units (a GPT-2 block in bf16 is 14 MB) are still gathered one
  // per collective, and their gradients wait one bracket for the next
  // unit's before one reduce-scatter; a small model's share a few. The
  // job's only, as gather_prefetch.
  double bucket_mib = 25;
  // What the model keeps for backward (common/job_choices.h): every block's
  // activations, or each block's input with its forward recomputed in
  // backward. Results do not depend on it.
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::kNone;
  // Failures the job tolerates (a lost member or a failed collective, each
  // ending a generation; joins and graceful leaves are not failures). The
  // coordinator counts them and fails the job at one more. In [0, 1e6].
  int64_t max_failures = kDefaultMaxFailures;
  static constexpr int64_t kDefaultMaxFailures = 20;

  absl::Duration collective_timeout() const { return absl::Seconds(collective_timeout_s); }
  // The job starts from a model directory's weights (served by the
  // coordinator's checkpoint service) rather than a random init.
  bool loads_model_weights() const { return !model_desc.empty() && init == ModelInit::kPretrained; }
  int64_t bucket_bytes() const { return BucketBytes(bucket_mib); }
  // --bucket-mib's MiB in bytes (launch's job and plan alike).
  static int64_t BucketBytes(double mib) { return static_cast<int64_t>(mib * (1 << 20)); }
  absl::Duration checkpoint_timeout() const { return absl::Seconds(checkpoint_timeout_s); }
  absl::Duration rpc_timeout() const { return absl::Seconds(rpc_timeout_s); }
  absl::Duration trigger_poll_timeout() const { return absl::Seconds(trigger_poll_timeout_s); }

  // INVALID_ARGUMENT naming the field for any out-of-range value.
  absl::Status Validate() const;
  std::string ToJson() const;
  // Missing fields keep their defaults; unknown fields are an error.
  static absl::StatusOr<JobConfig> FromJson(const std::string& json);
};

// The job config a coordinator serves: `json` validated (errors as
// FromJson, so a typo fails at the coordinator, not in every worker), and
// the coordinator's --checkpoint-dir filled in when the job names none, so
// its workers save there, and model_desc filled in from a model directory
// (common/model/job_model.h; its errors: an unknown preset, a config.json key
// zeroshard does not support). Text that needs no change is returned as
// given; "" (keep the persisted config) stays "".
absl::StatusOr<std::string> PrepareServedJobConfig(const std::string& json,
                                                   const std::string& checkpoint_dir);

// Learning rate at `step` (0-based): linear warm-up then cosine to lr/10.
double LearningRateAt(const JobConfig& config, int64_t step);

}  // namespace zeroshard
