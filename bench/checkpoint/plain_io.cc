#include "bench/checkpoint/plain_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/formats/aligned_bytes.h"

namespace zeroshard::bench {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "checkpoint_bench: %s\n", what.c_str());
  std::exit(1);
}

// A file or folder that vanishes meanwhile is skipped: the store removes
// retired pending checkpoints while the bench walks the tree. A walk cut
// short by a vanished folder starts again (evicting twice is harmless).
namespace {

std::error_code EvictWalk(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY);
    if (fd < 0 && errno == ENOENT) continue;
    if (fd < 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
      Die("evict " + it->path().string());
    ::close(fd);
  }
  return ec;
}

}  // namespace

void EvictTree(const std::string& root) {
  std::error_code ec;
  for (int attempt = 0; attempt < 5; ++attempt) {
    ec = EvictWalk(root);
    if (ec != std::errc::no_such_file_or_directory) break;
  }
  if (ec) Die("evict " + root + ": " + ec.message());
}

double PlainWrite(const std::string& path, const std::vector<char>& buf, int64_t bytes) {
  absl::Time t0 = absl::Now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) Die("create " + path);
  for (int64_t done = 0; done < bytes;) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(buf.size()), bytes - done);
    if (::write(fd, buf.data(), static_cast<size_t>(n)) != n) Die("write " + path);
    done += n;
  }
  if (::fsync(fd) != 0) Die("fsync " + path);
  ::close(fd);
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

double PlainRead(const std::string& path, std::vector<char>& buf) {
  absl::Time t0 = absl::Now();
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) Die("open " + path);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

double PlainReadFiles(const std::string& root, int threads) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".bin") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  absl::Time t0 = absl::Now();
  std::vector<std::thread> readers;
  for (int t = 0; t < threads; ++t) {
    readers.emplace_back([&, t] {
      std::vector<char> buf(1 << 20);
      for (size_t i = t; i < files.size(); i += threads) PlainRead(files[i], buf);
    });
  }
  for (std::thread& r : readers) r.join();
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

double DirectRead(const std::string& path, std::vector<char>& buf) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return PlainRead(path, buf);
  absl::StatusOr<AlignedBytes> aligned = AllocateAligned(4 << 20);
  if (!aligned.ok()) Die("allocate");
  absl::Time t0 = absl::Now();
  while (::read(fd, aligned->get(), 4 << 20) > 0) {
  }
  ::close(fd);
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

}  // namespace zeroshard::bench
