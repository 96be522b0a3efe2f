#include "common/rpc/heartbeat_stream_client.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"

namespace zeroshard {
namespace {

// Each op's tag is its bit; at most one of each is in flight.
enum Op : unsigned { kStart = 1, kWrite = 2, kRead = 4, kWritesDone = 8, kFinish = 16 };

// How long a cancelled or half-closed stream may take to hand back its
// tags; gRPC completes them at once after a cancel, so this only bounds a
// broken library.
constexpr absl::Duration kDrainBound = absl::Seconds(10);
// How long closing waits for the coordinator to end the stream before it
// cancels it (nothing depends on the coordinator's answer then).
constexpr absl::Duration kCloseBound = absl::Seconds(1);

// After a failed op the coordinator's status is already on its way; this
// is the least a Finish is given even when the Beat's time is nearly out.
constexpr absl::Duration kFinishFloor = absl::Milliseconds(200);

void* TagOf(unsigned op) { return reinterpret_cast<void*>(static_cast<uintptr_t>(op)); }

// How a stream that broke under an idle client ends (a coordinator restart,
// a reset connection), as opposed to the coordinator's answer to a request.
bool BrokenStream(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsCancelled(s) || absl::IsInternal(s);
}

}  // namespace

HeartbeatStreamClient::HeartbeatStreamClient(CoordinatorClient* client)
    : client_(client),
      stub_(v1::Coordinator::NewStub(client->channel())),
      queue_(std::make_unique<grpc::CompletionQueue>()) {}

HeartbeatStreamClient::~HeartbeatStreamClient() {
  if (stream_ != nullptr) {
    stream_->WritesDone(TagOf(kWritesDone));
    outstanding_ |= kWritesDone;
    unsigned failed = 0;
    const bool done = Wait(kWritesDone, absl::Now() + kCloseBound, &failed);
    End(/*cancel=*/!done || failed != 0, kCloseBound);
  }
  queue_->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue_->Next(&tag, &ok)) {
  }
}

bool HeartbeatStreamClient::Wait(unsigned ops, absl::Time deadline, unsigned* failed) {
  while ((outstanding_ & ops) != 0) {
    void* tag = nullptr;
    bool ok = false;
    const grpc::CompletionQueue::NextStatus next =
        queue_->AsyncNext(&tag, &ok, absl::ToChronoTime(deadline));
    if (next != grpc::CompletionQueue::GOT_EVENT) return false;
    const auto op = static_cast<unsigned>(reinterpret_cast<uintptr_t>(tag));
    outstanding_ &= ~op;
    if (!ok) *failed |= op;
  }
  return true;
}

grpc::Status HeartbeatStreamClient::End(bool cancel, absl::Duration finish_wait) {
  if (cancel) ctx_->TryCancel();
  unsigned failed = 0;
  bool drained = Wait(outstanding_, absl::Now() + kDrainBound, &failed);
  grpc::Status status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
  if (drained) {
    stream_->Finish(&status, TagOf(kFinish));
    outstanding_ |= kFinish;
    const absl::Time deadline = absl::Now() + (cancel ? kDrainBound : finish_wait);
    drained = Wait(kFinish, deadline, &failed);
    if (!drained && !cancel) {
      ctx_->TryCancel();
      drained = Wait(kFinish, absl::Now() + kDrainBound, &failed);
    }
  }
  if (!drained) {
    // gRPC still holds tags of this stream: its objects must outlive them,
    // so they are leaked rather than freed under the library.
    std::cerr << "HeartbeatStream: the stream did not end within "
              << absl::FormatDuration(kDrainBound) << " of a cancel; leaking it\n";
    (void)stream_.release();
    (void)ctx_.release();
    (void)queue_.release();
    queue_ = std::make_unique<grpc::CompletionQueue>();
    outstanding_ = 0;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream did not end");
  }
  stream_.reset();
  ctx_.reset();
  outstanding_ = 0;
  return status;
}

absl::StatusOr<v1::HeartbeatResponse> HeartbeatStreamClient::Beat(
    const v1::HeartbeatRequest& request) {
  if (absl::Now() < unary_until_) return client_->Heartbeat(request);
  const absl::Time deadline = absl::Now() + client_->options().timeout;
  const bool reused = stream_ != nullptr;
  absl::StatusOr<v1::HeartbeatResponse> reply = BeatOnStream(request, deadline);
  // A stream idle since the last beat may have broken meanwhile (the
  // coordinator restarted, a connection dropped): one more try on a new one.
  if (reused && BrokenStream(reply.status()) && absl::Now() < deadline) {
    reply = BeatOnStream(request, deadline);
  }
  return reply;
}

absl::StatusOr<v1::HeartbeatResponse> HeartbeatStreamClient::BeatOnStream(
    const v1::HeartbeatRequest& request, absl::Time deadline) {
  unsigned failed = 0;
  if (stream_ == nullptr) {
    ctx_ = std::make_unique<grpc::ClientContext>();
    stream_ = stub_->AsyncHeartbeatStream(ctx_.get(), queue_.get(), TagOf(kStart));
    outstanding_ |= kStart;
    if (!Wait(kStart, deadline, &failed)) {
      End(/*cancel=*/true, kDrainBound);
      return absl::DeadlineExceededError("HeartbeatStream: the stream did not start in time");
    }
  }
  if (failed == 0) {
    stream_->Write(request, TagOf(kWrite));
    stream_->Read(&response_, TagOf(kRead));
    outstanding_ |= kWrite | kRead;
    if (!Wait(kWrite | kRead, deadline, &failed)) {
      End(/*cancel=*/true, kDrainBound);
      return absl::DeadlineExceededError(absl::StrCat(
          "HeartbeatStream: no answer within ", absl::FormatDuration(client_->options().timeout)));
    }
  }
  if (failed == 0) {
    ++streamed_;
    return response_;
  }
  return OnEnded(request, End(/*cancel=*/false, std::max(deadline - absl::Now(), kFinishFloor)));
}

absl::StatusOr<v1::HeartbeatResponse> HeartbeatStreamClient::OnEnded(
    const v1::HeartbeatRequest& request, grpc::Status status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNIMPLEMENTED:  // An older coordinator; it may be upgraded.
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      unary_until_ = absl::Now() + kStreamRetry;
      return client_->Heartbeat(request);
    case grpc::StatusCode::OK:  // The coordinator closed a stream mid-heartbeat.
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator ended the stream");
      break;
    default:
      break;
  }
  return FromGrpcStatus(status, "HeartbeatStream");
}

}  // namespace zeroshard
