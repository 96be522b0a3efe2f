// `zeroshard generate`: text from a Hugging Face model directory (its
// config.json, safetensors and tokenizer) or a zeroshard checkpoint (its
// job's model; the tokenizer the job read its text with, else bytes for the
// presets), on the CPU or a GPU (--device): the prompt is
// encoded with the model's template (BOS where it has one), then one token
// at a time is chosen (worker/model/token_sampler.h) and printed as soon as
// it completes a UTF-8 character, until EOS, --max-new-tokens, or the
// model's context.
//
// The prompt runs once (prefill), then each token alone against the KV
// cache of the earlier positions (worker/model/kv_decoder.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "common/formats/hf_weights.h"
#include "common/model/hf_model_config.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/incremental_decode.h"
#include "common/tokenizer/job_tokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "server/checkpoint/checkpoint_model.h"
#include "worker/device/device_factory.h"
#include "worker/model/kv_decoder.h"
#include "worker/model/model_kernels.h"
#include "worker/model/token_sampler.h"

namespace zeroshard::cli {
namespace {

struct GenerateOptions {
  std::string model, checkpoint, tokenizer, prompt, prompt_file;
  int max_new_tokens = 64;
  SamplingOptions sampling;
  bool ids = false;            // Print the generated ids (one line) instead of text.
  std::string device = "cpu";  // cpu | cuda | auto (DeviceOptions::kind).
};

// The decoder on the chosen device; `device` and `kernels` keep what it
// runs on alive.
absl::StatusOr<std::unique_ptr<KvDecoder>> MakeDecoder(const GenerateOptions& o,
                                                       const ModelConfig& config, int context,
                                                       const std::vector<std::vector<float>>& units,
                                                       std::unique_ptr<Device>* device,
                                                       ModelKernels* kernels) {
  ZS_ASSIGN_OR_RETURN(*device, CreateDevice({.kind = o.device}));
  DecodeTarget target{.device = device->get(), .positions = context};
  if ((*device)->kind() != DeviceKind::kCpu) {
    ZS_ASSIGN_OR_RETURN(*kernels, CreateModelKernels(**device, config));
    target.kernels = kernels->kernels;
  }
  std::cerr << "generate: on " << (*device)->name() << "\n";
  return CreateKvDecoder(config, units, target);
}

absl::StatusOr<std::vector<std::vector<float>>> LoadUnits(const std::string& dir,
                                                          const ModelConfig& config) {
  const std::vector<UnitSpec> specs = ModelUnits(config);
  ZS_ASSIGN_OR_RETURN(const HfWeights weights, HfWeights::OpenFor(dir, specs));
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, MakeShardPlan(specs, 1, 1));
  return weights.ReadWholeUnits(plan);
}

absl::StatusOr<std::string> PromptText(const GenerateOptions& o) {
  if (o.prompt_file.empty()) return o.prompt;
  std::ifstream in(o.prompt_file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(o.prompt_file, ": cannot be opened"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes what `text` holds past `*printed` bytes as text: whole characters,
// U+FFFD for each maximal invalid subpart (as HF's decode), and, unless
// `final`, nothing yet of a character the next token may complete.
void Stream(const std::string& text, size_t* printed, bool final) {
  std::string out;
  *printed += tokenizer::AppendValidUtf8(std::string_view(text).substr(*printed), final, &out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

// Prefill, then a token at a time until EOS, the budget or the context.
absl::Status Run(const GenerateOptions& o, const ModelConfig& config, int context,
                 const std::vector<std::vector<float>>& units, const tokenizer::Tokenizer& tok,
                 std::vector<int32_t> ids) {
  std::unique_ptr<Device> device;
  ModelKernels kernels;
  ZS_ASSIGN_OR_RETURN(const std::unique_ptr<KvDecoder> decoder,
                      MakeDecoder(o, config, context, units, &device, &kernels));
  TokenSampler sampler(o.sampling);
  const size_t prompt_len = ids.size();
  std::vector<float> logits;
  // The completion's text as it continues the prompt's: what Decode of
  // prompt and completion adds to Decode of the prompt (a SentencePiece
  // word's space survives, the first one's too; a character split over ids
  // is whole).
  tokenizer::IncrementalDecoder text(tok);
  text.ContinueAfter(ids);
  std::string out;
  size_t printed = 0;
  const absl::Time start = absl::Now();
  ZS_RETURN_IF_ERROR(decoder->Append(ids, &logits));
  const absl::Time prefilled = absl::Now();
  for (;;) {
    const int32_t next = sampler.Next(logits);
    ids.push_back(next);
    if (next == tok.specials().eos) break;
    if (!o.ids) {
      // An id past the tokenizer's vocabulary (a model's padding rows) has
      // no text: it prints nothing, as HF's decode skips it.
      const absl::StatusOr<std::string> piece = text.Append({next});
      if (piece.ok()) out += *piece;
      Stream(out, &printed, /*final=*/false);
    }
    if (static_cast<int>(ids.size()) >= context ||
        static_cast<int>(ids.size() - prompt_len) >= o.max_new_tokens) {
      break;
    }
    ZS_RETURN_IF_ERROR(decoder->Append({next}, &logits));
  }
  if (absl::StatusOr<std::string> rest = text.Finish(); rest.ok()) out += *rest;
  Stream(out, &printed, /*final=*/true);
  const size_t made = ids.size() - prompt_len;
  if (o.ids) {
    for (size_t i = prompt_len; i < ids.size(); ++i)
      std::cout << (i > prompt_len ? " " : "") << ids[i];
  }
  std::cout << "\n";
  std::cerr << absl::StrFormat(
      "generate: prompt %d tokens in %.1f ms, then %d tokens at %.2f ms/token\n", prompt_len,
      absl::ToDoubleMilliseconds(prefilled - start), made,
      absl::ToDoubleMilliseconds(absl::Now() - prefilled) / std::max<size_t>(made, 1));
  return absl::OkStatus();
}

// What generation runs: the model's description and weights, the tokenizer.
struct Source {
  ModelConfig config;
  std::vector<std::vector<float>> units;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  int max_positions = 0;  // Positions the model can take.
};

absl::StatusOr<Source> FromModelDir(const GenerateOptions& o) {
  Source src;
  ZS_ASSIGN_OR_RETURN(src.tok,
                      tokenizer::LoadTokenizer(o.tokenizer.empty() ? o.model : o.tokenizer));
  ZS_ASSIGN_OR_RETURN(src.config, ReadHfModelConfig(o.model, 0));
  src.max_positions = src.config.max_positions;
  return src;
}

absl::StatusOr<Source> FromCheckpoint(const GenerateOptions& o) {
  ZS_ASSIGN_OR_RETURN(server::CheckpointModel m, server::ReadCheckpointModel(o.checkpoint));
  Source src;
  JobConfig job = m.job;
  if (!o.tokenizer.empty()) job.tokenizer = o.tokenizer;
  ZS_ASSIGN_OR_RETURN(src.tok, tokenizer::LoadJobTokenizer(job));
  if (src.tok == nullptr) src.tok = tokenizer::ByteTokenizer();
  src.config = m.config;
  src.units = std::move(m.units);
  // Rotary positions reach past training's sequence; learned ones do not.
  src.max_positions = src.config.is_llama() && src.config.max_positions > 0
                          ? src.config.max_positions
                          : src.config.n_ctx;
  return src;
}

absl::Status Generate(const GenerateOptions& o) {
  if (o.model.empty() == o.checkpoint.empty()) {
    return absl::InvalidArgumentError("give --model DIR or --checkpoint DIR");
  }
  ZS_ASSIGN_OR_RETURN(Source src, o.model.empty() ? FromCheckpoint(o) : FromModelDir(o));
  const tokenizer::Tokenizer* tok = src.tok.get();
  ZS_ASSIGN_OR_RETURN(const std::string text, PromptText(o));
  ZS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->EncodeWithSpecials(text));
  // The cache holds the prompt and the new tokens, up to the model's
  // positions.
  const int context =
      std::min<int>(src.max_positions, static_cast<int>(ids.size()) + o.max_new_tokens);
  if (ids.empty() || static_cast<int>(ids.size()) >= context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt is ", ids.size(), " tokens; the model's context holds ", src.max_positions));
  }
  // The cache's positions: the context for the llama family (rotary: any
  // length); learned positions are parameters, so the gpt2 family keeps its
  // own (the context is at most that).
  ModelConfig config = src.config;
  if (config.is_llama()) config.n_ctx = context;
  if (!o.model.empty()) {
    ZS_ASSIGN_OR_RETURN(config, ReadHfModelConfig(o.model, context));
    ZS_ASSIGN_OR_RETURN(src.units, LoadUnits(o.model, config));
  }
  return Run(o, config, context, src.units, *tok, std::move(ids));
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand(
      "generate", "text from a Hugging Face model directory, printed as it is produced");
  auto o = std::make_shared<GenerateOptions>();
  sub->add_option("--model", o->model, "a Hugging Face model directory");
  sub->add_option("--checkpoint", o->checkpoint,
                  "a checkpoint (or a checkpoint dir: its latest) instead of --model");
  sub->add_option("--tokenizer", o->tokenizer, "the tokenizer (default: the model directory's)");
  sub->add_option("--prompt", o->prompt, "the prompt text");
  sub->add_option("--prompt-file", o->prompt_file, "a file holding the prompt");
  sub->add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--temperature", o->sampling.temperature, "0: greedy")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  sub->add_option("--top-k", o->sampling.top_k, "sample among the k likeliest (0: all)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--top-p", o->sampling.top_p, "sample within this probability mass")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--seed", o->sampling.seed, "the sampling seed")->capture_default_str();
  sub->add_flag("--ids", o->ids, "print the generated token ids instead of text");
  sub->add_option("--device", o->device, "where the model runs (auto: a GPU when one is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  commands.push_back({sub, [o] {
                        const absl::Status s = Generate(*o);
                        if (s.ok()) return 0;
                        std::cerr << "zeroshard generate: " << s.message() << "\n";
                        return 2;
                      }});
}

}  // namespace zeroshard::cli
