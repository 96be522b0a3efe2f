// Ranks as processes for comm_bandwidth_bench (--ranks processes): N forked
// children, each creating its communicator through a FileStore in a fresh
// directory, as separate workers on one host do (`zeroshard launch` starts
// one process per rank). Each child runs `body` on its communicator and
// hands back the seconds it measured.
//
// Thread safety: call from a process with no other live thread (fork).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "worker/comm/communicator.h"

namespace zeroshard {

// Per rank, the values `body` returned in that rank's process; empty when a
// child failed to connect, crashed or returned a different number of values
// (the reason printed to stderr).
std::vector<std::vector<double>> RunRankProcesses(
    const std::string& backend, int world_size,
    const std::function<std::vector<double>(Communicator&)>& body);

}  // namespace zeroshard
