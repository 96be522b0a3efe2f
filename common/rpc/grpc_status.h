// The one adapter between absl::Status and grpc::Status (STYLE.md point 13).
// Codes map one to one (both follow google.rpc.Code); messages carry over.
// Thread-safe: pure functions.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace zeroshard {

grpc::Status ToGrpcStatus(const absl::Status& status);
// `context` (e.g. "Join") is prefixed to the message so a caller sees which
// RPC failed; UNAVAILABLE and DEADLINE_EXCEEDED keep their codes so callers
// can retry as abseil's guidance says.
absl::Status FromGrpcStatus(const grpc::Status& status, const char* context);

}  // namespace zeroshard
