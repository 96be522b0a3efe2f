#include "worker/data/documents.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer/byte_level.h"
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
    if (jsonl_) {
      nlohmann::json obj;
      std::string where;
      ZS_ASSIGN_OR_RETURN(const bool more, jsonl_->Next(&obj, &where));
      if (more) {
        ZS_ASSIGN_OR_RETURN(doc->text, JsonlString(obj, field_, where));
        doc->origin = where;
        return true;
      }
      read_bytes_ += jsonl_->read_bytes();
      jsonl_.reset();
    }
    if (next_file_ >= files_.size()) return false;
    const std::string& file = files_[next_file_++];
    if (absl::EndsWith(file, ".jsonl")) {
      ZS_ASSIGN_OR_RETURN(jsonl_, JsonlReader::Open(file));
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
