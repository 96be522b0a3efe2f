// The kernels a GptModel computes with on a given Device: CpuKernels() on the
// CPU, a CudaKernels on a CUDA device (in builds with CUDA; elsewhere a CUDA
// device cannot exist). Kept apart from kernels.h so the CPU model's target
// does not depend on the CUDA one.
//
// Thread safety: as Kernels (one thread at a time per returned object).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/device/device.h"
#include "worker/model/kernels.h"
#include "worker/model/model_config.h"

namespace zeroshard {

struct ModelKernels {
  Kernels* kernels = nullptr;      // What the model calls; valid while this lives.
  std::unique_ptr<Kernels> owned;  // Set when made for this device (CUDA).
};

// For `device` (which must outlive the result) and `model` (its vocabulary
// sizes the CUDA embedding kernels). `allow_tf32`: CUDA matmuls on TF32
// tensor cores (ignored on the CPU). Errors: FAILED_PRECONDITION for a
// device kind this build has no kernels for; CudaKernels::Create's.
absl::StatusOr<ModelKernels> CreateModelKernels(Device& device, const ModelConfig& model,
                                                bool allow_tf32 = false);

// Bytes the kernels allocate beyond the model's activations, in the device's
// memory, for a micro-batch of B sequences of T tokens: on the CPU the
// matmuls' scratch reserve (CpuKernelsScratchBytes); on CUDA the attention
// backward's workspace, 7 B*T*C + B*NH*T*T floats (cuda_kernels.h).
int64_t ModelKernelsScratchBytes(DeviceKind kind, const ModelConfig& model, int B, int T);

}  // namespace zeroshard
