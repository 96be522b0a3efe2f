#include "common/memory_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"

namespace zeroshard {
namespace {

absl::Status Validate(const MemoryModelInputs& in) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!IsZeroStage(in.stage)) return bad("stage: ", in.stage, " (expected 0..3)");
  for (DType d : {in.compute_dtype, in.reduce_dtype}) {
    if (d != DType::kFp32 && d != DType::kBf16) {
      return bad("dtype: ", DTypeName(d), " (expected fp32 or bf16)");
    }
  }
  if (in.offload_params_nvme && !ZeroStageOf(in.stage).shards_params) {
    return bad("offload params: nvme needs stage 3");
  }
  if (in.offload_prefetch < 0 || in.offload_prefetch > 64) {
    return bad("offload prefetch: ", in.offload_prefetch, " (expected 0..64)");
  }
  if (in.gather_prefetch < 0 || in.gather_prefetch > 64) {
    return bad("gather prefetch: ", in.gather_prefetch, " (expected 0..64)");
  }
  if (in.bucket_bytes < 0) return bad("bucket bytes: ", in.bucket_bytes, " (expected >= 0)");
  if (in.redundancy < 0 || in.redundancy > 1)
    return bad("redundancy: ", in.redundancy, " (expected 0 or 1)");
  if (in.activation_bytes < 0) return bad("activation bytes: must be >= 0");
  return absl::OkStatus();
}

// Optimizer state, offload and redundancy from the optimizer-range sizes:
// `opt_elems` their sum, `max_n` the largest, `units` how many (one NVMe
// file each, every segment block-aligned: `aligned_bytes` = sum over units
// of 3 * AlignUp(4 n_u)).
void AddOptimizer(const MemoryModelInputs& in, int world_size, int64_t opt_elems, int64_t max_n,
                  int64_t aligned_bytes, MemoryPrediction& out) {
  const int64_t state = kAdamStateBytesPerParam * opt_elems;
  switch (in.offload_optimizer) {
    case OptimizerOffload::kNone:
      out.state.optimizer = state;
      break;
    case OptimizerOffload::kHost:
      out.host_offload = state;
      break;
    case OptimizerOffload::kNvme:
      out.state.optimizer = OffloadStagingBytes(in.offload_optimizer, max_n, false);
      out.nvme = aligned_bytes;
      break;
  }
  // The pinned host-update staging on a GPU is counted as buffers.
  if (in.cuda && in.offload_optimizer != OptimizerOffload::kNone) out.state.buffers = 8 * max_n;
  const bool own_only = ZeroStageOf(in.stage).replicated() || world_size == 1;
  out.state.redundancy = in.redundancy == 0 ? 0 : (own_only ? 1 : 3) * state;
}

// The engine's EngineContext::master_is_params: with fp32 compute, state
// resident and no parameter offload the master weights are part of the
// compute copy, so the optimizer holds only m and v (8 bytes an element).
void ShareMasterWithParams(const MemoryModelInputs& in, int64_t opt_elems, MemoryPrediction& out) {
  if (in.compute_dtype == DType::kFp32 && in.offload_optimizer == OptimizerOffload::kNone &&
      !in.offload_params_nvme) {
    out.state.optimizer -= 4 * opt_elems;
  }
}

}  // namespace

absl::StatusOr<OptimizerOffload> ParseOptimizerOffload(const std::string& text) {
  if (auto v = FromWord(kOptimizerOffloadWords, text)) return *v;
  return absl::InvalidArgumentError(absl::StrCat("offload optimizer: '", text, "' (expected ",
                                                 WordList(kOptimizerOffloadWords), ")"));
}

const char* OptimizerOffloadName(OptimizerOffload offload) {
  return WordOf(kOptimizerOffloadWords, offload).data();  // Literals: NUL-terminated.
}

int64_t OffloadStagingBytes(OptimizerOffload offload, int64_t max_n, bool cuda) {
  if (offload == OptimizerOffload::kNone) return 0;
  const int64_t host_update = cuda ? 8 * max_n : 0;
  if (offload == OptimizerOffload::kHost) return host_update;
  return kOffloadStagingSlots * 3 * AlignToOffloadBlock(4 * max_n) + host_update;
}

int64_t GatherBufferBound(const ShardPlan& plan, int stage, DType compute_dtype, DType reduce_dtype,
                          int prefetch, int64_t bucket_bytes) {
  int64_t max_padded = 0;
  for (const UnitPlan& u : plan.units) max_padded = std::max(max_padded, u.padded_numel);
  const int64_t c = DTypeSize(compute_dtype), g = DTypeSize(reduce_dtype);
  const int64_t view = compute_dtype == DType::kBf16 ? 4 * max_padded : 0;
  const int64_t step = 4 * max_padded + 8;
  const ZeroStage& z = ZeroStageOf(stage);
  if (bucket_bytes <= 0) {
    const int64_t gathers = z.shards_params ? (1 + prefetch) * c * max_padded : 0;
    const int64_t grads = (4 + (z.shards_grads ? g : 0)) * max_padded;
    return gathers + view + grads + step;
  }
  const int64_t total = plan.total_padded_numel();
  const int64_t gather = std::max(max_padded, std::min(bucket_bytes / c, total));
  const int64_t reduce = std::max(max_padded, std::min(bucket_bytes / g, total));
  const int64_t gathers = z.shards_params ? std::min((1 + prefetch) * gather, total) * c : 0;
  // A reduce bucket waits only while under B (a full one goes at once).
  const int64_t waiting = std::min(bucket_bytes / g, total);
  const int64_t grads = 4 * max_padded + (z.shards_grads ? g * reduce + 4 * waiting : 0);
  return gathers + view + grads + step;
}

absl::StatusOr<MemoryPrediction> PredictMemory(const ShardPlan& plan, const MemoryModelInputs& in) {
  ZS_RETURN_IF_ERROR(Validate(in));
  const int64_t c = DTypeSize(in.compute_dtype), g = DTypeSize(in.reduce_dtype);
  MemoryPrediction out;
  int64_t opt_elems = 0, max_n = 0, aligned = 0, params_aligned = 0, max_shard = 0;
  for (const UnitPlan& u : plan.units) {
    const int64_t n = OptimizerRange(u, in.stage, 0).length;
    opt_elems += n;
    max_n = std::max(max_n, n);
    aligned += 3 * AlignToOffloadBlock(4 * n);
    params_aligned += AlignToOffloadBlock(c * u.shard_numel);
    max_shard = std::max(max_shard, u.shard_numel);
  }
  const int64_t padded = plan.total_padded_numel(), shard = plan.total_shard_numel();
  const ZeroStage& z = ZeroStageOf(in.stage);
  out.state.params = c * (z.shards_params ? shard : padded);
  out.state.grads = g * (z.shards_grads ? shard : padded);
  AddOptimizer(in, plan.world_size, opt_elems, max_n, aligned, out);
  ShareMasterWithParams(in, opt_elems, out);
  if (in.offload_params_nvme) {
    // Only the staging slots stay resident; each unit's shard is read into
    // them ahead of its all-gather.
    out.state.params = ParamStagingBytes(in.offload_prefetch, c * max_shard);
    out.nvme += params_aligned;
  }
  out.state.offloaded = out.host_offload + out.nvme;
  out.gather_buffers = GatherBufferBound(plan, in.stage, in.compute_dtype, in.reduce_dtype,
                                         in.gather_prefetch, in.bucket_bytes);
  out.activations = in.activation_bytes;
  return out;
}

absl::StatusOr<MemoryPrediction> PredictMemoryFromParams(int64_t psi, int world_size,
                                                         const MemoryModelInputs& in) {
  ZS_RETURN_IF_ERROR(Validate(in));
  if (world_size < 1) return absl::InvalidArgumentError("world size: must be >= 1");
  if (psi < 0) return absl::InvalidArgumentError("parameter count: must be >= 0");
  const int c = static_cast<int>(DTypeSize(in.compute_dtype));
  const int g = static_cast<int>(DTypeSize(in.reduce_dtype));
  const MemoryByKind paper = ZeroFormulaBytes(in.stage, psi, world_size, c, g);
  MemoryPrediction out;
  out.state.params = paper.params;
  out.state.grads = paper.grads;
  const int64_t opt_elems = paper.optimizer / kAdamStateBytesPerParam;
  // Staging depends on the unit sizes, unknown here: left 0.
  AddOptimizer(in, world_size, opt_elems, 0, kAdamStateBytesPerParam * opt_elems, out);
  ShareMasterWithParams(in, opt_elems, out);
  if (in.offload_params_nvme) {
    out.nvme += out.state.params;
    out.state.params = 0;
  }
  out.state.offloaded = out.host_offload + out.nvme;
  out.activations = in.activation_bytes;
  return out;
}

}  // namespace zeroshard
