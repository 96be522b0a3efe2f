#include "common/tokenizer/sentencepiece_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/sentencepiece_shim.h"

namespace zeroshard::tokenizer {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<SentencePieceShim> sp) : sp_(std::move(sp)) {
    specials_.bos = sp_->BosId();
    specials_.eos = sp_->EosId();
    if (specials_.bos >= 0) specials_.prefix = {specials_.bos};
  }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override {
    if (const size_t good = ValidUtf8Prefix(text); good != text.size()) {
      return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", good));
    }
    std::vector<int> ids;
    std::string error;
    if (!sp_->Encode(text, &ids, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("sentencepiece: ", error));
    }
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override {
    std::vector<int> in(ids.begin(), ids.end());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] < 0 || in[i] >= sp_->PieceSize()) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", in[i], " (position ", i, ") is not in the vocabulary"));
      }
    }
    std::string text, error;
    if (!sp_->Decode(in, &text, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("sentencepiece: ", error));
    }
    return text;
  }

  int32_t vocab_size() const override { return sp_->PieceSize(); }
  int32_t IdOfToken(std::string_view token) const override { return sp_->IdOf(token); }
  std::string Describe() const override {
    return absl::StrCat("SentencePiece model (", sp_->PieceSize(), " ids)");
  }

 private:
  std::unique_ptr<SentencePieceShim> sp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceTokenizer(const std::string& bytes,
                                                                        const std::string& path) {
  std::string error;
  std::unique_ptr<SentencePieceShim> sp = SentencePieceShim::Load(bytes, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a SentencePiece model: ", error));
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
}

}  // namespace zeroshard::tokenizer
