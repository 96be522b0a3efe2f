// Fine-tuning pairs: JSONL of {"prompt": ..., "completion": ...}, one a
// line, tokenized with the model's tokenizer. A sample's ids are the
// template's prefix (BOS where the model has one) + the prompt's + the
// completion's + the template's suffix, or EOS where the template adds none
// (so the model learns where an answer ends); the loss counts completion
// tokens only (LlamaFactory's, axolotl's and torchtune's instruction
// fine-tuning), from `counted_from` on.
//
// Thread safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"

namespace zeroshard {

struct FineTuneSample {
  std::vector<int32_t> ids;
  int32_t counted_from = 0;  // The first id the loss counts (as a target).
};

// True when `file` is a .jsonl whose first non-blank line is an object with
// a "prompt" field.
bool IsPromptCompletionFile(const std::string& file);

// The samples of `file`. INVALID_ARGUMENT naming FILE:LINE for a line that
// is not a JSON object, lacks a string "prompt" or "completion", or whose
// prompt leaves no completion token inside `context` tokens (a sample is
// truncated to context + 1 ids: context inputs, context targets).
absl::StatusOr<std::vector<FineTuneSample>> ReadPromptCompletion(const std::string& file,
                                                                 const tokenizer::Tokenizer& tok,
                                                                 int context);

// Inputs and targets (int32 [T] each) of one sample: ids truncated to T + 1,
// inputs ids[0..T) (0 past the end), targets ids[1..T] where counted, else
// kIgnoreTarget (-1). Returns how many targets count.
int64_t FillSample(const FineTuneSample& s, int T, int32_t* inputs, int32_t* targets);
// How many of a sample's targets count at context T.
int64_t CountedTargets(const FineTuneSample& s, int T);

}  // namespace zeroshard
