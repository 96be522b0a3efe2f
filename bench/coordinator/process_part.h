// coordinator_bench's part 0 (--server-process): the coordinator in a
// child process (server_process.h), its own CPU per heartbeat, unary and
// over HeartbeatStream, and the heartbeat rate its cores would then carry.
#pragma once

#include "bench/coordinator/bench_workers.h"
#include "bench/coordinator/server_process.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard::bench {

// Joins f.workers workers to `process` and measures; returns the exit code.
int ServerProcessPart(const Flags& f, ServerProcess& process);

}  // namespace zeroshard::bench
