// The coordinator's gRPC services behind its AuthGate (auth_gate.h): each
// RPC is authorized (token role, member credential) and then handed to the
// wrapped service unchanged. Join also refuses a worker_id that a live
// member holds unless the call proves that member, and hands the new member
// its secret (JoinResponse.member_secret). KV and checkpoint writes are
// bound to the caller's rank (ranked_caller.h); the checkpoint guard sets
// `inner`'s writer check.
//
// Thread safety: as the wrapped services. `inner`, `gate` and `core` must
// outlive the returned service.
#pragma once

#include <memory>

#include "server/checkpoint/framed_checkpoint_service.h"
#include "server/core/coordinator_core.h"
#include "server/rpc/auth_gate.h"
#include "server/rpc/kv_wait_calls.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::server {

// The guard is what the server registers; its KvWait is asynchronous
// (kv_wait_calls.h authorizes those calls itself) and `inner`'s is unused.
std::unique_ptr<AsyncCoordinatorService> GuardCoordinatorService(v1::Coordinator::Service* inner,
                                                                 const AuthGate* gate,
                                                                 const CoordinatorCore* core);
std::unique_ptr<v1::CheckpointService::Service> GuardCheckpointService(
    FramedCheckpointService* inner, const AuthGate* gate, const CoordinatorCore* core);

}  // namespace zeroshard::server
