// The few SentencePieceProcessor calls zeroshard makes, answered by helper
// processes (zeroshard-sentencepiece, found beside the running program or
// at $ZEROSHARD_SENTENCEPIECE_HELPER; sentencepiece_protocol.h says why a
// process). Standard types only: Debian's sentencepiece_processor.h also
// declares an `absl::string_view` alias that clashes with abseil's, so only
// the helper includes it.
//
// Thread safety: const calls from any thread; concurrent calls get helpers
// of their own.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zeroshard::tokenizer {

class SentencePieceShim {
 public:
  // The model serialized in `bytes`, loaded by a first helper; null with
  // *error set when it does not parse or no helper can be started.
  static std::unique_ptr<SentencePieceShim> Load(const std::string& bytes, std::string* error);
  virtual ~SentencePieceShim() = default;
  // False with *error set on failure.
  virtual bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const = 0;
  virtual bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const = 0;
  virtual int PieceSize() const = 0;
  virtual int BosId() const = 0;  // -1: none.
  virtual int EosId() const = 0;  // -1: none.
  // The id of piece `piece`; -1 when the model has no such piece.
  virtual int IdOf(std::string_view piece) const = 0;
};

}  // namespace zeroshard::tokenizer
