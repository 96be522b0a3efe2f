// What every model family does around its passes, in one place: the Device
// its memory lives on, the activation arena (arrays laid out in one
// allocation, each 64-byte aligned, grown to the largest micro-batch), token
// ids on the device, the call's first error, and the end of a call (the
// loss sum back to the host, the device's wait). GptModel and LlamaModel
// each own one. Not thread-safe: one model thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "worker/device/device.h"
#include "worker/device/device_buffer.h"
#include "worker/device/memory_accounting.h"
#include "worker/model/kernels.h"

namespace zeroshard {

// `n` floats of a model's arena (device memory).
struct ModelArray {
  float* ptr = nullptr;
  int64_t n = 0;
  float* data() const { return ptr; }
  int64_t size() const { return n; }
};

class ModelRuntime {
 public:
  // `kernels` must outlive this; null `device` = a CPU device owned here.
  ModelRuntime(Kernels& kernels, Device* device);

  Device& device() { return *device_; }
  Kernels& kernels() { return k_; }
  MemoryAccountant& accountant() { return accountant_; }

  // INVALID_ARGUMENT naming the field: null pointers, B < 1, T outside
  // [1, n_ctx], B * T * widest_row beyond int (the kernels' sizes), a token
  // outside [0, vocab). `targets` may be null (inference).
  absl::Status Validate(const ModelConfig& config, const int32_t* inputs, const int32_t* targets,
                        int B, int T, int64_t widest_row) const;
  // Lays `arrays` (sizes set) out in the arena, growing it (zeroed) when
  // they do not fit; RESOURCE_EXHAUSTED naming the bytes otherwise.
  absl::Status LayOut(const std::vector<ModelArray*>& arrays);
  // Floats `arrays` take in the arena (each padded to 16).
  static int64_t Floats(const std::vector<ModelArray*>& arrays);
  // Token ids in device memory: `host` itself on the CPU, else copied
  // (stream-ordered) into slot `which` (0 inputs, 1 targets) of bt ids.
  absl::StatusOr<const int32_t*> DeviceTokens(const int32_t* host, int which, int64_t bt);
  // Zero-fills `a` (device memset); a failure is kept (Keep).
  void Zero(const ModelArray& a);
  // Keeps the first error of a pass.
  void Keep(const absl::Status& s);
  // The one double the loss is summed into (allocated on first use; null,
  // with the error kept, when that fails).
  double* LossSum();
  // Ends a call that summed a loss: the sum on the host, else the first error.
  absl::StatusOr<double> FinishCall();
  // Ends a call: copies `bytes` from device memory `src` to host `dst`
  // first (none when bytes is 0), then the first of the kept error, the
  // kernels' error and the device's wait (bounded by the wait), each taken
  // so none carries over to the next call.
  absl::Status Finish(void* dst = nullptr, const void* src = nullptr, int64_t bytes = 0);
  // Copies to host memory now, in stream order (a kept error if it fails).
  void CopyToHost(void* dst, const void* src, int64_t bytes);
  void set_wait(absl::Duration wait) { wait_ = wait; }

 private:
  Kernels& k_;
  std::unique_ptr<Device> owned_device_;
  Device* device_ = nullptr;
  MemoryAccountant accountant_;  // The model's own buffers (not the engine's).
  DeviceBuffer arena_;           // Every array of the model's activations.
  DeviceBuffer tokens_;          // Off the CPU: inputs and targets.
  DeviceBuffer loss_sum_;        // One double.
  absl::Status status_;          // First device error inside a pass.
  absl::Duration wait_ = absl::Minutes(10);
};

}  // namespace zeroshard
