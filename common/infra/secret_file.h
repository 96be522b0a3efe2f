// Reading a file that holds secrets (bearer tokens), refusing one that other
// users could read or change, as ssh refuses such key files: no permission
// bit for "other", and no group write. Group read is allowed, because
// Kubernetes mounts Secrets for a non-root pod as root:fsGroup with mode
// 0440 (deploy/k8s), the only way that user can read them.
//
// Thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zeroshard {

// The file's contents. Errors: FAILED_PRECONDITION naming the path and its
// mode when it is open to other users or writable by its group; the read's
// error otherwise (NOT_FOUND, ...). The messages never hold the contents.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace zeroshard
