// CheckpointStore's model-weight reads (checkpoint_store.h SetModelWeights):
// a rank's ranges of the job's units, straight from the model directory's
// safetensors, one chunk in memory at a time.
#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/core/validation.h"

namespace zeroshard::server {

void CheckpointStore::SetModelWeights(std::shared_ptr<const HfWeights> weights) {
  absl::MutexLock lock(&job_mu_);
  model_weights_ = std::move(weights);
}

absl::StatusOr<std::shared_ptr<const HfWeights>> CheckpointStore::ModelWeightsOf(
    absl::string_view job_id) {
  std::shared_ptr<const HfWeights> weights;
  {
    absl::MutexLock lock(&job_mu_);
    weights = model_weights_;
  }
  if (weights == nullptr) {
    return absl::FailedPreconditionError(
        "this coordinator serves no model weights (the job's "
        "model is not a directory with init pretrained)");
  }
  ZS_RETURN_IF_ERROR(CheckReadJob(job_id));
  return weights;
}

absl::StatusOr<CheckpointStore::ModelWeightsPart> CheckpointStore::OpenModelWeightsForLocalRead(
    const v1::LocalReadRequest& req) {
  ModelWeightsPart part;
  ZS_ASSIGN_OR_RETURN(part.weights, ModelWeightsOf(req.file().job_id()));
  const int files = static_cast<int>(part.weights->files().size());
  if (req.model_file() < 0 || req.model_file() > files) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file ", req.model_file(), " is not in [0, ", files, "]"));
  }
  if (req.model_file() > 0) {
    part.fd = part.weights->File(req.model_file() - 1).fd();
    return part;
  }
  for (const std::string& f : part.weights->files()) part.model.add_files(f);
  for (const HfWeights::TensorSource& t : part.weights->Sources()) {
    v1::LocalModelTensor* out = part.model.add_tensors();
    out->set_name(t.name);
    out->set_file(t.file);
    out->set_dtype(t.info.dtype);
    for (int64_t d : t.info.shape) out->add_shape(d);
    out->set_begin(t.info.begin);
    out->set_end(t.info.end);
    out->set_data_offset(t.data_offset);
  }
  return part;
}

absl::Status CheckpointStore::ReadModelWeights(const v1::DownloadRangeRequest& req,
                                               int64_t chunk_elems, const RangeSink& sink) {
  if (req.kind() != v1::TENSOR_KIND_MASTER) {
    return absl::InvalidArgumentError("model weights: only kind master exists");
  }
  ZS_ASSIGN_OR_RETURN(const std::shared_ptr<const HfWeights> weights, ModelWeightsOf(req.job_id()));
  ZS_ASSIGN_OR_RETURN(std::optional<CheckpointJob> job, Job());
  if (!job.has_value() || job->units.empty()) {
    return absl::UnavailableError("model weights: the job's units are not known yet");
  }
  // The unit under the running world size's plan: its padding is the most a
  // rank's shard can reach past the parameters.
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan,
                      MakeShardPlan(job->units, std::max(1, job->world_size), job->alignment));
  const UnitPlan* unit = plan.FindUnit(req.unit());
  if (unit == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unit \"", req.unit(), "\" is not the job's"));
  }
  // [Note: overflow-safe ranges]: offset + length may not fit in int64.
  ZS_RETURN_IF_ERROR(CheckRange(req.offset(), req.length(), unit->padded_numel,
                                absl::StrCat("unit ", req.unit(), "'s padded elements").c_str()));
  v1::RangeChunk chunk;
  chunk.set_step(0);
  const int64_t end = req.offset() + req.length();
  for (int64_t off = req.offset(); off < end; off += chunk_elems) {
    const int64_t n = std::min(chunk_elems, end - off);
    // BF16 tensors as their bits where the caller widens them.
    const bool bf16 = req.accept_bf16() && weights->IsBf16Range(*unit, off, n);
    const int64_t bytes = n * (bf16 ? 2 : 4);
    char* data = sink.buffer(static_cast<size_t>(bytes));
    ZS_RETURN_IF_ERROR(
        bf16 ? weights->ReadUnitRangeBf16(*unit, off, n, reinterpret_cast<uint16_t*>(data))
             : weights->ReadUnitRange(*unit, off, n, reinterpret_cast<float*>(data)));
    chunk.set_offset(off);
    chunk.set_length(n);
    chunk.set_bf16(bf16);
    chunk.set_xxhash64(XXH64(data, static_cast<size_t>(bytes), 0));
    ZS_RETURN_IF_ERROR(sink.send(chunk));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard::server
