// What every reader of training data shares: which files a path stands for,
// reading one whole, and telling text from binary.
//
// Thread safety: free functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard {

// Regular files under `path` (itself if a file), sorted, walked recursively
// without following symlinked directories, skipping entries the walk cannot
// open.
std::vector<std::string> ListDataFiles(const std::string& path);

// The whole file; UNAVAILABLE naming it when it cannot be read.
absl::StatusOr<std::string> ReadDataFile(const std::string& path);

// A NUL byte, or more than 1% control bytes other than tab, newline, CR, FF
// and VT: compiled .pyc, gzip'd docs, images.
bool LooksBinary(std::string_view data);

}  // namespace zeroshard
