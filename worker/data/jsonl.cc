#include "worker/data/jsonl.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/byte_level.h"

namespace zeroshard {

absl::StatusOr<JsonlReader> JsonlReader::Open(const std::string& file) {
  JsonlReader r;
  r.in_ = std::make_unique<std::ifstream>(file, std::ios::binary);
  if (!*r.in_) return absl::UnavailableError(absl::StrCat("cannot read '", file, "'"));
  r.file_ = file;
  return r;
}

absl::StatusOr<bool> JsonlReader::Next(nlohmann::json* obj, std::string* where) {
  for (std::string line; std::getline(*in_, line);) {
    ++line_;
    read_bytes_ += static_cast<int64_t>(line.size()) + 1;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    *where = absl::StrCat(file_, ":", line_);
    *obj = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (obj->is_discarded() || !obj->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(*where, ": not a JSON object"));
    }
    return true;
  }
  if (in_->bad()) return absl::UnavailableError(absl::StrCat(file_, ": read error"));
  return false;
}

absl::StatusOr<std::string> JsonlString(const nlohmann::json& obj, const std::string& key,
                                        const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no string field \"", key, "\""));
  }
  return tokenizer::ToValidUtf8(it->get<std::string>());
}

}  // namespace zeroshard
