// checkpoint_bench's baselines: the plain file I/O the service's save and
// restore are compared with, on the same disk in the same run, and the
// page-cache eviction that makes a run cold. Every failure exits the bench
// (Die: one line on stderr, exit 1). Times are wall seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zeroshard::bench {

[[noreturn]] void Die(const std::string& what);
// Drops every file under `root` from the page cache (they must be clean).
void EvictTree(const std::string& root);
// `bytes` written sequentially from `buf` (repeated), then fsync.
double PlainWrite(const std::string& path, const std::vector<char>& buf, int64_t bytes);
// The file read start to end into `buf`, through the page cache.
double PlainRead(const std::string& path, std::vector<char>& buf);
// Every regular file under `root` whose name ends in ".bin" (a checkpoint's
// data files) read start to end through the page cache by `threads`
// threads at once, 1 MiB a read, the files dealt out in turn: a plain read
// of the files a restore reads, with as many readers as it has streams.
double PlainReadFiles(const std::string& root, int threads);
// The same with O_DIRECT, 4 MiB at a time (PlainRead where O_DIRECT is refused).
double DirectRead(const std::string& path, std::vector<char>& buf);

}  // namespace zeroshard::bench
