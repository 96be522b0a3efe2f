// What a worker keeps for the whole job, across generations: the job's
// config (with this worker's offload overrides), the model, the corpus,
// its device and the model's kernels on it, the resolved backend, and the
// training state handed over by the last generation or copied by peers.
//
// Thread safety: the training thread only.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/job_config.h"
#include "common/model/model_config.h"
#include "common/rpc/coordinator_client.h"
#include "worker/data/text_corpus.h"
#include "worker/device/device.h"
#include "worker/model/model_kernels.h"
#include "worker/trainer/live_reshard.h"
#include "worker/trainer/peer_replica.h"
#include "worker/trainer/worker_runtime.h"

namespace zeroshard {

struct JobContext {
  JobConfig job;
  ModelConfig model;
  std::unique_ptr<TextCorpus> corpus;
  std::unique_ptr<Device> device;                // This worker's, for every generation.
  ModelKernels kernels;                          // The model's, on `device`.
  BackendChoice backend = BackendChoice::kGloo;  // job.backend resolved for the device.
  std::vector<HeldState> held;                   // Handed over by the last generation.
  // --redundancy 1's copies (a pointer: JobContext moves, the copies' byte
  // counters do not).
  std::unique_ptr<PeerReplica> replica = std::make_unique<PeerReplica>();
};

// "auto": NCCL on a CUDA device, Gloo on the CPU. Gloo over device memory
// is the host-staged backend.
BackendChoice ResolveBackend(BackendChoice backend, DeviceKind device);

// Reads job `job_id`'s config from the coordinator, applies `options`'
// offload overrides (an NVMe directory is checked for room), loads the
// corpus with the job's tokenizer, and creates the device and kernels.
// Errors: the coordinator's, a refused config or offload directory
// (a job refusal: exit 2), the data's, the device's.
absl::StatusOr<JobContext> LoadJob(CoordinatorClient& client, const WorkerOptions& options,
                                   const std::string& job_id);

}  // namespace zeroshard
