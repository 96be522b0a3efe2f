// A rank's side of local reads (server/checkpoint/local_read_server.h): on
// the coordinator's host, the rank asks the coordinator's Unix socket for a
// checkpoint file's descriptors and reads its ranges itself, verifying each
// block it touches against the hash the commit recorded (hashed_read.h).
// CheckpointClient::Restore uses it where CheckpointInfo names a socket it
// can reach, and falls back to DownloadRange for any range it fails on;
// RestoreModelWeights reads the job's model directory the same way (the
// socket from ListCheckpoints), converting BF16/F16 to fp32 here.
//
// Each descriptor received is an open file description of the rank's own
// (the coordinator reopens what it sends), so ranks reading their parts of
// one file keep their own readahead. A checkpoint's files are read through the page
// cache, a model's direct from the disk where not cached: each the faster
// on the 2-core VM (bench/README.md, "Local reads"; local_reads.cc).
//
// Units: ranges in fp32 elements of the unit's padded flat buffer.
// Errors: UNAVAILABLE when the socket cannot be reached, is held by
// another user, or the connection broke; INVALID_ARGUMENT for a range past
// the unit or file; the coordinator's error for a file it will not open (NOT_FOUND,
// INVALID_ARGUMENT, FAILED_PRECONDITION, UNAUTHENTICATED, ...); DATA_LOSS
// naming the file and block for bytes that fail their block hash, or for
// an answer that does not match the request; INTERNAL for a failed read.
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
#include "common/formats/hf_weights.h"
#include "common/formats/read_only_file.h"
#include "common/rpc/fd_frames.h"
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
  // Elements `range` of `unit`'s flat buffer from the job's model directory
  // (padding zero), converted to fp32 here (HfWeights::ReadUnitRange): the
  // tensors' places and every file's descriptor are asked for once.
  absl::Status ReadModelWeights(const std::string& job_id, const UnitPlan& unit, ElementRange range,
                                float* dst);

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

  // Under mu_: the model's tensors, then a descriptor of each of its files.
  absl::StatusOr<std::shared_ptr<const HfWeights>> OpenModel(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One request (given the next request id) and its reply, the reply's
  // error returned as a status. A transport or framing failure breaks the
  // connection for good (UNAVAILABLE after it).
  absl::StatusOr<ReceivedFrame> RoundTrip(v1::LocalReadRequest req, v1::LocalReadReply* reply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int sock_;
  const std::string token_;
  absl::Mutex mu_;  // One request on the socket at a time; the files.
  std::map<std::tuple<int64_t, std::string, int>, std::shared_ptr<const OpenFile>> files_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const HfWeights> model_ ABSL_GUARDED_BY(mu_);
  uint64_t last_request_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zeroshard::checkpoint
