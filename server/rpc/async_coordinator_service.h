// The Coordinator service as the server registers it: KvWait and
// HeartbeatStream on gRPC's asynchronous API (kv_wait_calls.h,
// heartbeat_streams.h), every other method synchronous.
#pragma once

#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::server {

using AsyncCoordinatorService = v1::Coordinator::WithAsyncMethod_HeartbeatStream<
    v1::Coordinator::WithAsyncMethod_KvWait<v1::Coordinator::Service>>;

}  // namespace zeroshard::server
