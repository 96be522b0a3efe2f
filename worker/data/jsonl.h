// JSONL read one object a line (blank lines skipped), each with its place,
// "FILE:LINE", for errors: what the document reader (documents.h) and the
// fine-tuning pairs (fine_tune_samples.h) share.
//
// Thread safety: a reader is used from one thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace zeroshard {

class JsonlReader {
 public:
  // UNAVAILABLE naming the file when it cannot be opened.
  static absl::StatusOr<JsonlReader> Open(const std::string& file);
  // The next object into *obj and its "FILE:LINE" into *where: true; false
  // at the end. INVALID_ARGUMENT "FILE:LINE: not a JSON object" for a line
  // that is not one; UNAVAILABLE naming the file on a read error.
  absl::StatusOr<bool> Next(nlohmann::json* obj, std::string* where);
  int64_t read_bytes() const { return read_bytes_; }

 private:
  std::unique_ptr<std::ifstream> in_;
  std::string file_;
  int64_t line_ = 0;
  int64_t read_bytes_ = 0;
};

// The string field `key` of `obj`, invalid UTF-8 replaced (ToValidUtf8).
// INVALID_ARGUMENT "WHERE: no string field "key"" when it has none.
absl::StatusOr<std::string> JsonlString(const nlohmann::json& obj, const std::string& key,
                                        const std::string& where);

}  // namespace zeroshard
