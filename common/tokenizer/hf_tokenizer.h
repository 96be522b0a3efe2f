// A tokenizer.json of byte-level BPE (HF tokenizers' format: "model" of
// type BPE with its vocab and merges, "added_tokens", "normalizer" (none or
// NFC, as Qwen2's), "pre_tokenizer" (pre_tokenizer.h), "post_processor"
// (TemplateProcessing, RobertaProcessing, ByteLevel, Sequence: the prefix
// and suffix of SpecialTokens) and a ByteLevel "decoder").
//
// How encoding works: valid UTF-8 is checked; added tokens are cut out
// (added_tokens.h); each plain stretch is normalized, pre-tokenized into
// pieces, and each piece BPE-encoded (bpe.h) from its raw bytes. The vocab
// and merges are kept as raw bytes (byte_level.h unmaps them at load), so
// no string is mapped while encoding.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json_fwd.hpp"

namespace zeroshard::tokenizer {

// INVALID_ARGUMENT naming the part of `spec` that is wrong or unsupported
// (a model type other than BPE, a decoder other than ByteLevel, a
// normalizer other than NFC, a vocab entry that is not byte-level, a merge
// outside the vocab).
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateHfTokenizer(const nlohmann::json& spec);

}  // namespace zeroshard::tokenizer
