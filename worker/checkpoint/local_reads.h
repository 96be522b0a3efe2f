// A rank's side of local reads (server/checkpoint/local_read_server.h): on
// the coordinator's host, the rank asks the coordinator's Unix socket for a
// checkpoint file's descriptors and reads its ranges itself, verifying each
// block it touches against the hash the commit recorded (hashed_read.h).
// CheckpointClient::Restore uses it where CheckpointInfo names a socket it
// can reach, and falls back to DownloadRange for any range it fails on.
//
// Reads go through the page cache (the descriptor is the coordinator's
// buffered one). Measured on the 2-core VM (bench/README.md, "Local
// reads"): with the restore's bytes no longer crossing a socket, the kernel's
// page-cache copy fits in the ranks' CPU, and the 8 MiB readahead keeps the
// disk busier than 1 MiB direct reads (2.1 GB/s against 1.6).
//
// Units: ranges in fp32 elements of the unit's padded flat buffer.
// Errors: UNAVAILABLE when the socket cannot be reached or the connection
// breaks; the coordinator's error for a file it will not open (NOT_FOUND,
// INVALID_ARGUMENT, FAILED_PRECONDITION, UNAUTHENTICATED, ...); DATA_LOSS
// naming the file and block for bytes that fail their block hash, or a
// range past the file; INTERNAL for a failed read.
// Thread safety: Read may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/formats/read_only_file.h"
#include "common/shard_plan.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard::checkpoint {

class LocalReads {
 public:
  // Connects to `socket_path`; `token` is sent with each request ("" when
  // the coordinator needs none). Requests time out after `timeout`.
  static absl::StatusOr<std::unique_ptr<LocalReads>> Connect(const std::string& socket_path,
                                                             std::string token,
                                                             absl::Duration timeout);
  ~LocalReads();
  LocalReads(const LocalReads&) = delete;
  LocalReads& operator=(const LocalReads&) = delete;

  // Elements `range` of checkpoint `step`'s file of (unit, kind) into
  // `dst` (range.length floats). The file is asked for once and kept open.
  absl::Status Read(const std::string& job_id, int64_t step, const std::string& unit,
                    v1::TensorKind kind, ElementRange range, float* dst);

 private:
  struct OpenFile {
    v1::CheckpointFile meta;
    ReadOnlyFile in;
  };
  LocalReads(int sock, std::string token) : sock_(sock), token_(std::move(token)) {}
  absl::StatusOr<std::shared_ptr<const OpenFile>> Open(const std::string& job_id, int64_t step,
                                                       const std::string& unit,
                                                       v1::TensorKind kind);
  absl::StatusOr<std::shared_ptr<const OpenFile>> Ask(const v1::LocalReadRequest& req, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int sock_;
  const std::string token_;
  absl::Mutex mu_;  // One request on the socket at a time; the files.
  std::map<std::tuple<int64_t, std::string, int>, std::shared_ptr<const OpenFile>> files_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard::checkpoint
