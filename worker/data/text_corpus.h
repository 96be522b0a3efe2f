// Training text for the reference model: files and directories read as raw
// bytes, each byte one token (vocabulary 256), concatenated in sorted path
// order, with a held-out validation split.
//
// Directories are walked recursively (symlinked directories are not
// followed); a file is skipped as binary when it holds a NUL byte or more
// than 1% control bytes other than tab, newline, CR, FF and VT (compiled
// .pyc, gzip'd docs, images). The validation split is the last
// `validation_fraction` of the concatenated bytes, so it never overlaps
// training text and depends only on the files, not on the world size.
//
// Thread-safe after Load: read-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

enum class Split : int { kTrain = 0, kValidation = 1 };

struct CorpusOptions {
  double validation_fraction = 0.05;  // In (0, 0.5].
  int64_t max_bytes = int64_t{256} << 20;  // Stop reading past this many bytes.
};

class TextCorpus {
 public:
  // Errors: NOT_FOUND naming the path that does not exist; INVALID_ARGUMENT
  // for no paths, a bad option (naming it), or when the paths hold no text
  // (naming them, with the number of binary files skipped); the I/O error
  // (naming the file) for an explicitly named file that cannot be read.
  static absl::StatusOr<TextCorpus> Load(const std::vector<std::string>& paths,
                                         const CorpusOptions& options = {});

  absl::string_view split(Split s) const;
  int64_t total_bytes() const { return static_cast<int64_t>(bytes_.size()); }
  const std::vector<std::string>& files() const { return files_; }  // Files read, in order.
  int skipped_binary_files() const { return skipped_binary_; }

 private:
  std::string bytes_;
  int64_t train_bytes_ = 0;  // [0, train_bytes_) train, the rest validation.
  std::vector<std::string> files_;
  int skipped_binary_ = 0;
};

// Real text present on every machine of this kind (Debian 12): the Python
// standard library's sources (/usr/lib/python3.<minor>, the newest present),
// else Debian's /usr/share/doc. Empty if neither exists.
std::vector<std::string> DefaultDataPaths();

}  // namespace zeroshard
