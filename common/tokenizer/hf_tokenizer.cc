#include "common/tokenizer/hf_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/tokenizer/added_tokens.h"
#include "common/tokenizer/bpe.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace zeroshard::tokenizer {
namespace {

using nlohmann::json;

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(bool nfc, std::unique_ptr<PreTokenizer> pre, std::unique_ptr<BpeModel> bpe,
              std::vector<AddedToken> added)
      : nfc_(nfc), pre_(std::move(pre)), bpe_(std::move(bpe)), added_(std::move(added)) {
    limit_ = bpe_->id_limit();
    for (const AddedToken& t : added_.tokens()) {
      limit_ = std::max(limit_, t.id + 1);
      // HF's ByteLevel decoder unmaps a token's characters where it can and
      // keeps its UTF-8 otherwise; added tokens are written unmapped.
      added_bytes_[t.id] = UnmapBytes(t.content).value_or(t.content);
      added_ids_[t.content] = t.id;
    }
  }
  void SetSpecials(SpecialTokens s) { specials_ = std::move(s); }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override {
    if (const size_t good = ValidUtf8Prefix(text); good != text.size()) {
      return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", good));
    }
    std::vector<Segment> segments;
    added_.Split(text, &segments);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    std::vector<Piece> pieces;
    PieceStorage storage;
    for (const Segment& seg : segments) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      std::string normalized;
      ZS_ASSIGN_OR_RETURN(std::string_view plain, Normalize(seg.text, &normalized));
      pieces.assign(1, plain);
      pre_->Run(&pieces, &storage);
      for (Piece p : pieces) bpe_->EncodeWord(p, &ids);
      storage.clear();
    }
    return ids;
  }

  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (auto it = added_bytes_.find(ids[i]); it != added_bytes_.end()) {
        out += it->second;
      } else if (const std::string* bytes = bpe_->TokenBytes(ids[i])) {
        out += *bytes;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", ids[i], " (position ", i, ") is not in the vocabulary"));
      }
    }
    return out;
  }

  int32_t vocab_size() const override { return limit_; }
  int32_t IdOfToken(std::string_view token) const override {
    if (auto it = added_ids_.find(absl::string_view(token.data(), token.size()));
        it != added_ids_.end()) {
      return it->second;
    }
    return bpe_->IdOf(token);
  }
  std::string Describe() const override {
    return absl::StrCat("tokenizer.json (byte-level BPE, ", limit_, " ids, ",
                        added_.tokens().size(), " added tokens)");
  }

 private:
  // NFC where the tokenizer asks for it (utf8proc); else the text itself.
  absl::StatusOr<std::string_view> Normalize(std::string_view text, std::string* buffer) const {
    if (!nfc_) return text;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) {
      return absl::InvalidArgumentError(absl::StrCat("NFC: ", utf8proc_errmsg(n)));
    }
    buffer->assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return std::string_view(*buffer);
  }

  bool nfc_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  AddedTokenSplitter added_;
  int32_t limit_ = 0;
  absl::flat_hash_map<int32_t, std::string> added_bytes_;
  absl::flat_hash_map<std::string, int32_t> added_ids_;
};

absl::StatusOr<bool> ParseNormalizer(const json& spec) {
  if (spec.is_null()) return false;
  const std::string type = spec.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence" && spec.at("normalizers").empty()) return false;
  if (type == "Sequence" && spec.at("normalizers").size() == 1) {
    return ParseNormalizer(spec.at("normalizers")[0]);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("normalizer \"", type, "\" is not supported (byte-level BPE uses none or NFC)"));
}

absl::StatusOr<std::unique_ptr<BpeModel>> ParseModel(const json& model) {
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    return absl::InvalidArgumentError(absl::StrCat("model.type \"", type, "\" is not supported"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      return absl::InvalidArgumentError(absl::StrCat("model.", key, " is not supported"));
    }
  }
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(model.at("vocab").size());
  for (const auto& [token, id] : model.at("vocab").items()) {
    std::optional<std::string> raw = UnmapBytes(token);
    if (!raw) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.vocab entry \"", token, "\" is not byte-level (only byte-level BPE is read)"));
    }
    vocab.emplace_back(std::move(*raw), id.get<int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(model.at("merges").size());
  for (const json& m : model.at("merges")) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("merges entry \"", s, "\" has no space"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {
      left = m.at(0).get<std::string>();
      right = m.at(1).get<std::string>();
    }
    std::optional<std::string> l = UnmapBytes(left), r = UnmapBytes(right);
    if (!l || !r) {
      return absl::InvalidArgumentError(
          absl::StrCat("merges entry \"", left, " ", right, "\" is not byte-level"));
    }
    merges.emplace_back(std::move(*l), std::move(*r));
  }
  return BpeModel::Create(vocab, merges, {.ignore_merges = model.value("ignore_merges", false)});
}

std::vector<AddedToken> ParseAdded(const json& list) {
  std::vector<AddedToken> out;
  for (const json& t : list) {
    out.push_back({t.at("id").get<int32_t>(), t.at("content").get<std::string>(),
                   t.value("single_word", false), t.value("lstrip", false),
                   t.value("rstrip", false), t.value("special", false)});
  }
  return out;
}

// The ids of a template's special-token name (TemplateProcessing's
// special_tokens map).
absl::StatusOr<std::vector<int32_t>> TemplateIds(const json& spec, const std::string& name) {
  const json& specials = spec.at("special_tokens");
  if (!specials.contains(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("post_processor: template names \"", name, "\" but special_tokens lacks it"));
  }
  return specials.at(name).at("ids").get<std::vector<int32_t>>();
}

absl::Status ParsePostProcessor(const json& spec, SpecialTokens* s) {
  if (spec.is_null()) return absl::OkStatus();
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    for (const json& p : spec.at("processors")) ZS_RETURN_IF_ERROR(ParsePostProcessor(p, s));
    return absl::OkStatus();
  }
  if (type == "RobertaProcessing") {
    s->prefix = {spec.at("cls").at(1).get<int32_t>()};
    s->suffix = {spec.at("sep").at(1).get<int32_t>()};
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return absl::InvalidArgumentError(
        absl::StrCat("post_processor \"", type, "\" is not supported"));
  }
  s->prefix.clear();
  s->suffix.clear();
  bool seen_sequence = false;
  for (const json& item : spec.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    ZS_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        TemplateIds(spec, item.at("SpecialToken").at("id").get<std::string>()));
    std::vector<int32_t>& side = seen_sequence ? s->suffix : s->prefix;
    side.insert(side.end(), ids.begin(), ids.end());
  }
  return absl::OkStatus();
}

absl::Status CheckDecoder(const json& spec) {
  const std::string type = spec.is_null() ? "none" : spec.value("type", "");
  if (type == "ByteLevel") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("decoder \"", type,
                   "\" is not byte-level: only byte-level BPE tokenizer.json is read "
                   "(for a SentencePiece vocabulary, give its tokenizer.model)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateHfTokenizer(const json& spec) {
  try {
    ZS_RETURN_IF_ERROR(CheckDecoder(spec.value("decoder", json())));
    ZS_ASSIGN_OR_RETURN(const bool nfc, ParseNormalizer(spec.value("normalizer", json())));
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> pre,
                        CreatePreTokenizer(spec.value("pre_tokenizer", json())));
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<BpeModel> bpe, ParseModel(spec.at("model")));
    SpecialTokens specials;
    ZS_RETURN_IF_ERROR(ParsePostProcessor(spec.value("post_processor", json()), &specials));
    auto tok = std::make_unique<HfTokenizer>(nfc, std::move(pre), std::move(bpe),
                                             ParseAdded(spec.value("added_tokens", json::array())));
    tok->SetSpecials(std::move(specials));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

}  // namespace zeroshard::tokenizer
