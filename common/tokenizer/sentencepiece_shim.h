// The few SentencePieceProcessor calls zeroshard makes, behind a header of
// standard types only. Debian's sentencepiece_processor.h (0.1.97) declares
// its own `absl::string_view` alias, which clashes with abseil's; so only
// sentencepiece_shim.cc includes it, and that file includes no abseil header.
//
// Thread safety: as SentencePieceProcessor's: const calls from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zeroshard::tokenizer {

class SentencePieceShim {
 public:
  // The model serialized in `bytes`; null with *error set when it does not
  // parse.
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
