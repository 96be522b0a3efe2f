#include "worker/data/token_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

int32_t Le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return static_cast<int32_t>(v);  // x86-64 and Arm64 hosts are little-endian.
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<TokenFile> ParseLlmc(const std::string& path, std::string data) {
  if (data.size() < kLlmcHeaderBytes) {
    return Bad(path, absl::StrCat("llm.c header truncated: ", data.size(), " of ", kLlmcHeaderBytes,
                                  " bytes"));
  }
  const int32_t magic = Le32(data.data()), version = Le32(data.data() + 4);
  const int64_t count = Le32(data.data() + 8);
  TokenFile f;
  if (magic == kLlmcMagicU16 && version == 1) {
    f.width = 2;
  } else if (magic == kLlmcMagicU32 && version == 7) {
    f.width = 4;
  } else {
    return Bad(path, absl::StrCat("llm.c header magic ", magic, " version ", version,
                                  " is not 20240520/1 (uint16) or 20240801/7 (uint32)"));
  }
  const int64_t body = static_cast<int64_t>(data.size()) - kLlmcHeaderBytes;
  if (count < 0 || body != count * f.width) {
    return Bad(path, absl::StrCat("llm.c header says ", count, " tokens (", count * f.width,
                                  " bytes) but the body holds ", body, " bytes",
                                  body < count * f.width ? " (truncated)" : ""));
  }
  f.bytes = data.substr(kLlmcHeaderBytes);
  return f;
}

// .npy: magic, version, header length, a Python dict literal, the data.
absl::StatusOr<TokenFile> ParseNpy(const std::string& path, std::string data) {
  if (data.size() < 10) return Bad(path, ".npy header truncated");
  const int major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | (static_cast<uint8_t>(data[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) return Bad(path, ".npy header truncated");
    header_len = static_cast<uint32_t>(Le32(data.data() + 8));
    start = 12;
  } else {
    return Bad(path, absl::StrCat(".npy format version ", major, " is not 1, 2 or 3"));
  }
  if (data.size() < start + header_len) return Bad(path, ".npy header truncated");
  const std::string header = data.substr(start, header_len);
  TokenFile f;
  if (absl::StrContains(header, "'<u2'") || absl::StrContains(header, "'|u2'")) f.width = 2;
  if (absl::StrContains(header, "'<u4'")) f.width = 4;
  if (f.width == 0) {
    return Bad(path, absl::StrCat(".npy dtype is not uint16 or uint32 (little-endian): ", header));
  }
  if (absl::StrContains(header, "'fortran_order': True")) return Bad(path, ".npy is Fortran order");
  const size_t open = header.find("'shape': (");
  const size_t close = open == std::string::npos ? open : header.find(')', open);
  if (close == std::string::npos) return Bad(path, ".npy header has no shape");
  std::vector<std::string> dims;
  for (absl::string_view d : absl::StrSplit(header.substr(open + 10, close - open - 10), ',')) {
    if (!absl::StripAsciiWhitespace(d).empty()) dims.emplace_back(absl::StripAsciiWhitespace(d));
  }
  int64_t count = 0;
  if (dims.size() != 1 || !absl::SimpleAtoi(dims[0], &count)) {
    return Bad(path, absl::StrCat(".npy array is not 1-D: ", header));
  }
  const int64_t body = static_cast<int64_t>(data.size() - start - header_len);
  if (body != count * f.width) {
    return Bad(path, absl::StrCat(".npy shape says ", count, " tokens (", count * f.width,
                                  " bytes) but the body holds ", body, " bytes",
                                  body < count * f.width ? " (truncated)" : ""));
  }
  f.bytes = data.substr(start + header_len);
  return f;
}

}  // namespace

uint32_t TokenFile::at(int64_t i) const {
  const char* p = bytes.data() + i * width;
  if (width == 2) return static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8);
  return static_cast<uint32_t>(Le32(p));
}

bool HasTokenFileName(const std::string& path) {
  return absl::EndsWith(path, ".bin") || absl::EndsWith(path, ".npy");
}

bool LooksLikeTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  if (!in.read(head, sizeof(head))) return false;
  const int32_t magic = Le32(head);
  return magic == kLlmcMagicU16 || magic == kLlmcMagicU32 || std::memcmp(head, kNpyMagic, 6) == 0;
}

absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path, int64_t vocab_size) {
  ZS_ASSIGN_OR_RETURN(std::string data, ReadAll(path));
  const bool npy = data.compare(0, 6, kNpyMagic) == 0;
  ZS_ASSIGN_OR_RETURN(TokenFile f,
                      npy ? ParseNpy(path, std::move(data)) : ParseLlmc(path, std::move(data)));
  if (vocab_size > 0) {
    for (int64_t i = 0; i < f.count(); ++i) {
      if (f.at(i) >= vocab_size) {
        return Bad(path, absl::StrCat("token ", i, " is ", f.at(i), ", outside the model's ",
                                      "vocabulary of ", vocab_size));
      }
    }
  }
  return f;
}

absl::StatusOr<TokenFileWriter> TokenFileWriter::Open(const std::string& path, int64_t vocab_size) {
  if (vocab_size < 1) return absl::InvalidArgumentError("vocab_size must be >= 1");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  TokenFileWriter w(f, path, vocab_size <= 65536 ? 2 : 4, vocab_size);
  const std::vector<char> header(kLlmcHeaderBytes, 0);
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return w;
}

TokenFileWriter::TokenFileWriter(TokenFileWriter&& o) noexcept
    : file_(std::exchange(o.file_, nullptr)),
      path_(std::move(o.path_)),
      width_(o.width_),
      vocab_(o.vocab_),
      count_(o.count_) {}

TokenFileWriter::~TokenFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status TokenFileWriter::Append(absl::Span<const int32_t> ids) {
  if (count_ + static_cast<int64_t>(ids.size()) > std::numeric_limits<int32_t>::max()) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": an llm.c shard holds at most 2^31 - 1 tokens; split the input"));
  }
  buffer_.resize(ids.size() * width_);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": token id ", ids[i], " is outside the vocabulary of ", vocab_));
    }
    const auto v = static_cast<uint32_t>(ids[i]);
    std::memcpy(buffer_.data() + i * width_, &v, width_);  // Little-endian host.
  }
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", std::strerror(errno)));
  }
  count_ += static_cast<int64_t>(ids.size());
  return absl::OkStatus();
}

absl::Status TokenFileWriter::Close() {
  int32_t header[3] = {width_ == 2 ? kLlmcMagicU16 : kLlmcMagicU32, width_ == 2 ? 1 : 7,
                       static_cast<int32_t>(count_)};
  const bool ok =
      std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(header, sizeof(header), 1, file_) == 1;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
