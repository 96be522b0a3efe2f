// Text to token ids and back, for the vocabulary a model was trained with,
// with no Python at run time. Two kinds:
//   - HF tokenizer.json byte-level BPE (GPT-2, Llama 3, Qwen2/2.5/3,
//     SmolLM): hf_tokenizer.h, on PCRE2 and nlohmann-json (no Debian
//     package reads tokenizer.json);
//   - SentencePiece .model files (Llama 2, Mistral 7B v0.1, Gemma): through
//     Debian's libsentencepiece.
// LoadTokenizer finds either beside a model directory or takes a file.
//
// Ids are int32. Encode never adds BOS/EOS; Specials() says what the
// model's template adds around a text (tokenizer.json's post_processor, or
// tokenizer_config.json's add_bos_token / add_eos_token), and WithSpecials
// applies it.
//
// Thread safety: a Tokenizer is immutable after loading; Encode and Decode
// may run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zeroshard::tokenizer {

// The template's special tokens: `prefix` before every text, `suffix`
// after it; bos and eos as the model's config names them (-1: none).
struct SpecialTokens {
  int32_t bos = -1;
  int32_t eos = -1;
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The ids of `text`, which must be valid UTF-8 (INVALID_ARGUMENT naming
  // the byte offset otherwise). Strings of special tokens in the text become
  // their ids (HF's default); no BOS/EOS is added.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const = 0;
  // The bytes the ids stand for (special tokens as their text). A run of ids
  // can end inside a UTF-8 character; the bytes are returned as they are.
  // INVALID_ARGUMENT naming the first id the vocabulary has not.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;
  // One past the largest id (the embedding rows a model needs at least).
  virtual int32_t vocab_size() const = 0;
  // What the template adds; what BOS and EOS are.
  const SpecialTokens& specials() const { return specials_; }
  // The id of the token written `token` (a special token's text, or a
  // vocabulary entry's bytes); -1 when there is none.
  virtual int32_t IdOfToken(std::string_view token) const = 0;
  // "tokenizer.json (byte-level BPE, 128256 ids)" and the like, for logs.
  virtual std::string Describe() const = 0;

  // prefix + Encode(text) + suffix.
  absl::StatusOr<std::vector<int32_t>> EncodeWithSpecials(std::string_view text) const;

 protected:
  friend absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

  // Each byte one token, ids 0-255, no specials: the presets' vocabulary.
  std::unique_ptr<Tokenizer> ByteTokenizer();
  SpecialTokens specials_;
};

// The tokenizer at `path`: a tokenizer.json or a SentencePiece .model file,
// or a directory holding either (tokenizer.json preferred). A
// tokenizer_config.json beside it sets BOS/EOS and, where it says,
// add_bos_token / add_eos_token. NOT_FOUND when there is none;
// INVALID_ARGUMENT naming the file and the place when it does not parse or
// holds something unsupported.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// Each byte one token, ids 0-255, no specials: the presets' vocabulary.
std::unique_ptr<Tokenizer> ByteTokenizer();

}  // namespace zeroshard::tokenizer
