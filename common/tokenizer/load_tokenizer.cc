// LoadTokenizer: which file, its kind, and tokenizer_config.json's word on
// BOS and EOS.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer/hf_tokenizer.h"
#include "common/tokenizer/sentencepiece_tokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace zeroshard::tokenizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

absl::StatusOr<std::string> ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot be opened"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One line naming the file and the byte where parsing stopped.
absl::StatusOr<json> ParseJson(const fs::path& path) {
  ZS_ASSIGN_OR_RETURN(const std::string text, ReadAll(path));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": not JSON at byte ", e.byte, ": ", e.what()));
  }
}

// A special token as tokenizer_config.json writes it: a string, an object
// with "content", or null.
std::string TokenText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

void SetFlag(std::vector<int32_t>* side, int32_t id, bool on, bool front) {
  std::erase(*side, id);
  if (on && id >= 0) side->insert(front ? side->begin() : side->end(), id);
}

// BOS/EOS by name, and add_bos_token / add_eos_token where the config has
// them.
absl::Status ApplyConfig(const fs::path& path, const Tokenizer& tok, SpecialTokens* s) {
  ZS_ASSIGN_OR_RETURN(const json cfg, ParseJson(path));
  if (!cfg.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not an object"));
  for (auto [key, slot] : {std::pair{"bos_token", &s->bos}, std::pair{"eos_token", &s->eos}}) {
    if (!cfg.contains(key)) continue;
    const std::string text = TokenText(cfg.at(key));
    if (text.empty()) continue;
    const int32_t id = tok.IdOfToken(text);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ": ", key, " \"", text, "\" is not in the vocabulary"));
    }
    *slot = id;
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    SetFlag(&s->prefix, s->bos, cfg["add_bos_token"].get<bool>(), true);
  }
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) {
    SetFlag(&s->suffix, s->eos, cfg["add_eos_token"].get<bool>(), false);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFile(const fs::path& file) {
  if (file.extension() == ".json") {
    ZS_ASSIGN_OR_RETURN(const json spec, ParseJson(file));
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = CreateHfTokenizer(spec);
    if (!tok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", tok.status().message()));
    }
    return tok;
  }
  ZS_ASSIGN_OR_RETURN(const std::string bytes, ReadAll(file));
  return CreateSentencePieceTokenizer(bytes, file.string());
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeWithSpecials(std::string_view text) const {
  ZS_ASSIGN_OR_RETURN(std::vector<int32_t> body, Encode(text));
  std::vector<int32_t> ids(specials_.prefix);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), specials_.suffix.begin(), specials_.suffix.end());
  return ids;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  fs::path file = path;
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    const fs::path json_file = file / "tokenizer.json", model_file = file / "tokenizer.model";
    if (fs::exists(json_file, ec)) {
      file = json_file;
    } else if (fs::exists(model_file, ec)) {
      file = model_file;
    } else {
      return absl::NotFoundError(
          absl::StrCat(path, ": no tokenizer.json or tokenizer.model (give --tokenizer PATH)"));
    }
  } else if (!fs::exists(file, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such tokenizer file"));
  }
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadFile(file));
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(config, ec)) ZS_RETURN_IF_ERROR(ApplyConfig(config, *tok, &tok->specials_));
  return tok;
}

}  // namespace zeroshard::tokenizer
