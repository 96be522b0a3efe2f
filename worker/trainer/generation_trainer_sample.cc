// GenerationTrainer::Sample: llm.c-style samples during training.
#include <algorithm>

#include "common/status_macros.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/job_tokenizer.h"
#include "worker/model/token_sampler.h"
#include "worker/trainer/generation_trainer.h"

namespace zeroshard {

absl::StatusOr<std::string> GenerationTrainer::Sample(int64_t step) {
  const JobConfig& job = *ctx_.job;
  if (sample_tok_ == nullptr) {
    ZS_ASSIGN_OR_RETURN(sample_tok_, tokenizer::LoadJobTokenizer(job));
    if (sample_tok_ == nullptr) sample_tok_ = tokenizer::ByteTokenizer();
  }
  ZS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, sample_tok_->EncodeWithSpecials(job.sample_prompt));
  if (ids.empty())
    ids.push_back(sample_tok_->specials().eos >= 0 ? sample_tok_->specials().eos : '\n');
  const int vocab = ctx_.model_config->vocab, n_ctx = ctx_.model_config->n_ctx;
  for (int32_t& id : ids) id = std::clamp(id, 0, vocab - 1);
  if (static_cast<int>(ids.size()) > n_ctx - 1) ids.resize(n_ctx - 1);
  const size_t prompt = ids.size();
  // Seeded by the job and the step: every rank draws the same tokens.
  TokenSampler sampler({.temperature = 1.0, .seed = job.seed ^ static_cast<uint64_t>(step)});
  std::vector<float> logits;
  engine_->BeginEvaluation();  // Forward only: gathers, no gradients.
  for (int k = 0; k < job.sample_tokens && static_cast<int>(ids.size()) < n_ctx; ++k) {
    const int T = static_cast<int>(ids.size());
    if (absl::Status s = model_->Logits(ids.data(), 1, T, *hooks_, &logits); !s.ok()) {
      engine_->EndEvaluation().IgnoreError();  // The pass's error is the one to report.
      return s;
    }
    ids.push_back(sampler.Next(
        absl::MakeConstSpan(logits).subspan(static_cast<size_t>(T - 1) * vocab, vocab)));
  }
  ZS_RETURN_IF_ERROR(engine_->EndEvaluation());
  std::string text;
  for (size_t i = prompt; i < ids.size(); ++i) {
    // Ids past the tokenizer's vocabulary (padding rows) have no text.
    if (absl::StatusOr<std::string> piece = sample_tok_->Decode({ids[i]}); piece.ok())
      text += *piece;
  }
  return tokenizer::ToValidUtf8(text);
}

}  // namespace zeroshard
