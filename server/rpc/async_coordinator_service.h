// The Coordinator service as the server registers it: KvWait and
// HeartbeatStream on gRPC's asynchronous API (kv_wait_calls.h,
// heartbeat_streams.h), every other method synchronous. HeartbeatStream is
// raw (byte buffers): the stream parses each request itself, so a
// malformed one gets INVALID_ARGUMENT instead of looking like a half-close.
#pragma once

#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::server {

using AsyncCoordinatorService = v1::Coordinator::WithRawMethod_HeartbeatStream<
    v1::Coordinator::WithAsyncMethod_KvWait<v1::Coordinator::Service>>;

}  // namespace zeroshard::server
