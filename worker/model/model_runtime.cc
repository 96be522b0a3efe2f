#include "worker/model/model_runtime.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/device/device_factory.h"
#include "worker/model/kernel_constants.h"

namespace zeroshard {
namespace {

// Ids in [0, vocab); targets may also be kIgnoreTarget (not counted).
absl::Status CheckTokens(const char* what, const int32_t* ids, int64_t n, int vocab, bool targets) {
  for (int64_t i = 0; i < n; ++i) {
    if (targets && ids[i] == kIgnoreTarget) continue;
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: ", what, "[", i, "] = ", ids[i], " is outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

int64_t Padded(int64_t n) { return (n + 15) / 16 * 16; }  // 64-byte boundaries.

}  // namespace

ModelRuntime::ModelRuntime(Kernels& kernels, Device* device) : k_(kernels), device_(device) {
  if (device_ == nullptr) {
    absl::StatusOr<std::unique_ptr<Device>> cpu = CreateDevice({"cpu", -1, 1});
    ZS_CHECK(cpu.ok());
    owned_device_ = std::move(cpu).value();
    device_ = owned_device_.get();
  }
  arena_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
  tokens_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
  loss_sum_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
}

absl::Status ModelRuntime::Validate(const ModelConfig& config, const int32_t* inputs,
                                    const int32_t* targets, int B, int T,
                                    int64_t widest_row) const {
  if (inputs == nullptr) return absl::InvalidArgumentError("model: inputs must not be null");
  if (B < 1)
    return absl::InvalidArgumentError(absl::StrCat("model: batch B must be >= 1, got ", B));
  if (T < 1 || T > config.n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: sequence length T must be in [1, ", config.n_ctx, "], got ", T));
  }
  const int64_t n = int64_t{B} * T;
  if (n * widest_row > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: micro-batch B * T = ", n, " tokens is too large for one call"));
  }
  ZS_RETURN_IF_ERROR(CheckTokens("inputs", inputs, n, config.vocab, false));
  return targets == nullptr ? absl::OkStatus()
                            : CheckTokens("targets", targets, n, config.vocab, true);
}

int64_t ModelRuntime::Floats(const std::vector<ModelArray*>& arrays) {
  int64_t floats = 0;
  for (const ModelArray* a : arrays) floats += Padded(a->n);
  return floats;
}

absl::Status ModelRuntime::LayOut(const std::vector<ModelArray*>& arrays) {
  const int64_t floats = Floats(arrays);
  if (floats * 4 > arena_.bytes()) {
    // Zeroed: nothing reads before writing, but a recompute workspace or a
    // scratch never holds another allocation's leftovers.
    absl::Status grown = arena_.Allocate(floats * 4);
    if (!grown.ok()) {
      return absl::Status(grown.code(), absl::StrCat("model activations (", floats * 4,
                                                     " bytes): ", grown.message()));
    }
  }
  float* next = arena_.as<float>();
  for (ModelArray* a : arrays) {
    a->ptr = next;
    next += Padded(a->n);
  }
  return absl::OkStatus();
}

absl::StatusOr<const int32_t*> ModelRuntime::DeviceTokens(const int32_t* host, int which,
                                                          int64_t bt) {
  if (device_->kind() == DeviceKind::kCpu) return host;
  if (tokens_.bytes() < 2 * bt * 4) ZS_RETURN_IF_ERROR(tokens_.Allocate(2 * bt * 4));
  int32_t* dst = tokens_.as<int32_t>() + which * bt;
  // Stream-ordered after the previous call's kernels that read these ids.
  ZS_RETURN_IF_ERROR(device_->Copy(dst, host, bt * 4));
  return dst;
}

void ModelRuntime::Keep(const absl::Status& s) {
  if (status_.ok() && !s.ok()) status_ = s;
}

void ModelRuntime::Zero(const ModelArray& a) { Keep(device_->Memset(a.ptr, 0, a.n * 4)); }

double* ModelRuntime::LossSum() {
  if (!loss_sum_.allocated()) {
    absl::Status s = loss_sum_.Allocate(sizeof(double));
    if (!s.ok()) {
      Keep(s);
      return nullptr;
    }
  }
  return loss_sum_.as<double>();
}

void ModelRuntime::CopyToHost(void* dst, const void* src, int64_t bytes) {
  if (status_.ok() && bytes > 0) Keep(device_->Copy(dst, src, bytes));
}

absl::Status ModelRuntime::Finish(void* dst, const void* src, int64_t bytes) {
  CopyToHost(dst, src, bytes);
  absl::Status s = std::exchange(status_, absl::OkStatus());
  absl::Status kernels = k_.TakeStatus();  // Taken either way: none outlives its call.
  if (s.ok()) s = kernels;
  // The call's work is done (or failed) before it returns, whatever happened.
  absl::Status done = device_->Synchronize(wait_);
  return s.ok() ? done : s;
}

absl::StatusOr<double> ModelRuntime::FinishCall() {
  double sum = 0.0;
  ZS_RETURN_IF_ERROR(Finish(&sum, loss_sum_.data(), sizeof(double)));
  return sum;
}

}  // namespace zeroshard
