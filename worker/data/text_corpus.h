// Training data: files and directories read either as text, each byte one
// token (the reference model's vocabulary of 256), or as token files
// (worker/data/token_file.h: llm.c shards, .npy of uint16/uint32), one id
// per token; concatenated in sorted path order, with a held-out validation
// split. Text and token files do not mix, nor token widths. JSONL of
// {"prompt", "completion"} pairs (worker/data/fine_tune_samples.h) is read,
// with a tokenizer, as fine-tuning samples instead: a corpus holds samples
// or a token stream, not both; the validation split is its last samples. A file named on
// its own as *.bin or *.npy is read as a token file whatever its header
// (a wrong one is an error); in a directory, the header decides.
//
// Directories are walked recursively (symlinked directories are not
// followed); a file is skipped as binary when it holds a NUL byte or more
// than 1% control bytes other than tab, newline, CR, FF and VT (compiled
// .pyc, gzip'd docs, images). The validation split is the last
// `validation_fraction` of the concatenated tokens, so it never overlaps
// training data and depends only on the files, not on the world size.
//
// Thread-safe after Load: read-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/data/fine_tune_samples.h"

namespace zeroshard {

enum class Split : int { kTrain = 0, kValidation = 1 };

struct CorpusOptions {
  double validation_fraction = 0.05;       // In (0, 0.5].
  int64_t max_bytes = int64_t{256} << 20;  // Stop reading past this many bytes.
  // With > 0, a token file's id at or above it is an error naming the file
  // and the token's index (the model's vocabulary).
  int64_t vocab_size = 0;
  // With one, text files (and .jsonl, a document a line) are tokenized
  // (worker/data/document_tokens.h: the ids `zeroshard tokenize` writes) on
  // `threads` threads; without, each byte is a token. Not owned.
  const tokenizer::Tokenizer* tokenizer = nullptr;
  int threads = 1;
  // Tokens per training sequence: a prompt/completion sample whose prompt
  // leaves no completion token inside it is an error naming the line.
  int context = 0;
};

// Tokens of one split as stored: `width` bytes each, little-endian (1: text
// bytes).
struct TokenView {
  const char* data = nullptr;
  int64_t count = 0;
  int width = 1;
  int32_t at(int64_t i) const;
};

class TextCorpus {
 public:
  // Errors: NOT_FOUND naming the path that does not exist; INVALID_ARGUMENT
  // for no paths, a bad option (naming it), when the paths hold no text
  // (naming them, with the number of binary files skipped), a token file
  // that is malformed or holds an id outside the vocabulary, or text mixed
  // with token files (naming the file); the I/O error (naming the file) for
  // an explicitly named file that cannot be read.
  static absl::StatusOr<TextCorpus> Load(const std::vector<std::string>& paths,
                                         const CorpusOptions& options = {});

  // The split's raw bytes (text: the text itself).
  absl::string_view split(Split s) const;
  TokenView tokens(Split s) const;
  // Fine-tuning samples of a split; empty for a token stream.
  absl::Span<const FineTuneSample> samples(Split s) const;
  bool fine_tuning() const { return !samples_.empty(); }
  int64_t total_bytes() const { return static_cast<int64_t>(bytes_.size()); }
  int token_width() const { return width_; }
  const std::vector<std::string>& files() const { return files_; }  // Files read, in order.
  int skipped_binary_files() const { return skipped_binary_; }

 private:
  // The ids of the file's documents (options.tokenizer's), as bytes of the
  // tokenizer's width.
  static absl::StatusOr<std::string> TokenizeFile(const std::string& file,
                                                  const CorpusOptions& options, int* width);
  // The file's data appended (at most `room` bytes, whole tokens), after
  // checking it matches the width of what came before.
  absl::Status Append(const std::string& file, int width, std::string_view data, int64_t room);

  // One file of the walk, by kind: prompt/completion pairs, a token file,
  // text through the tokenizer, or text as bytes (binary skipped; an
  // unreadable file skipped unless named on its own). At most `room` bytes.
  absl::Status AddFile(const std::string& file, bool explicit_file, const CorpusOptions& options,
                       int64_t room);
  // A prompt/completion file's samples appended.
  absl::Status AppendSamples(const std::string& file, const CorpusOptions& options);

  std::vector<FineTuneSample> samples_;
  int64_t train_samples_ = 0;  // [0, train_samples_) train, the rest validation.
  std::string bytes_;
  int width_ = 0;            // Bytes per token; 0 until the first file.
  int64_t train_bytes_ = 0;  // [0, train_bytes_) train, the rest validation.
  std::vector<std::string> files_;
  int skipped_binary_ = 0;
};

// Real text present on every machine of this kind (Debian 12): the Python
// standard library's sources (/usr/lib/python3.<minor>, the newest present),
// else Debian's /usr/share/doc. Empty if neither exists.
std::vector<std::string> DefaultDataPaths();

}  // namespace zeroshard
