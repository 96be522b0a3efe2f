#include "tests/support/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/file_watch.h"

namespace zeroshard::testing {

std::string FileStore::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/k_", absl::BytesToHexString(key));
}

absl::Status FileStore::Set(const std::string& key, const std::vector<uint8_t>& value) {
  static std::atomic<int> counter{0};
  const std::string path = PathOf(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> FileStore::Get(const std::string& key) {
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in.is_open()) return absl::NotFoundError(absl::StrCat("store key not found: ", key));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const std::string* missing = nullptr;
  auto all_there = [&] {
    missing = nullptr;
    for (const auto& k : keys) {
      if (access(PathOf(k).c_str(), F_OK) != 0) {
        missing = &k;
        return false;
      }
    }
    return true;
  };
  // Keys appear by rename into the directory (Set): its file events wake us.
  if (WaitForFiles(dir_, all_there, timeout)) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "store wait timed out after ", absl::FormatDuration(timeout), "; missing key: ", *missing));
}

absl::StatusOr<int64_t> FileStore::Add(const std::string& key, int64_t delta) {
  const std::string lock_path = dir_ + "/.lock";
  const int fd = open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", lock_path));
  flock(fd, LOCK_EX);
  int64_t value = 0;
  absl::Status status;
  auto current = Get(key);
  if (current.ok() && !absl::SimpleAtoi(std::string(current->begin(), current->end()), &value)) {
    status = absl::InvalidArgumentError(absl::StrCat("store key ", key, " is not an integer"));
  }
  if (status.ok()) {
    value += delta;
    const std::string text = absl::StrCat(value);
    status = Set(key, std::vector<uint8_t>(text.begin(), text.end()));
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (!status.ok()) return status;
  return value;
}

}  // namespace zeroshard::testing
