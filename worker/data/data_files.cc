#include "worker/data/data_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace fs = std::filesystem;

bool LooksBinary(std::string_view data) {
  int64_t control = 0;
  for (unsigned char c : data) {
    if (c == 0) return true;
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f) {
      ++control;
    }
  }
  return control * 100 > static_cast<int64_t>(data.size());
}

absl::StatusOr<std::string> ReadDataFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read data file '", path, "'"));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::UnavailableError(absl::StrCat("error reading data file '", path, "'"));
  return data;
}

std::vector<std::string> ListDataFiles(const std::string& path) {
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

}  // namespace zeroshard
