// Token files: llm.c's shards and NumPy .npy arrays of token ids.
//
// llm.c (dev/data/data_common.py): a header of 256 little-endian int32,
// then the tokens. header[0] is the magic, header[1] the version, header[2]
// the token count: magic 20240520 version 1 holds uint16 tokens (GPT-2's
// vocabulary), magic 20240801 version 7 uint32 (Llama 3's). .npy: format
// version 1 or 2, a 1-D little-endian array of uint16 or uint32 ('<u2',
// '<u4'), C order.
//
// Thread safety: free functions; TokenFileWriter is not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zeroshard {

inline constexpr int32_t kLlmcMagicU16 = 20240520;  // Version 1.
inline constexpr int32_t kLlmcMagicU32 = 20240801;  // Version 7.
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// The tokens of a file, as stored: `width` bytes each (2 or 4), little-endian.
struct TokenFile {
  int width = 0;
  std::string bytes;
  int64_t count() const { return width == 0 ? 0 : static_cast<int64_t>(bytes.size()) / width; }
  uint32_t at(int64_t i) const;
};

// True when `path` starts like a token file (an llm.c magic, or .npy's).
bool LooksLikeTokenFile(const std::string& path);
// True when `path` is named *.bin or *.npy: a file the user names so is
// read as a token file (and a wrong header said so), not skipped as binary.
bool HasTokenFileName(const std::string& path);

// Reads an llm.c shard or a .npy file. INVALID_ARGUMENT naming the file and
// what is wrong: an unknown magic or version, a dtype other than uint16 or
// uint32, a header count the body does not hold (truncated) or exceeds.
// With vocab_size > 0, a token >= vocab_size is INVALID_ARGUMENT naming the
// file, the token's index and its value.
absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path, int64_t vocab_size = 0);

// Writes an llm.c shard: uint16 (version 1) when every id fits, else
// uint32 (version 7), chosen up front from the vocabulary size. The header's
// count is written by Close.
class TokenFileWriter {
 public:
  static absl::StatusOr<TokenFileWriter> Open(const std::string& path, int64_t vocab_size);
  TokenFileWriter(TokenFileWriter&& o) noexcept;
  TokenFileWriter& operator=(TokenFileWriter&&) = delete;
  ~TokenFileWriter();
  // Appends ids (each in [0, vocab_size): INVALID_ARGUMENT otherwise).
  // OUT_OF_RANGE past the header's int32 count (2^31 - 1 tokens).
  absl::Status Append(absl::Span<const int32_t> ids);
  // Writes the count into the header and closes; the I/O error naming the
  // file on failure.
  absl::Status Close();
  int width() const { return width_; }
  int64_t count() const { return count_; }

 private:
  TokenFileWriter(std::FILE* f, std::string path, int width, int64_t vocab)
      : file_(f), path_(std::move(path)), width_(width), vocab_(vocab) {}
  std::FILE* file_ = nullptr;
  std::string path_;
  int width_ = 2;
  int64_t vocab_ = 0;
  int64_t count_ = 0;
  std::vector<char> buffer_;
};

}  // namespace zeroshard
