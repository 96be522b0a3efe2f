// Closed-loop HeartbeatStream load for coordinator_bench: every simulated
// worker opens its own stream on its channel and keeps one heartbeat in
// flight on it: the next is sent as
// soon as the previous one is answered. `threads` client threads each drive
// a completion queue of 1/threads of the streams.
//
// Thread safety: one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/channel.h"

namespace zeroshard::bench {

struct StreamLoadWorker {
  // Its own (carrying its member credential) or one several workers share.
  std::shared_ptr<grpc::Channel> channel;
  std::string job_id;
  uint64_t member_id = 0;
  // "<member_id>:<secret>" for the stream's own metadata, when the channel
  // does not carry the credential; "" = none.
  std::string member_header;
};

struct StreamLoadResult {
  double heartbeats_per_second = 0;  // Answered in the measured window.
  int64_t errors = 0;                // Streams that ended before the window did.
  double sampled = 0;                // sample() at the window's end minus at its start.
};

// Opens every stream, warms up for `warmup_seconds`, counts answers for
// `seconds`, then half-closes every stream and waits for it to end.
// `sample` (may be null; e.g. a process's CPU seconds) is read as the
// window opens and as it closes.
StreamLoadResult RunStreamLoad(const std::vector<StreamLoadWorker>& workers, int threads,
                               double warmup_seconds, double seconds,
                               const std::function<double()>& sample = nullptr);

}  // namespace zeroshard::bench
