// `zeroshard launch`: an embedded coordinator (or --coordinator) and N local
// worker processes training the reference model; a live progress line and a
// summary at the end. Ctrl-C stops every process.
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/launch_job.h"
#include "common/dtype.h"
#include "common/infra/cli.h"
#include "common/model/model_config.h"
#include "common/rpc/security_flags.h"
#include "worker/optim/adamw_isa.h"

namespace zeroshard::cli {
namespace {

void AddModelFlags(CLI::App* sub, JobConfig& c) {
  sub->add_option("--model", c.model, ModelPresetFlagHelp())->capture_default_str();
  AddEnumOption(sub, "--init", c.init, kModelInitWords,
                "a model directory's weights: pretrained (its safetensors) or random (its "
                "architecture from scratch)");
  sub->add_option("--seq-len", c.seq_len,
                  "tokens per training sequence for a model directory (0: its "
                  "max_position_embeddings, at most 1024)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_option("--tokenizer", c.tokenizer,
                  "how text in --data becomes tokens: a tokenizer.json, SentencePiece .model or "
                  "a directory holding one, or `bytes` (default: the model directory's own "
                  "tokenizer where it has one, else bytes)");
}

// Timeouts, and where the engine and its collectives run.
void AddTimeoutAndDeviceFlags(CLI::App* sub, JobConfig& c) {
  sub->add_option("--collective-timeout", c.collective_timeout_s,
                  "longest wait for one collective or rendezvous, seconds")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  sub->add_option("--checkpoint-timeout", c.checkpoint_timeout_s,
                  "longest checkpoint save or restore transfer, seconds")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  sub->add_option("--rpc-timeout", c.rpc_timeout_s,
                  "deadline of one control RPC to the coordinator, seconds")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  AddEnumOption(sub, "--device", c.device, kDeviceWords,
                "where each worker's engine runs: cpu, cuda, or auto (cuda where a GPU is "
                "visible; CUDA_VISIBLE_DEVICES and LOCAL_RANK respected: worker r uses GPU r "
                "mod the visible GPUs; more workers than GPUs needs --backend host-staged)");
  AddEnumOption(sub, "--backend", c.backend, kBackendWords,
                "collectives: gloo (TCP), shm (cpu, every worker on this host: shared "
                "memory), nccl, host-staged (several ranks on one GPU) or auto (nccl on cuda; "
                "on cpu shm with the embedded coordinator, else gloo)");
}

void AddJobFlags(CLI::App* sub, LaunchOptions& o) {
  JobConfig& c = o.job;
  sub->add_option("--workers,-n", o.workers, "local worker processes to start")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--stage", o.stage_flag,
                  "ZeRO stage: 0 (data parallel), 1, 2, 3, or auto (the lowest stage that fits "
                  "this machine's memory, by the model `zeroshard plan` prints)")
      ->check(CLI::IsMember({"0", "1", "2", "3", "auto"}))
      ->capture_default_str();
  sub->add_option("--steps", c.steps, "optimizer steps")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  AddModelFlags(sub, c);
  sub->add_option("--global-batch", c.global_batch, "sequences per step, all ranks together")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--micro-batch", c.micro_batch, "sequences per forward/backward on one rank")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--data", c.data, "text files or directories (default: Python's stdlib sources)");
  sub->add_option("--compute-dtype", o.compute_dtype, "compute copy dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  sub->add_option("--reduce-dtype", o.reduce_dtype, "gradient reduction dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  sub->add_option("--activation-checkpointing", o.activation_checkpointing,
                  "none, or blocks: keep only each block's input and recompute its forward in "
                  "backward (less activation memory, about a third more compute; same results)")
      ->capture_default_str();
  sub->add_option("--lr", c.lr, "peak learning rate")->capture_default_str();
  sub->add_option("--warmup-steps", c.warmup_steps, "linear warm-up steps")->capture_default_str();
  sub->add_option("--seed", c.seed, "seed for initialisation and data order")
      ->capture_default_str();
  sub->add_option("--sample-every", c.sample_every,
                  "print a short text sampled from the model every K steps (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--sample-tokens", c.sample_tokens, "tokens a sample runs to")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--sample-prompt", c.sample_prompt,
                  "text a sample starts from (default: BOS, or a newline for the presets)");
  sub->add_option("--eval-every", c.eval_every, "validation loss every K steps (0: at the end)")
      ->capture_default_str();
  sub->add_option("--log", c.log_path, "JSONL step log (default: RUN_DIR/steps.jsonl)");
  AddTimeoutAndDeviceFlags(sub, c);
}

// Where state lives and how collectives are batched (offload, prefetch,
// buckets).
void AddOffloadFlags(CLI::App* sub, LaunchOptions& o) {
  AddEnumOption(sub, "--offload-optimizer", o.job.offload_optimizer, kOptimizerOffloadWords,
                "where each rank keeps master weights and AdamW moments: none (device "
                "memory), host, or nvme (files under --offload-dir)");
  AddEnumOption(sub, "--offload-params", o.job.offload_params, kParamsOffloadWords,
                "none, or nvme (stage 3: each rank's parameter shards in files under "
                "--offload-dir, read ahead of their all-gather)");
  sub->add_option("--offload-dir", o.job.offload_dir, "directory for nvme offload files (scratch)");
  sub->add_option("--offload-prefetch", o.job.offload_prefetch,
                  "stage-3 parameter shards read this many units ahead (--offload-params nvme)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  sub->add_option("--gather-prefetch", o.job.gather_prefetch,
                  "stage 3: units (buckets, with --bucket-mib) all-gathered ahead of their use, in "
                  "the order the previous step used them (0 = gather each when it is needed)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  sub->add_option("--bucket-mib", o.job.bucket_mib,
                  "stages 2-3: units' all-gathers and reduce-scatters fused into buckets of up "
                  "to this many MiB, one collective each (0 = one per unit)")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
}

void AddRunFlags(CLI::App* sub, LaunchOptions& o) {
  sub->add_option("--threads", o.threads, "compute threads per worker (0: cores / workers)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  sub->add_option("--adamw-isa", o.adamw_isa, kAdamWIsaHelp)
      ->check(CLI::IsMember(std::vector<std::string>(kAdamWIsaNames.begin(), kAdamWIsaNames.end())))
      ->capture_default_str();
  sub->add_option("--coordinator", o.coordinator,
                  "use this coordinator HOST:PORT instead of an embedded one");
  // One set of files for both sides: the embedded coordinator serves
  // --tls-cert/--tls-key (mTLS with --tls-ca) and reads --token-file's
  // "role token" lines; the workers present the same certificate and the
  // file's first token (make that line a worker or admin token).
  AddClientSecurityFlags(*sub, &o.security);
  sub->add_option("--linger", o.linger_seconds,
                  "seconds the embedded coordinator keeps /metrics up after the job, for a last "
                  "scrape (default: 5 when --metrics-listen names a fixed port, else 0)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--metrics-listen", o.metrics_listen, "embedded coordinator's /metrics address")
      ->capture_default_str();
  sub->add_option("--run-dir", o.run_dir,
                  "directory for logs and state (default: runs/<time>); without --resume or "
                  "--resume-step an earlier job's state there is cleared");
  sub->add_option("--checkpoint-dir", o.job.checkpoint_dir, "where checkpoints are stored");
  sub->add_option("--checkpoint-every", o.job.checkpoint_every, "save a checkpoint every K steps")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--keep-checkpoints", o.keep_checkpoints,
                  "committed checkpoints kept, oldest deleted first (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--max-failures", o.job.max_failures,
                  "failures the job tolerates (lost workers, failed collectives; not joins or "
                  "leaves) before the coordinator fails it")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  sub->add_flag("--resume", o.job.resume, "resume from the latest committed checkpoint");
  sub->add_option("--redundancy", o.job.redundancy,
                  "1: each rank keeps its ring neighbour's optimizer shard, so a lost rank is "
                  "rebuilt without a checkpoint")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  sub->add_option("--redundancy-every", o.job.redundancy_every,
                  "refresh the neighbour copies every K steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--resume-step", o.job.resume_step, "resume from this step's checkpoint");
}

}  // namespace

void RegisterLaunchCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand(
      "launch", "train the reference model with an embedded coordinator and local workers");
  auto options = std::make_shared<LaunchOptions>();
  AddJobFlags(sub, *options);
  AddRunFlags(sub, *options);
  AddOffloadFlags(sub, *options);
  commands.push_back({sub, [options] { return RunLaunch(*options); }});
}

}  // namespace zeroshard::cli
