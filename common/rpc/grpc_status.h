// The one adapter between absl::Status and grpc::Status (STYLE.md point 13).
// Codes map one to one (both follow google.rpc.Code); messages carry over.
// Thread-safe: pure functions.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"

namespace zeroshard {

grpc::Status ToGrpcStatus(const absl::Status& status);
// `context` (e.g. "Join") is prefixed to the message so a caller sees which
// RPC failed; UNAVAILABLE and DEADLINE_EXCEEDED keep their codes so callers
// can retry as abseil's guidance says. A status without a message (gRPC
// answers UNIMPLEMENTED with none when the server does not register the
// service) gets the code's name and, for UNIMPLEMENTED, what it means, so
// no error ever reads "GetCheckpoint: " with nothing after it.
absl::Status FromGrpcStatus(const grpc::Status& status, const char* context);

// For RPC handlers: hands a StatusOr's value to `assign(value, response)`,
// or returns its error. Every handler that answers with a value goes
// through here.
template <typename T, typename Response, typename Assign>
grpc::Status Reply(absl::StatusOr<T> result, Response* response, Assign assign) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  assign(*std::move(result), response);
  return grpc::Status::OK;
}

// The value is the whole response message.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  return Reply(std::move(result), response, [](T value, T* out) { *out = std::move(value); });
}

}  // namespace zeroshard
