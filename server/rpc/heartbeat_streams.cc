#include "server/rpc/heartbeat_streams.h"

#include <optional>
#include <utility>

#include "common/rpc/grpc_status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "server/rpc/call_queue.h"

namespace zeroshard::server {
namespace {

constexpr char kMethod[] = "Coordinator/HeartbeatStream";

// One HeartbeatStream from its acceptance to deletion; every event comes
// back on its queue's thread (Handle). At most one read or write is in
// flight, so the stream is either reading, writing or finishing. It is
// deleted after both the finished and the done event; a stream that was
// never accepted (shutdown) is deleted at once.
class HeartbeatStreamCall {
 public:
  enum class Event { kAccepted, kRead, kWritten, kFinished, kDone };
  struct Tag {
    HeartbeatStreamCall* call;
    Event event;
  };

  HeartbeatStreamCall(HeartbeatStreams* owner, size_t q, grpc::ServerCompletionQueue* queue)
      : owner_(owner), deps_(owner->deps()), q_(q) {
    ctx_.AsyncNotifyWhenDone(&done_);
    deps_.service->RequestHeartbeatStream(&ctx_, &stream_, queue, queue, &accepted_);
  }

  ~HeartbeatStreamCall() {
    if (slot_.has_value() && deps_.open_streams != nullptr) deps_.open_streams->Add({}, -1);
  }
  HeartbeatStreamCall(const HeartbeatStreamCall&) = delete;
  HeartbeatStreamCall& operator=(const HeartbeatStreamCall&) = delete;

  void Handle(Event event, bool ok) {
    if (event == Event::kFinished || event == Event::kDone) {
      if (--pending_ == 0) delete this;
      return;
    }
    if (event == Event::kAccepted) {
      if (!ok) {  // The server is shutting down: the stream never started.
        delete this;
        return;
      }
      owner_->RequestNext(q_);
    }
    // Each branch starts at most one operation (a read, a write or the
    // finish). While the queues shut down none may start: the finished
    // event will then never come, only the done event.
    if (!owner_->StartUnlessShutDown([&] { Continue(event, ok); }) && --pending_ == 0) {
      delete this;
    }
  }

 private:
  void Continue(Event event, bool ok) {
    switch (event) {
      case Event::kAccepted:
        Open();
        return;
      case Event::kRead:
        if (ok) {
          Answer();
        } else {  // The client half-closed, or the stream was cancelled.
          Finish(grpc::Status::OK);
        }
        return;
      case Event::kWritten:
        if (ok) {
          stream_.Read(&received_, &read_);
        } else {
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "HeartbeatStream: the write failed"));
        }
        return;
      case Event::kFinished:
      case Event::kDone:
        return;
    }
  }

  // The token's role is checked before any request is read; members are
  // checked as requests name them (Authorize).
  void Open() {
    if (absl::StatusOr<Role> role = deps_.gate->Authorize(ctx_, kMethod, 0); !role.ok()) {
      Finish(ToGrpcStatus(role.status()));
      return;
    }
    absl::StatusOr<StreamLimits::Slot> slot =
        StreamLimits::OpenOn(deps_.streams, ctx_.peer(), "HeartbeatStream");
    if (!slot.ok()) {
      Finish(ToGrpcStatus(slot.status()));
      return;
    }
    slot_.emplace(*std::move(slot));
    if (deps_.open_streams != nullptr) deps_.open_streams->Add({}, 1);
    stream_.Read(&received_, &read_);
  }

  // The stream's metadata never changes, so a member_id authorized once
  // stays authorized for the stream (a lapsed lease is the core's NOT_FOUND).
  absl::Status Authorize() {
    if (authorized_member_ == request_.member_id()) return absl::OkStatus();
    absl::StatusOr<Role> role = deps_.gate->Authorize(ctx_, kMethod, request_.member_id());
    if (!role.ok()) return role.status();
    authorized_member_ = request_.member_id();
    return absl::OkStatus();
  }

  void Answer() {
    request_.Clear();
    if (!grpc::SerializationTraits<v1::HeartbeatRequest>::Deserialize(&received_, &request_).ok()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "HeartbeatStream: a request is not a valid HeartbeatRequest"));
      return;
    }
    if (absl::Status s = Authorize(); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    absl::StatusOr<v1::HeartbeatResponse> reply =
        HeartbeatWatchdog::Timed(deps_.watchdog, [&] { return deps_.core->Heartbeat(request_); });
    if (!reply.ok()) {
      Finish(ToGrpcStatus(reply.status()));
      return;
    }
    bool own_buffer = false;
    reply_.Clear();  // Serialize asserts on a buffer that still holds the last reply.
    if (!grpc::SerializationTraits<v1::HeartbeatResponse>::Serialize(*reply, &reply_, &own_buffer)
             .ok()) {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL, "HeartbeatStream: cannot encode a reply"));
      return;
    }
    stream_.Write(reply_, &written_);
  }

  void Finish(const grpc::Status& status) { stream_.Finish(status, &finished_); }

  HeartbeatStreams* const owner_;
  const HeartbeatStreamsDeps deps_;
  const size_t q_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&ctx_};
  grpc::ByteBuffer received_, reply_;  // The raw request and response.
  v1::HeartbeatRequest request_;
  std::optional<StreamLimits::Slot> slot_;
  std::optional<uint64_t> authorized_member_;  // The last member_id the gate allowed.
  int pending_ = 2;                            // The finished and done events still to come.
  Tag accepted_{this, Event::kAccepted}, read_{this, Event::kRead}, written_{this, Event::kWritten},
      finished_{this, Event::kFinished}, done_{this, Event::kDone};
};

}  // namespace

HeartbeatStreams::HeartbeatStreams(HeartbeatStreamsDeps deps,
                                   std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues)
    : deps_(deps), queues_(std::move(queues)) {}

HeartbeatStreams::~HeartbeatStreams() { Shutdown(); }

void HeartbeatStreams::Start() {
  for (size_t q = 0; q < queues_.size(); ++q) RequestNext(q);
  for (size_t q = 0; q < queues_.size(); ++q) threads_.emplace_back([this, q] { Run(q); });
}

void HeartbeatStreams::RequestNext(size_t q) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  new HeartbeatStreamCall(this, q, queues_[q].get());  // Owns itself.
}

void HeartbeatStreams::Run(size_t q) { RunCallQueue<HeartbeatStreamCall::Tag>(queues_[q].get()); }

void HeartbeatStreams::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& queue : queues_) queue->Shutdown();
  }
  // Next() returns false only after every event was drained.
  if (!threads_.empty()) {
    for (auto& t : threads_) t.join();
  } else {
    for (size_t q = 0; q < queues_.size(); ++q) Run(q);
  }
}

}  // namespace zeroshard::server
