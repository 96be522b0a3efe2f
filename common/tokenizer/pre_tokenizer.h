// HF tokenizers' pre-tokenization for byte-level BPE: the text is cut into
// pieces ("words") that BPE then encodes one by one. The steps tokenizer.json
// names under "pre_tokenizer":
//   Split {pattern: {Regex|String}, behavior, invert}: a regex (PCRE2, with
//     the lookahead `\s+(?!\S)` GPT-2's and Llama 3's patterns use; HF uses
//     Oniguruma) or a literal cuts each piece; behavior Isolated, Removed,
//     MergedWithPrevious, MergedWithNext or Contiguous says what becomes of
//     the matches;
//   ByteLevel {add_prefix_space, use_regex}: with use_regex, GPT-2's pattern
//     as an Isolated Split; with add_prefix_space, a piece that does not
//     start with a space gets one;
//   Sequence {pretokenizers}: the steps in order.
// No Debian package reads tokenizer.json; this and hf_tokenizer.cc fill
// that gap on Debian's PCRE2 and nlohmann-json.
//
// Thread safety: immutable after Create; Run is safe from any thread.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace zeroshard::tokenizer {

// A piece of the text: a view into it, or into the storage a step made
// (ByteLevel's add_prefix_space puts a space before pieces that lack one).
using Piece = std::string_view;
using PieceStorage = std::deque<std::string>;  // Stable addresses.

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Cuts every piece of *pieces further, in place, in order; new text goes
  // into *storage, which must outlive the pieces. The text must be valid
  // UTF-8 (the caller checks).
  virtual void Run(std::vector<Piece>* pieces, PieceStorage* storage) const = 0;
};

// The steps of tokenizer.json's "pre_tokenizer" (null: no step, the text is
// one piece). INVALID_ARGUMENT naming the step for an unknown type, an
// unknown behavior or a pattern PCRE2 refuses (with its message and offset).
absl::StatusOr<std::unique_ptr<PreTokenizer>> CreatePreTokenizer(const nlohmann::json& spec);

}  // namespace zeroshard::tokenizer
