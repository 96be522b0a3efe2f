#include "worker/data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {
namespace fs = std::filesystem;
namespace {

bool LooksBinary(const std::string& data) {
  int64_t control = 0;
  for (unsigned char c : data) {
    if (c == 0) return true;
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') ||
        c == 0x7f) {
      ++control;
    }
  }
  return control * 100 > static_cast<int64_t>(data.size());
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read data file '", path, "'"));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::UnavailableError(absl::StrCat("error reading data file '", path, "'"));
  return data;
}

// Regular files under `path` (itself if a file), sorted, skipping entries
// the walk cannot open.
std::vector<std::string> ListFiles(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

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
    for (const std::string& file : ListFiles(path)) {
      if (corpus.total_bytes() >= options.max_bytes) break;
      absl::StatusOr<std::string> data = ReadWhole(file);
      if (!data.ok()) {
        if (explicit_file) return data.status();
        continue;  // An unreadable file deep in a directory is skipped.
      }
      if (data->empty()) continue;
      if (LooksBinary(*data)) {
        ++corpus.skipped_binary_;
        continue;
      }
      const int64_t room = options.max_bytes - corpus.total_bytes();
      corpus.bytes_.append(*data, 0, std::min<int64_t>(room, data->size()));
      corpus.files_.push_back(file);
    }
  }
  if (corpus.bytes_.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data: no text in ", absl::StrJoin(paths, ", "), " (", corpus.skipped_binary_,
        " binary files skipped)"));
  }
  const int64_t n = corpus.total_bytes();
  const int64_t val = std::max<int64_t>(1, static_cast<int64_t>(n * options.validation_fraction));
  corpus.train_bytes_ = n - val;
  return corpus;
}

absl::string_view TextCorpus::split(Split s) const {
  absl::string_view all(bytes_);
  return s == Split::kTrain ? all.substr(0, train_bytes_) : all.substr(train_bytes_);
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
    auto minor = [](const std::string& p) {
      return std::atoi(p.c_str() + p.rfind('.') + 1);
    };
    std::sort(pythons.begin(), pythons.end(),
              [&](const std::string& a, const std::string& b) { return minor(a) < minor(b); });
    return {pythons.back()};
  }
  if (fs::is_directory("/usr/share/doc", ec)) return {"/usr/share/doc"};
  return {};
}

}  // namespace zeroshard
