// `zeroshard plan`: sizes a run before it starts. For every stage x
// activation checkpointing x optimizer offload choice it prints the
// predicted peak memory per rank by kind, the traffic and communication
// time per step and whether it fits, then the recommendation
// (common/run_plan.h, the model launch and the engine use too).
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/link_measure.h"
#include "cli/plan_format.h"
#include "common/dtype.h"
#include "common/model/job_config.h"
#include "common/model/job_model.h"
#include "common/model/model_config.h"
#include "worker/device/device_factory.h"
#include "worker/model/model_plan.h"

namespace zeroshard::cli {
namespace {

struct PlanOptions {
  std::string model;
  int layers = 0, width = 0, heads = 0, ctx = 0, vocab = 256;
  std::string params;
  int workers = 1;
  std::string device = "auto";  // cpu | cuda | auto (cuda when --device-memory is given).
  int64_t device_memory = 0, host_memory = 0, nvme = 0;
  std::string link_bandwidth;
  std::string link_backend = "auto";  // auto | shm | gloo: what `measure` runs.
  int micro_batch = 4, seq_len = 0, global_batch = 0;
  std::string compute_dtype = "fp32", reduce_dtype = "fp32";
  double bucket_mib = JobConfig{}.bucket_mib;  // As launch's default.
  bool json = false;
};

// What --link-bandwidth measure runs. auto: what a local `zeroshard launch`
// uses (shm on the CPU); Gloo for a GPU plan, whose NCCL links no loopback
// measure stands for.
std::string LinkBackend(const PlanOptions& o, bool cuda) {
  if (o.link_backend != "auto") return o.link_backend;
  return cuda ? "gloo" : "shm";
}

// "7e9", "7B", "350M", "1.5b", "7000000000": a parameter count.
std::optional<int64_t> ParseCount(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'k':
    case 'K':
      scale = 1e3;
      break;
    case 'm':
    case 'M':
      scale = 1e6;
      break;
    case 'b':
    case 'B':
    case 'g':
    case 'G':
      scale = 1e9;
      break;
    case 't':
    case 'T':
      scale = 1e12;
      break;
    default:
      break;
  }
  if (scale != 1) digits.pop_back();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(digits, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != digits.size() || !(value * scale >= 0) || value * scale > 1e15) return std::nullopt;
  return static_cast<int64_t>(std::llround(value * scale));
}

int Bad(const std::string& flag, const std::string& why) {
  std::cerr << "zeroshard plan: " << flag << ": " << why << "\n";
  return 2;
}

// Fills `m` from the flags; 0, or the exit code of a bad value.
int ResolveMachine(const PlanOptions& o, PlanMachine& m) {
  m.workers = o.workers;
  m.cuda = o.device == "cuda" || (o.device == "auto" && o.device_memory > 0);
  if (m.cuda && o.device_memory <= 0)
    return Bad("--device-memory", "needed for --device cuda (e.g. 80GB)");
  m.device_memory = o.device_memory;
  m.nvme = o.nvme;
  m.host_memory = o.host_memory;
  if (m.host_memory == 0) {  // This machine's, as launch would see it.
    auto cpu = CreateDevice({"cpu", -1, 1});
    if (cpu.ok()) {
      if (auto info = (*cpu)->memory_info(); info.ok()) m.host_memory = info->free_bytes;
    }
  }
  if (o.link_bandwidth == "measure") {
    absl::StatusOr<double> bw = MeasureLoopbackBusBandwidth(LinkBackend(o, m.cuda));
    if (!bw.ok()) return Bad("--link-bandwidth", std::string(bw.status().message()));
    m.link_bytes_per_second = *bw;
  } else if (!o.link_bandwidth.empty()) {
    char* end = nullptr;
    const double gbps = std::strtod(o.link_bandwidth.c_str(), &end);
    if (end != o.link_bandwidth.c_str() + o.link_bandwidth.size() || !(gbps > 0) ||
        !std::isfinite(gbps)) {
      return Bad("--link-bandwidth",
                 absl::StrCat("'", o.link_bandwidth, "' (expected GB/s > 0 or 'measure')"));
    }
    m.link_bytes_per_second = gbps * 1e9;
  }
  return 0;
}

// A model with structure (--model or the dimensions) into `model` and `h`;
// with `cuda` its activations count the CUDA kernels' workspace.
int ResolveStructure(const PlanOptions& o, DType c, DType g, bool cuda, PlanModel& model,
                     PlanHeader& h) {
  ModelConfig config = Gpt2Config(o.vocab, o.layers, o.width, o.heads, o.ctx);
  if (!o.model.empty()) {
    absl::StatusOr<ModelConfig> resolved = ResolveModel(o.model, o.seq_len);
    if (!resolved.ok()) return Bad("--model", std::string(resolved.status().message()));
    config = *resolved;
  }
  if (absl::Status s = ValidateModelConfig(config); !s.ok()) {
    return Bad("--layers/--width/--heads/--ctx", std::string(s.message()));
  }
  const int seq = o.seq_len > 0 ? o.seq_len : config.n_ctx;
  if (seq > config.n_ctx)
    return Bad("--seq-len", absl::StrCat(seq, " is longer than the context ", config.n_ctx));
  const int global = o.global_batch > 0 ? o.global_batch : o.micro_batch * o.workers;
  h.micro_batches = MicroBatchesPerStep(global, o.workers, o.micro_batch);
  model = MakePlanModel(config, o.micro_batch, seq, h.micro_batches, c, g, cuda);
  model.bucket_bytes = JobConfig::BucketBytes(o.bucket_mib);
  h.params = model.params;
  h.worker_host_bytes = model.worker_host_bytes;
  h.micro_batch = o.micro_batch;
  h.bucket_mib = o.bucket_mib;
  h.seq_len = seq;
  h.model = absl::StrFormat("%s%d layers, width %d, %d heads, ctx %d, vocab %d (%d parameters)",
                            o.model.empty() ? "" : o.model + ": ", config.n_layer, config.n_embd,
                            config.n_head, config.n_ctx, config.vocab, model.params);
  return 0;
}

int RunPlanCommand(const PlanOptions& o) {
  const bool dims = o.layers || o.width || o.heads || o.ctx;
  if ((!o.model.empty()) + dims + (!o.params.empty()) != 1) {
    return Bad("--model",
               "give exactly one of --model, the dimensions (--layers --width --heads "
               "--ctx) or --params");
  }
  // CLI11 has checked the dtype names.
  const DType c = *ParseDType(o.compute_dtype), g = *ParseDType(o.reduce_dtype);
  PlanMachine m;
  if (int code = ResolveMachine(o, m); code != 0) return code;
  PlanHeader h;
  h.machine = &m;
  if (o.link_bandwidth == "measure") h.link_measured_on = LinkBackend(o, m.cuda);
  h.compute_dtype = o.compute_dtype;
  h.reduce_dtype = o.reduce_dtype;
  PlanModel model;
  if (!o.params.empty()) {
    std::optional<int64_t> psi = ParseCount(o.params);
    if (!psi)
      return Bad("--params", absl::StrCat("'", o.params, "' (expected a count: 7e9, 7B, 350M)"));
    model.params = h.params = *psi;
    model.compute_dtype = c;
    model.reduce_dtype = g;
    h.params_only = true;
    h.model = absl::StrCat(*psi, " parameters");
  } else if (int code = ResolveStructure(o, c, g, m.cuda, model, h); code != 0) {
    return code;
  }
  absl::StatusOr<RunPlan> plan = MakeRunPlan(model, m);
  if (!plan.ok()) return Bad("--model", std::string(plan.status().message()));
  std::cout << (o.json ? FormatPlanJson(h, *plan) : FormatPlanText(h, *plan));
  return 0;
}

void AddFlags(CLI::App* sub, PlanOptions& o) {
  sub->add_option("--model", o.model, ModelPresetFlagHelp());
  sub->add_option("--layers", o.layers, "transformer blocks")->check(CLI::Range(1, 100000));
  sub->add_option("--width", o.width, "embedding width (a multiple of --heads)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--heads", o.heads, "attention heads")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--ctx", o.ctx, "context length (tokens)")->check(CLI::Range(1, 1 << 24));
  sub->add_option("--vocab", o.vocab, "vocabulary size")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  sub->add_option("--params", o.params,
                  "a bare parameter count (7e9, 7B, 350M): only the "
                  "figures that depend on it");
  sub->add_option("--workers,-n", o.workers, "ranks (N)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--device", o.device, "cpu, cuda, or auto (cuda when --device-memory is given)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  sub->add_option("--device-memory", o.device_memory, "memory per GPU (80GiB, 141GB)")
      ->transform(CLI::AsSizeValue(true));
  sub->add_option("--host-memory", o.host_memory,
                  "host memory of the machine, all workers "
                  "(default: this machine's MemAvailable)")
      ->transform(CLI::AsSizeValue(true));
  sub->add_option("--nvme", o.nvme, "free NVMe space for offload files (default: none)")
      ->transform(CLI::AsSizeValue(true));
  sub->add_option("--link-bandwidth", o.link_bandwidth,
                  "bus bandwidth in GB/s, or 'measure' (an all-gather of 2 local ranks on "
                  "--link-backend)");
  sub->add_option("--link-backend", o.link_backend,
                  "what --link-bandwidth measure runs: shm, gloo, or auto (shm on the CPU, as "
                  "a local launch; gloo for cuda). Both measure this machine: for workers on "
                  "several hosts give the network's GB/s instead")
      ->check(CLI::IsMember({"auto", "shm", "gloo"}))
      ->capture_default_str();
  sub->add_option("--bucket-mib", o.bucket_mib,
                  "stages 2-3: collectives fused into buckets of up "
                  "to this many MiB (zeroshard launch --bucket-mib)")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  sub->add_option("--micro-batch", o.micro_batch, "sequences per forward/backward")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--global-batch", o.global_batch,
                  "sequences per step, all ranks (default: "
                  "micro-batch x workers)")
      ->check(CLI::Range(1, 1 << 24));
  sub->add_option("--seq-len", o.seq_len, "tokens per sequence (default: the context)")
      ->check(CLI::Range(1, 1 << 24));
  sub->add_option("--compute-dtype", o.compute_dtype, "fp32 or bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  sub->add_option("--reduce-dtype", o.reduce_dtype, "fp32 or bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  sub->add_flag("--json", o.json, "the same figures as JSON (bytes, seconds)");
}

}  // namespace

void RegisterPlanCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand(
      "plan",
      "predict memory and traffic of every ZeRO stage, checkpointing and offload choice, "
      "and recommend one");
  auto options = std::make_shared<PlanOptions>();
  AddFlags(sub, *options);
  commands.push_back({sub, [options] { return RunPlanCommand(*options); }});
}

}  // namespace zeroshard::cli
