// A SentencePiece model file (Llama 2, Mistral 7B v0.1, Gemma) through
// Debian's libsentencepiece (Kudo and Richardson, 2018), not rewritten:
// Encode and Decode are SentencePieceProcessor's, so the ids are the
// Python sentencepiece package's (which HF's slow tokenizers wrap).
// Strings such as "<s>" in the text are plain text, as there.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"

namespace zeroshard::tokenizer {

// The model serialized in `bytes` (a .model file's contents); `path` names
// it in errors. INVALID_ARGUMENT when it does not parse. BOS and EOS are the
// model's own (-1 where disabled); the prefix is BOS where there is one.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceTokenizer(const std::string& bytes,
                                                                        const std::string& path);

}  // namespace zeroshard::tokenizer
