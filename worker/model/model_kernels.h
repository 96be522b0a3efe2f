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
#include "common/dtype.h"
#include "common/model/model_config.h"
#include "worker/device/device.h"
#include "worker/model/kernels.h"

namespace zeroshard {

struct ModelKernels {
  Kernels* kernels = nullptr;      // What the model calls; valid while this lives.
  std::unique_ptr<Kernels> owned;  // Set when made for this device (CUDA).
  // Device bytes the kernels hold between calls (the CUDA workspace, kept
  // for the job's life); 0 on the CPU, whose scratch lives per call.
  int64_t scratch_held() const;
};

// For `device` (which must outlive the result) and `model` (its vocabulary
// sizes the CUDA embedding kernels). On CUDA, `compute_dtype` kBf16 makes
// the matmuls bf16 with fp32 accumulation (CudaKernelsOptions::bf16_matmul;
// the job's --compute-dtype); kFp32 keeps them fp32. The CPU kernels are
// fp32 either way (the engine hands them fp32 views). Errors:
// FAILED_PRECONDITION for a device kind this build has no kernels for;
// CudaKernels::Create's.
absl::StatusOr<ModelKernels> CreateModelKernels(Device& device, const ModelConfig& model,
                                                DType compute_dtype = DType::kFp32);

}  // namespace zeroshard
