// The ids a document contributes to a token stream, one rule for every
// path that turns text into training tokens (`zeroshard tokenize`, and the
// corpus when a model's tokenizer reads text given to --data): the
// template's prefix + the document's ids + its suffix (Llama 3:
// <|begin_of_text|> first); where the template adds nothing, EOS after it
// (GPT-2, Qwen: <|endoftext|>), so documents stay apart.
//
// Thread safety: stateless; the tokenizer is shared read-only.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/data/documents.h"

namespace zeroshard {

// (*ids)[i] = document i's ids, encoded on `threads` threads taking
// documents in turn (the result does not depend on the thread count).
// INVALID_ARGUMENT naming the document's origin when its text cannot be
// encoded.
absl::Status EncodeDocuments(const tokenizer::Tokenizer& tok, absl::Span<const Document> docs,
                             int threads, std::vector<std::vector<int32_t>>* ids);

}  // namespace zeroshard
