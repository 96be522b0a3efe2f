#include "worker/data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/data/data_files.h"
#include "worker/data/document_tokens.h"
#include "worker/data/documents.h"
#include "worker/data/token_file.h"

namespace zeroshard {
namespace fs = std::filesystem;

absl::StatusOr<TextCorpus> TextCorpus::Load(const std::vector<std::string>& paths,
                                            const CorpusOptions& options) {
  if (paths.empty()) return absl::InvalidArgumentError("data: no data paths given");
  if (!(options.validation_fraction > 0.0 && options.validation_fraction <= 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data: validation_fraction must be in (0, 0.5], got ", options.validation_fraction));
  }
  if (options.max_bytes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: max_bytes must be >= 2, got ", options.max_bytes));
  }
  TextCorpus corpus;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("data path '", path, "' does not exist"));
    }
    const bool explicit_file = fs::is_regular_file(path, ec);
    for (const std::string& file : ListDataFiles(path)) {
      const int64_t room = options.max_bytes - corpus.total_bytes();
      if (room <= 0) break;
      ZS_RETURN_IF_ERROR(corpus.AddFile(file, explicit_file, options, room));
    }
  }
  if (corpus.fine_tuning()) {
    if (corpus.width_ != 0 || corpus.samples_.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("data: ",
                       corpus.width_ != 0 ? "prompt/completion pairs do not mix with other data"
                                          : "fine-tuning needs at least 2 prompt/completion pairs",
                       " (", absl::StrJoin(paths, ", "), ")"));
    }
    const int64_t n = static_cast<int64_t>(corpus.samples_.size());
    corpus.train_samples_ =
        n - std::max<int64_t>(1, static_cast<int64_t>(n * options.validation_fraction));
    return corpus;
  }
  if (corpus.width_ == 0 || corpus.total_bytes() < 2 * corpus.width_) {
    return absl::InvalidArgumentError(absl::StrCat("data: no text in ", absl::StrJoin(paths, ", "),
                                                   " (", corpus.skipped_binary_,
                                                   " binary files skipped)"));
  }
  const int64_t n = corpus.total_bytes() / corpus.width_;
  const int64_t val = std::max<int64_t>(1, static_cast<int64_t>(n * options.validation_fraction));
  corpus.train_bytes_ = (n - val) * corpus.width_;
  return corpus;
}

absl::Status TextCorpus::AddFile(const std::string& file, bool explicit_file,
                                 const CorpusOptions& options, int64_t room) {
  if (IsPromptCompletionFile(file)) return AppendSamples(file, options);
  if (LooksLikeTokenFile(file) || (explicit_file && HasTokenFileName(file))) {
    ZS_ASSIGN_OR_RETURN(const TokenFile t, ReadTokenFile(file, options.vocab_size));
    return Append(file, t.width, t.bytes, room);
  }
  if (options.tokenizer != nullptr) {
    int width = 0;
    ZS_ASSIGN_OR_RETURN(const std::string ids, TokenizeFile(file, options, &width));
    return ids.empty() ? absl::OkStatus() : Append(file, width, ids, room);
  }
  absl::StatusOr<std::string> data = ReadDataFile(file);
  if (!data.ok()) {
    // An unreadable file deep in a directory is skipped.
    return explicit_file ? data.status() : absl::OkStatus();
  }
  if (data->empty()) return absl::OkStatus();
  if (LooksBinary(*data)) {
    ++skipped_binary_;
    return absl::OkStatus();
  }
  return Append(file, 1, *data, room);
}

absl::Status TextCorpus::AppendSamples(const std::string& file, const CorpusOptions& options) {
  if (options.tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: ", file,
                     " holds prompt/completion pairs, which need the model's tokenizer "
                     "(a model directory with one, or --tokenizer)"));
  }
  ZS_ASSIGN_OR_RETURN(std::vector<FineTuneSample> s,
                      ReadPromptCompletion(file, *options.tokenizer, options.context));
  for (FineTuneSample& x : s) {
    for (const int32_t id : x.ids) {
      if (options.vocab_size > 0 && id >= options.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": the tokenizer gives id ", id,
                                                       ", outside the model's vocabulary of ",
                                                       options.vocab_size));
      }
    }
    samples_.push_back(std::move(x));
  }
  files_.push_back(file);
  return absl::OkStatus();
}

absl::Span<const FineTuneSample> TextCorpus::samples(Split s) const {
  absl::Span<const FineTuneSample> all(samples_);
  return s == Split::kTrain ? all.subspan(0, train_samples_) : all.subspan(train_samples_);
}

absl::StatusOr<std::string> TextCorpus::TokenizeFile(const std::string& file,
                                                     const CorpusOptions& options, int* width) {
  ZS_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::Open({file}));
  std::vector<Document> docs;
  for (Document d;;) {
    ZS_ASSIGN_OR_RETURN(const bool more, reader.Next(&d));
    if (!more) break;
    docs.push_back(std::move(d));
  }
  std::vector<std::vector<int32_t>> ids;
  ZS_RETURN_IF_ERROR(EncodeDocuments(*options.tokenizer, docs, options.threads, &ids));
  *width = options.tokenizer->vocab_size() <= 65536 ? 2 : 4;
  std::string bytes;
  for (const std::vector<int32_t>& doc : ids) {
    for (const int32_t id : doc) {
      if (options.vocab_size > 0 && id >= options.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": the tokenizer gives id ", id,
                                                       ", outside the model's vocabulary of ",
                                                       options.vocab_size));
      }
      const auto v = static_cast<uint32_t>(id);
      bytes.append(reinterpret_cast<const char*>(&v), *width);  // Little-endian host.
    }
  }
  return bytes;
}

absl::Status TextCorpus::Append(const std::string& file, int width, std::string_view data,
                                int64_t room) {
  if (width_ != 0 && width != width_) {
    auto kind = [](int w) { return w == 1 ? "text" : w == 2 ? "uint16 tokens" : "uint32 tokens"; };
    return absl::InvalidArgumentError(absl::StrCat("data: ", file, " holds ", kind(width),
                                                   " but earlier files hold ", kind(width_),
                                                   "; give text or token files of one width"));
  }
  width_ = width;
  const int64_t take = std::min<int64_t>(room, data.size()) / width * width;
  bytes_.append(data.data(), take);
  files_.push_back(file);
  return absl::OkStatus();
}

absl::string_view TextCorpus::split(Split s) const {
  absl::string_view all(bytes_);
  return s == Split::kTrain ? all.substr(0, train_bytes_) : all.substr(train_bytes_);
}

TokenView TextCorpus::tokens(Split s) const {
  if (width_ == 0) return TokenView{};  // Fine-tuning samples: no stream.
  const absl::string_view raw = split(s);
  return TokenView{raw.data(), static_cast<int64_t>(raw.size()) / width_, width_};
}

int32_t TokenView::at(int64_t i) const {
  const auto* p = reinterpret_cast<const uint8_t*>(data + i * width);
  if (width == 1) return p[0];
  if (width == 2) return p[0] | (p[1] << 8);
  return static_cast<int32_t>(p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24));
}

std::vector<std::string> DefaultDataPaths() {
  std::error_code ec;
  std::vector<std::string> pythons;
  for (fs::directory_iterator it("/usr/lib", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("python3.", 0) == 0 && fs::exists(it->path() / "os.py", ec)) {
      pythons.push_back(it->path().string());
    }
  }
  if (!pythons.empty()) {
    // Newest minor version: compare the numeric suffix, not the string.
    auto minor = [](const std::string& p) { return std::atoi(p.c_str() + p.rfind('.') + 1); };
    std::sort(pythons.begin(), pythons.end(),
              [&](const std::string& a, const std::string& b) { return minor(a) < minor(b); });
    return {pythons.back()};
  }
  if (fs::is_directory("/usr/share/doc", ec)) return {"/usr/share/doc"};
  return {};
}

}  // namespace zeroshard
