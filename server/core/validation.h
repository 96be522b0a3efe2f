// Field checks shared by the coordinator's RPCs and its checkpoint store
// (the one place they live; target zeroshard_server_validation, which
// needs only common/). Every error names the
// field (INVALID_ARGUMENT for a malformed value, FAILED_PRECONDITION for a
// value that is well-formed but wrong for this coordinator). Pure;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/shard_plan.h"

namespace zeroshard::server {

inline constexpr size_t kMaxWorkerIdBytes = 128;
inline constexpr size_t kMaxHostBytes = 255;
inline constexpr size_t kMaxReasonBytes = 4096;
inline constexpr int kMaxWaitKeys = 1024;
inline constexpr int64_t kMaxWaitMs = 600000;
// The highest step any request may name when the job config sets no
// `steps` (2^40: a million steps a second for 12 days is 2^40).
inline constexpr int64_t kMaxStep = int64_t{1} << 40;

// `job_id` must equal `expected`; empty is INVALID_ARGUMENT, another job is
// FAILED_PRECONDITION. With allow_empty, "" means `expected`.
absl::Status CheckJobId(const std::string& job_id, const std::string& expected,
                        bool allow_empty = false);
// Non-empty (if required), at most max_bytes, printable ASCII without spaces.
absl::Status CheckToken(const std::string& value, const char* field, size_t max_bytes,
                        bool required);
// INVALID_ARGUMENT if member_id is 0.
absl::Status CheckMemberId(uint64_t member_id);
// [Note: overflow-safe ranges] INVALID_ARGUMENT naming `what` unless
// offset >= 0, length >= min_length, offset <= total and
// length <= total - offset. Written so that no sum can overflow: a check
// of `offset + length > total` passes offset = 2^63 - 1, length = 16.
absl::Status CheckRange(int64_t offset, int64_t length, int64_t total, const char* what,
                        int64_t min_length = 1);
// What a step may be: 0 <= step <= job_steps when the job config sets
// `steps` (> 0), else <= kMaxStep. A step past the job's last one cannot
// be real work. INVALID_ARGUMENT naming `field` and the bound.
absl::Status CheckStep(int64_t step, int64_t job_steps, const char* field);
// A loss as step reports carry it: NaN (a diverged or unevaluated step) or
// finite and >= 0; INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckLoss(double loss, const char* field);
// INVALID_ARGUMENT naming `field` unless lo <= value <= hi.
absl::Status CheckBetween(int64_t value, int64_t lo, int64_t hi, const char* field);
// The first difference between the job's units and a joiner's, as text
// ("" if equal), e.g. `units[3].params[1].shape is [4,8], the job has [4,4]`.
std::string DescribeUnitsDifference(const std::vector<UnitSpec>& job,
                                    const std::vector<UnitSpec>& joiner);

}  // namespace zeroshard::server
