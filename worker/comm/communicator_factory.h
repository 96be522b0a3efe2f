// A communicator by backend name, for code that picks the backend from a flag
// ("gloo" on CPU, "shm" on CPU with every rank on one host, "nccl" on GPU,
// "host-staged" for device buffers over Gloo)
// without including a backend header.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace zeroshard {

class Device;  // worker/device/device.h; only host-staged needs it.

struct CommunicatorOptions {
  std::string hostname = "127.0.0.1";          // gloo: address to listen on and advertise.
  absl::Duration timeout = absl::Seconds(60);  // Rendezvous and connection timeout.
  int cuda_device = -1;                        // nccl: device ordinal; -1 = rank % devices.
  // host-staged: the device whose memory the buffers are; must outlive the
  // communicator. Null: "host-staged" is INVALID_ARGUMENT. nccl: when set,
  // its ordinal and stream (ops wait for work issued on it) are used.
  Device* device = nullptr;
};

// backend: "gloo", "shm" (shm_communicator.h: ranks of one host through
// shared memory), "nccl" or "host-staged" (a Gloo communicator with these
// options wrapped for options.device; host_staged_communicator.h). Errors:
// INVALID_ARGUMENT for another name or "host-staged" without a device;
// FAILED_PRECONDITION for "nccl" when this build has no NCCL or the machine
// has no usable GPU; otherwise as the backend's factory.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const std::string& backend, Store& store, const std::string& prefix, int rank, int world_size,
    const CommunicatorOptions& options = {});

}  // namespace zeroshard
