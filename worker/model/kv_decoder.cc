#include "worker/model/kv_decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/gpt_decoder.h"
#include "worker/model/llama_decoder.h"

namespace zeroshard {
namespace {

int CachePositions(const ModelConfig& config, int wanted) {
  return wanted > 0 ? std::min(wanted, config.n_ctx) : config.n_ctx;
}

}  // namespace

KvDecoder::KvDecoder(const ModelConfig& config, const DecodeTarget& target, int kv_heads,
                     int head_dim)
    : config_(config),
      rt_(target.kernels != nullptr ? *target.kernels : CpuKernels(), target.device),
      k_(rt_.kernels()),
      cache_(config.n_head, kv_heads, head_dim, CachePositions(config, target.positions)) {}

absl::StatusOr<const float*> KvDecoder::Place(const std::vector<float>& host, DeviceBuffer* held) {
  if (rt_.device().kind() == DeviceKind::kCpu) return host.data();
  *held = DeviceBuffer(&rt_.device(), &rt_.accountant(), MemoryKind::kParams);
  const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(float));
  ZS_RETURN_IF_ERROR(held->AllocateUninitialized(std::max<int64_t>(bytes, sizeof(float))));
  ZS_RETURN_IF_ERROR(rt_.device().Copy(held->data(), host.data(), bytes));
  return held->as<const float>();
}

absl::Status KvDecoder::Setup(const std::vector<std::vector<float>>& units) {
  placed_.resize(units.size());
  units_.clear();
  for (size_t i = 0; i < units.size(); ++i) {
    ZS_ASSIGN_OR_RETURN(const float* p, Place(units[i], &placed_[i]));
    units_.push_back(p);
  }
  ZS_RETURN_IF_ERROR(PlaceTables());
  ZS_RETURN_IF_ERROR(cache_.Allocate(&rt_.device(), &rt_.accountant(), config_.n_layer));
  return rt_.Finish();  // The copies have landed (the host side may change after).
}

absl::Status KvDecoder::Append(absl::Span<const int32_t> tokens, std::vector<float>* logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return absl::InvalidArgumentError("no tokens to append");
  if (pos_ + n > positions()) {
    return absl::InvalidArgumentError(
        absl::StrCat("position ", pos_ + n, " is past the ", positions(), " the cache holds"));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= config_.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", t, " is outside [0, ", config_.vocab, ")"));
    }
  }
  const float* out = nullptr;
  ZS_RETURN_IF_ERROR(Run(tokens.data(), n, &out));
  logits->resize(config_.vocab);
  ZS_RETURN_IF_ERROR(rt_.Finish(logits->data(), out, int64_t{config_.vocab} * sizeof(float)));
  pos_ += n;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvDecoder>> CreateKvDecoder(
    const ModelConfig& config, const std::vector<std::vector<float>>& units,
    const DecodeTarget& target) {
  if (target.device != nullptr && target.device->kind() != DeviceKind::kCpu &&
      target.kernels == nullptr) {
    return absl::InvalidArgumentError("a decoder on a device needs that device's kernels");
  }
  std::unique_ptr<KvDecoder> d;
  if (config.is_llama()) {
    d = std::make_unique<LlamaDecoder>(config, target);
  } else {
    d = std::make_unique<GptDecoder>(config, target);
  }
  ZS_RETURN_IF_ERROR(d->Setup(units));
  return d;
}

}  // namespace zeroshard
