// A communicator by backend name, for code that picks the backend from a flag
// ("gloo" on CPU, "nccl" on GPU) without including a backend header.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace zeroshard {

struct CommunicatorOptions {
  std::string hostname = "127.0.0.1";          // gloo: address to listen on and advertise.
  absl::Duration timeout = absl::Seconds(60);  // Rendezvous and connection timeout.
  int cuda_device = -1;                        // nccl: device ordinal; -1 = rank % devices.
};

// backend: "gloo" or "nccl". Errors: INVALID_ARGUMENT for another name;
// FAILED_PRECONDITION for "nccl" when this build has no NCCL or the machine
// has no usable GPU; otherwise as the backend's factory.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const std::string& backend, Store& store, const std::string& prefix, int rank, int world_size,
    const CommunicatorOptions& options = {});

}  // namespace zeroshard
