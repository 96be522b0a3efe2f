// The loop of a thread that drives a completion queue of asynchronous
// calls (kv_wait_calls.h, heartbeat_streams.h): every event's tag is a
// `Tag` {Call* call; Event event;}, handed to call->Handle(event, ok) on
// this thread, until the queue is shut down and drained (Next() returns
// false only after every event came back).
#pragma once

#include "grpcpp/completion_queue.h"

namespace zeroshard::server {

template <typename Tag>
void RunCallQueue(grpc::CompletionQueue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
    auto* t = static_cast<Tag*>(tag);
    t->call->Handle(t->event, ok);
  }
}

}  // namespace zeroshard::server
