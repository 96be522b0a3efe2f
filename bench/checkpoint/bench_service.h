// The checkpoint service checkpoint_bench measures: a CheckpointStore over a
// directory and its CheckpointService on a loopback port, with no job to
// check requests against (the bench's plan is not a model's). Served from
// checkpoint_bench_server, a process of its own linked as the coordinator
// is (its allocator included, cmake/Allocator.cmake), as a deployment
// serves checkpoints from the coordinator's process.
#pragma once

#include <memory>
#include <string>

#include "common/rpc/rpc_security.h"
#include "grpcpp/server.h"
#include "server/checkpoint/checkpoint_service.h"
#include "server/checkpoint/local_read_server.h"

namespace zeroshard::bench {

struct CheckpointBenchService {
  std::unique_ptr<server::CheckpointStore> store;
  // Local reads of the store (the coordinator offers them by default).
  std::unique_ptr<server::LocalReadServer> local_reads;
  std::unique_ptr<server::CheckpointServiceImpl> impl;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Serves a store in `dir` on 127.0.0.1 (a free port); `tls` empty =
// plaintext, else mTLS with its server certificate. Exits the process with
// the reason on stderr if the store or the credentials fail.
CheckpointBenchService StartCheckpointBenchService(const std::string& dir, const TlsFiles& tls);

}  // namespace zeroshard::bench
