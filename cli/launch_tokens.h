// `zeroshard launch` without --token-file: fresh random tokens that only
// this launch knows, so no other local user or process can join its job,
// write its rendezvous store or act as its admin (issue 40). In the run
// directory, each file mode 0600:
//   tokens       the embedded coordinator's "role token" lines (worker, admin);
//   worker-token the workers' token (worker role);
//   admin-token  the user's, for `zeroshard status|stop|checkpoint --token-file`.
// Thread-compatible.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zeroshard::cli {

struct LocalTokens {
  std::string coordinator_file;  // The coordinator's --token-file.
  std::string worker_file;       // The workers' --token-file.
  std::string admin_file;        // The user's.
};

// Writes the three files under `run_dir` (replacing old ones); 128 random
// bits from /dev/urandom per token. Errors name the file.
absl::StatusOr<LocalTokens> WriteLocalTokens(const std::string& run_dir);

}  // namespace zeroshard::cli
