// Includes sentencepiece_processor.h and no abseil header (see the .h).
#include "common/tokenizer/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

namespace zeroshard::tokenizer {
namespace {

class Shim final : public SentencePieceShim {
 public:
  bool Load(const std::string& bytes, std::string* error) {
    const auto s = sp_.LoadFromSerializedProto(bytes);
    if (!s.ok()) *error = s.ToString();
    return s.ok();
  }
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const override {
    const auto s = sp_.Encode(text, ids);
    if (!s.ok()) *error = s.ToString();
    return s.ok();
  }
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const override {
    const auto s = sp_.Decode(ids, text);
    if (!s.ok()) *error = s.ToString();
    return s.ok();
  }
  int PieceSize() const override { return sp_.GetPieceSize(); }
  int BosId() const override { return sp_.bos_id(); }
  int EosId() const override { return sp_.eos_id(); }
  int IdOf(std::string_view piece) const override {
    const int id = sp_.PieceToId(piece);
    return sp_.IdToPiece(id) == piece ? id : -1;  // Unknown pieces map to unk.
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<SentencePieceShim> SentencePieceShim::Load(const std::string& bytes,
                                                           std::string* error) {
  auto shim = std::make_unique<Shim>();
  if (!shim->Load(bytes, error)) return nullptr;
  return shim;
}

}  // namespace zeroshard::tokenizer
