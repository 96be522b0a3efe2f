#include "worker/data/documents.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer/byte_level.h"
#include "nlohmann/json.hpp"
#include "worker/data/data_files.h"

namespace zeroshard {
namespace fs = std::filesystem;

absl::StatusOr<DocumentReader> DocumentReader::Open(const std::vector<std::string>& paths,
                                                    std::string text_field) {
  DocumentReader r;
  r.field_ = std::move(text_field);
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("input '", path, "' does not exist"));
    }
    for (std::string& f : ListDataFiles(path)) {
      r.total_bytes_ += static_cast<int64_t>(fs::file_size(f, ec));
      r.files_.push_back(std::move(f));
    }
  }
  return r;
}

absl::StatusOr<bool> DocumentReader::Next(Document* doc) {
  for (;;) {
    if (jsonl_ != nullptr) {
      std::string line;
      while (std::getline(*jsonl_, line)) {
        ++line_;
        read_bytes_ += static_cast<int64_t>(line.size()) + 1;
        if (absl::StripAsciiWhitespace(line).empty()) continue;
        const std::string where = absl::StrCat(jsonl_name_, ":", line_);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
        }
        auto it = j.find(field_);
        if (it == j.end() || !it->is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": no string field \"", field_, "\""));
        }
        doc->text = tokenizer::ToValidUtf8(it->get<std::string>());
        doc->origin = where;
        return true;
      }
      if (jsonl_->bad()) return absl::UnavailableError(absl::StrCat(jsonl_name_, ": read error"));
      jsonl_.reset();
    }
    if (next_file_ >= files_.size()) return false;
    const std::string& file = files_[next_file_++];
    if (absl::EndsWith(file, ".jsonl")) {
      jsonl_ = std::make_unique<std::ifstream>(file, std::ios::binary);
      if (!*jsonl_) return absl::UnavailableError(absl::StrCat("cannot read '", file, "'"));
      jsonl_name_ = file;
      line_ = 0;
      continue;
    }
    ZS_ASSIGN_OR_RETURN(std::string text, ReadDataFile(file));
    read_bytes_ += static_cast<int64_t>(text.size());
    if (text.empty() || LooksBinary(text)) continue;
    doc->text = tokenizer::ToValidUtf8(text);
    doc->origin = file;
    return true;
  }
}

}  // namespace zeroshard
