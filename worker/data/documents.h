// Documents for tokenization, read one at a time from text files,
// directories and JSONL: a text file is one document (invalid UTF-8
// replaced by U+FFFD, binary files skipped as the corpus skips them); a
// .jsonl file is one document per non-blank line, the line's `text_field`.
//
// Thread safety: a reader is used from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/jsonl.h"

namespace zeroshard {

struct Document {
  std::string text;
  std::string origin;  // "FILE" or "FILE:LINE", for errors.
};

class DocumentReader {
 public:
  // NOT_FOUND naming a path that does not exist.
  static absl::StatusOr<DocumentReader> Open(const std::vector<std::string>& paths,
                                             std::string text_field = "text");
  // The next document into *doc: true, or false at the end. INVALID_ARGUMENT
  // naming FILE:LINE for a JSONL line that is not a JSON object or lacks the
  // field (or holds a non-string there); the I/O error naming the file.
  absl::StatusOr<bool> Next(Document* doc);
  // Bytes of all input files, and of those read so far (for progress).
  int64_t total_bytes() const { return total_bytes_; }
  int64_t read_bytes() const { return read_bytes_ + (jsonl_ ? jsonl_->read_bytes() : 0); }

 private:
  std::vector<std::string> files_;
  std::string field_;
  size_t next_file_ = 0;
  std::optional<JsonlReader> jsonl_;  // The JSONL file being read.
  int64_t total_bytes_ = 0;
  int64_t read_bytes_ = 0;  // Of the files done.
};

}  // namespace zeroshard
