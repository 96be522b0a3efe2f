// Field checks shared by the coordinator's RPCs. Every error names the
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

// `job_id` must equal `expected`; empty is INVALID_ARGUMENT, another job is
// FAILED_PRECONDITION. With allow_empty, "" means `expected`.
absl::Status CheckJobId(const std::string& job_id, const std::string& expected,
                        bool allow_empty = false);
// Non-empty (if required), at most max_bytes, printable ASCII without spaces.
absl::Status CheckToken(const std::string& value, const char* field, size_t max_bytes,
                        bool required);
// INVALID_ARGUMENT if member_id is 0.
absl::Status CheckMemberId(uint64_t member_id);
// The first difference between the job's units and a joiner's, as text
// ("" if equal), e.g. `units[3].params[1].shape is [4,8], the job has [4,4]`.
std::string DescribeUnitsDifference(const std::vector<UnitSpec>& job,
                                    const std::vector<UnitSpec>& joiner);

}  // namespace zeroshard::server
