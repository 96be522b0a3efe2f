#include "tests/engine/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zeroshard::testing {

std::string FileStore::PathOf(const std::string& key) const {
  static const char kHex[] = "0123456789abcdef";
  std::string name;
  for (unsigned char c : key) {
    name += kHex[c >> 4];
    name += kHex[c & 15];
  }
  return dir_ + "/k_" + name;
}

absl::Status FileStore::Set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string path = PathOf(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".",
                                       std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
    if (!out) return absl::UnavailableError(absl::StrCat("FileStore: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("FileStore: cannot rename to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> FileStore::Get(const std::string& key) {
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("FileStore: no key '", key, "'"));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::string& key : keys) {
    while (access(PathOf(key).c_str(), F_OK) != 0) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("FileStore: key '", key, "' not set"));
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FileStore::Add(const std::string& key, int64_t delta) {
  const std::string lock_path = dir_ + "/add.lock";
  const int fd = open(lock_path.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return absl::UnavailableError("FileStore: cannot open lock file");
  flock(fd, LOCK_EX);
  int64_t value = 0;
  absl::StatusOr<std::vector<uint8_t>> old = Get(key);
  absl::Status status;
  if (old.ok() && !absl::SimpleAtoi(std::string(old->begin(), old->end()), &value)) {
    status = absl::InvalidArgumentError(absl::StrCat("FileStore: key '", key, "' is not an integer"));
  }
  if (status.ok()) {
    value += delta;
    const std::string digits = std::to_string(value);
    status = Set(key, std::vector<uint8_t>(digits.begin(), digits.end()));
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (!status.ok()) return status;
  return value;
}

}  // namespace zeroshard::testing
