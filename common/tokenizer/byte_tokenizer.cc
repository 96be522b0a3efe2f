// ByteTokenizer: each byte one token (the presets' vocabulary of 256).
#include <string>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/tokenizer.h"

namespace zeroshard::tokenizer {
namespace {

class Bytes final : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (char c : text) ids.push_back(static_cast<uint8_t>(c));
    return ids;
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] > 255) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", ids[i], " (position ", i, ") is not a byte"));
      }
      out.push_back(static_cast<char>(ids[i]));
    }
    return out;
  }
  int32_t vocab_size() const override { return 256; }
  int32_t IdOfToken(std::string_view token) const override {
    return token.size() == 1 ? static_cast<uint8_t>(token[0]) : -1;
  }
  std::string Describe() const override { return "bytes (256 ids)"; }
};

}  // namespace

std::unique_ptr<Tokenizer> ByteTokenizer() { return std::make_unique<Bytes>(); }

}  // namespace zeroshard::tokenizer
