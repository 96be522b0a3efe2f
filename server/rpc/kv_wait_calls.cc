#include "server/rpc/kv_wait_calls.h"

#include <string>

#include "common/rpc/grpc_status.h"
#include "common/rpc/stream_limits.h"
#include "server/rpc/call_queue.h"

namespace zeroshard::server {
namespace {

// One KvWait from request to deletion. Its three events come back on the
// queue thread (Handle): the request matched, the reply sent, the call
// done (or cancelled). It is deleted after the last of the reply and the
// done event; a request that never matched (shutdown) is deleted at once.
class KvWaitCall {
 public:
  enum class Event { kRequested, kFinished, kDone };
  struct Tag {
    KvWaitCall* call;
    Event event;
  };

  KvWaitCall(KvWaitCalls* calls, AsyncCoordinatorService* service, CoordinatorCore* core,
             const AuthGate* gate, grpc::ServerCompletionQueue* queue)
      : calls_(calls), core_(core), gate_(gate) {
    ctx_.AsyncNotifyWhenDone(&done_);
    service->RequestKvWait(&ctx_, &request_, &responder_, queue, queue, &requested_);
  }

  // On the queue thread.
  void Handle(Event event, bool ok) {
    switch (event) {
      case Event::kRequested:
        if (!ok) {  // The server is shutting down: the call never started.
          delete this;
          return;
        }
        calls_->RequestNext();
        Park();
        return;
      case Event::kDone:
        if (ctx_.IsCancelled()) Cancel();
        break;
      case Event::kFinished:
        break;
    }
    if (--pending_ == 0) delete this;
  }

 private:
  void Park() {
    absl::StatusOr<Role> role = gate_->Authorize(ctx_, "Coordinator/KvWait", 0);
    if (!role.ok()) {
      Finish(role.status());
      return;
    }
    absl::StatusOr<uint64_t> id = core_->StartKvWait(request_, PeerHost(ctx_.peer()),
                                                     [this](const absl::Status& s) { Finish(s); });
    if (!id.ok()) {
      Finish(id.status());
      return;
    }
    id_ = *id;
  }

  // The done event of a cancelled call: free the wait's slot (no-op if it
  // finished already). Park ran earlier on this same thread, so id_ is set.
  void Cancel() {
    if (id_ != 0) core_->CancelKvWait(id_);
  }

  // Exactly once per started call: by the core's `done` (any thread, under
  // the core's lock) or for a call refused up front. Nothing of `this` may
  // be touched after it: the finished event may delete the call.
  void Finish(const absl::Status& s) {
    if (s.ok()) {
      responder_.Finish(response_, grpc::Status::OK, &finished_);
    } else {
      responder_.FinishWithError(ToGrpcStatus(s), &finished_);
    }
  }

  KvWaitCalls* const calls_;
  CoordinatorCore* const core_;
  const AuthGate* const gate_;
  grpc::ServerContext ctx_;
  v1::KvWaitRequest request_;
  v1::KvWaitResponse response_;
  grpc::ServerAsyncResponseWriter<v1::KvWaitResponse> responder_{&ctx_};
  Tag requested_{this, Event::kRequested}, finished_{this, Event::kFinished},
      done_{this, Event::kDone};
  // Touched only on the queue thread (the core's `done` uses neither).
  int pending_ = 2;  // The finished and done events still to come.
  uint64_t id_ = 0;  // The parked wait, once Park started it.
};

}  // namespace

KvWaitCalls::KvWaitCalls(AsyncCoordinatorService* service, CoordinatorCore* core,
                         const AuthGate* gate, std::unique_ptr<grpc::ServerCompletionQueue> queue)
    : service_(service), core_(core), gate_(gate), queue_(std::move(queue)) {}

KvWaitCalls::~KvWaitCalls() { Shutdown(); }

void KvWaitCalls::Start() {
  RequestNext();
  thread_ = std::thread([this] { Run(); });
}

void KvWaitCalls::RequestNext() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  new KvWaitCall(this, service_, core_, gate_, queue_.get());  // Owns itself.
}

void KvWaitCalls::Run() { RunCallQueue<KvWaitCall::Tag>(queue_.get()); }

void KvWaitCalls::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    queue_->Shutdown();
  }
  // Next() returns false only after every event was drained.
  if (thread_.joinable()) {
    thread_.join();
  } else {
    Run();
  }
}

}  // namespace zeroshard::server
