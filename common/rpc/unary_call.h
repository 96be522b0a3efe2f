// The one way a zeroshard client makes a unary gRPC call: a context with a
// deadline, the call, and the status translated once (grpc_status.h), the
// message prefixed with the RPC's name.
//
// Usage:
//   absl::StatusOr<v1::JoinResponse> r =
//       UnaryCall(stub, &v1::Coordinator::Stub::Join, request, deadline, "Join");
// The overload that takes a `grpc::ClientContext*` lets a caller that must be
// able to cancel the call (CheckpointClient::Shutdown) own the context; its
// deadline is the caller's to set.
//
// Errors: whatever the server or the channel answered, code kept
// (UNAVAILABLE: unreachable, retry; DEADLINE_EXCEEDED: the deadline passed).
// Thread safety: as the stub (gRPC stubs are thread-safe).
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/client_context.h"

namespace zeroshard {

template <typename Stub, typename Request, typename Response>
using UnaryMethod = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> UnaryCall(Stub* stub, UnaryMethod<Stub, Request, Response> method,
                                   const Request& request, grpc::ClientContext* ctx,
                                   const char* rpc_name) {
  Response response;
  absl::Status status = FromGrpcStatus((stub->*method)(ctx, request, &response), rpc_name);
  if (!status.ok()) return status;
  return response;
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> UnaryCall(Stub* stub, UnaryMethod<Stub, Request, Response> method,
                                   const Request& request, absl::Time deadline,
                                   const char* rpc_name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  return UnaryCall(stub, method, request, &ctx, rpc_name);
}

}  // namespace zeroshard
