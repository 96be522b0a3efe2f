// A worker's heartbeats over one HeartbeatStream (coordinator.proto): the
// stream opens on the first Beat and stays open for the session, so a
// heartbeat costs one message each way instead of a unary call's set-up.
//
// Fallbacks, so a worker never depends on the stream: a coordinator that
// answers UNIMPLEMENTED (an older build) or RESOURCE_EXHAUSTED (the
// caller's stream limit) gets unary Heartbeats for kStreamRetry, then the
// stream is tried again. A stream that ends (the coordinator refused a
// heartbeat, restarted, or the connection broke) is reopened by the next
// Beat; a Beat that finds its idle stream broken (UNAVAILABLE, CANCELLED,
// INTERNAL) tries once more on a new one, so a restarted coordinator's
// NOT_FOUND reaches the worker on its first heartbeat, as a unary call's
// would.
//
// Thread safety: none; one thread (the session's heartbeat loop) calls
// Beat. `client` must outlive this.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/coordinator_client.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {

class HeartbeatStreamClient {
 public:
  static constexpr absl::Duration kStreamRetry = absl::Seconds(30);

  explicit HeartbeatStreamClient(CoordinatorClient* client);
  // Half-closes an open stream and gives the coordinator ~1 s to end it
  // and ~1 s to hand back its status, then cancels it (a cancel drains at
  // once; kDrainBound in the .cc bounds a broken library).
  ~HeartbeatStreamClient();
  HeartbeatStreamClient(const HeartbeatStreamClient&) = delete;
  HeartbeatStreamClient& operator=(const HeartbeatStreamClient&) = delete;

  // One heartbeat. Errors as CoordinatorClient::Heartbeat's (NOT_FOUND:
  // Join again), named "HeartbeatStream" when the stream carried it;
  // DEADLINE_EXCEEDED when no answer came within the client's timeout
  // (the stream is then cancelled and the next Beat opens a new one).
  absl::StatusOr<v1::HeartbeatResponse> Beat(const v1::HeartbeatRequest& request);

  // Heartbeats answered over a stream so far (tests, the bench).
  int64_t streamed() const { return streamed_; }

 private:
  using Stream = grpc::ClientAsyncReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>;
  // Waits until no op of `ops` is outstanding or `deadline`; false on the
  // deadline. Ops that completed not ok are added to *failed.
  bool Wait(unsigned ops, absl::Time deadline, unsigned* failed);
  // Finishes the stream (after its reads and writes completed) and drops
  // it; returns its status. `cancel` cancels it first; otherwise the
  // coordinator has `finish_wait` to end it before it is cancelled.
  grpc::Status End(bool cancel, absl::Duration finish_wait);
  // One heartbeat on the open stream (opened first if none is).
  absl::StatusOr<v1::HeartbeatResponse> BeatOnStream(const v1::HeartbeatRequest& request,
                                                     absl::Time deadline);
  // The Beat whose stream ended with `status`: a fallback or the error.
  absl::StatusOr<v1::HeartbeatResponse> OnEnded(const v1::HeartbeatRequest& request,
                                                grpc::Status status);

  CoordinatorClient* const client_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::unique_ptr<grpc::CompletionQueue> queue_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<Stream> stream_;
  v1::HeartbeatResponse response_;
  unsigned outstanding_ = 0;  // Ops issued on stream_ whose tags did not come back.
  int64_t streamed_ = 0;
  // After UNIMPLEMENTED or RESOURCE_EXHAUSTED: unary Heartbeats until then.
  absl::Time unary_until_ = absl::InfinitePast();
};

}  // namespace zeroshard
