// Durable file replacement: write a temporary file in the same directory,
// fsync it, rename it over the target, then fsync the directory, so a reader
// (or a process restarted after kill -9 or power loss) sees either the old
// contents or the new, never a torn mix. POSIX rename(2) is atomic within one
// file system. Thread-safe for distinct paths; concurrent writers of one path
// must serialise themselves (the last rename wins).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

// Replaces `path` with `contents` atomically and durably. Errors: INTERNAL
// (or the errno's mapping) naming the path and the failing system call.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Removes the temporaries ("<path>.tmp.*") that writes of `path` cut off
// by a kill left behind. Call before anything writes `path` (at start).
// Best effort: files that cannot be removed are left.
void RemoveStaleTemporaries(const std::string& path);

// The same for contents produced piece by piece: `write` calls `append`
// (which writes `bytes` bytes at `data`) as often as it likes; an error it
// returns, or one `append` returns, leaves `path` untouched and is returned.
// `mode`: the new file's permission bits (fchmod, so no umask applies).
using AppendFn = std::function<absl::Status(const void* data, size_t bytes)>;
absl::Status WriteFileAtomicallyStreamed(const std::string& path,
                                         const std::function<absl::Status(const AppendFn&)>& write,
                                         unsigned mode = 0600);

// Reads a whole file. NOT_FOUND if it does not exist; other I/O errors name
// the path and the system call.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Creates `dir` and its parents (mode 0755) if missing. INVALID_ARGUMENT for
// an empty path; the errno's mapping otherwise.
absl::Status MakeDirectories(const std::string& dir);

}  // namespace zeroshard
