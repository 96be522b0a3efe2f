// The tensors of a Hugging Face model directory, read by name and element
// range without loading a file whole: model.safetensors, or
// model.safetensors.index.json and the shard files its weight_map names
// (huggingface/safetensors's format; transformers' save_pretrained with
// max_shard_size). F32, BF16 and F16 tensors convert to fp32 as they are
// read (BF16: the upper 16 bits of an fp32; F16: IEEE 754 binary16,
// subnormals included), so memory stays bounded by the caller's buffer.
//
// Errors name the file and the tensor: NOT_FOUND for a directory with
// neither file or an index naming a shard that is missing; DATA_LOSS for a
// malformed or truncated file (ReadSafetensorsInfo's checks) or a short
// read; FAILED_PRECONDITION for a tensor a model needs that is missing, of
// another shape, or of a dtype other than F32/BF16/F16.
// Reads go through ReadOnlyFile (common/formats/read_only_file.h): straight from
// the disk where the range is not in the page cache.
// Thread-safe after Open: reads use pread on descriptors opened once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/formats/read_only_file.h"
#include "common/formats/safetensors.h"
#include "common/shard_plan.h"

namespace zeroshard {

class HfWeights {
 public:
  static absl::StatusOr<HfWeights> Open(const std::string& dir);
  // Open, then CheckUnits(units): the weights of a model that will load,
  // or the first reason they will not.
  static absl::StatusOr<HfWeights> OpenFor(const std::string& dir,
                                           const std::vector<UnitSpec>& units);

  // Every parameter of `units` present with its shape and a readable dtype.
  absl::Status CheckUnits(const std::vector<UnitSpec>& units) const;
  // Elements [first, first + count) of tensor `name` (row-major), as fp32.
  absl::Status Read(const std::string& name, int64_t first, int64_t count, float* dst) const;
  // Elements [offset, offset + length) of `unit`'s flat buffer (padding is
  // zero), parameter by parameter: what a rank's shard of the unit holds.
  absl::Status ReadUnitRange(const UnitPlan& unit, int64_t offset, int64_t length,
                             float* dst) const;
  // Every unit of `plan` whole (padding zero), as one process running the
  // model needs it (tests, `zeroshard generate`): memory for all of them.
  absl::StatusOr<std::vector<std::vector<float>>> ReadWholeUnits(const ShardPlan& plan) const;
  // Every tensor [offset, offset + length) of `unit` touches is stored as
  // BF16 (a range of padding alone too).
  bool IsBf16Range(const UnitPlan& unit, int64_t offset, int64_t length) const;
  // ReadUnitRange's bfloat16 bits as stored (padding zero), with no
  // conversion; the range must pass IsBf16Range (FAILED_PRECONDITION).
  absl::Status ReadUnitRangeBf16(const UnitPlan& unit, int64_t offset, int64_t length,
                                 uint16_t* dst) const;
  // The tensor's dtype ("BF16", ...), or "" when absent.
  std::string DType(const std::string& name) const;
  // Where each tensor lies, and the open files: for handing the weights to
  // another process (local reads), which rebuilds them with FromParts.
  struct TensorSource {
    std::string name;
    int file = 0;  // Index into files().
    SafetensorsTensorInfo info;
    int64_t data_offset = 0;  // The file's data section.
  };
  std::vector<TensorSource> Sources() const;
  const ReadOnlyFile& File(int i) const;  // files()[i]; 0 <= i < files().size().
  // Weights over `opened[i]` holding `files[i]`, with tensors as Sources
  // described them (checked where they came from: no CheckUnits here).
  // INVALID_ARGUMENT for a source naming a file out of range or a tensor
  // whose dtype cannot be read.
  static absl::StatusOr<HfWeights> FromParts(std::vector<std::string> files,
                                             std::vector<ReadOnlyFile> opened,
                                             const std::vector<TensorSource>& sources);
  // Bytes of tensor data in all files (what a plain read of them moves).
  int64_t data_bytes() const { return data_bytes_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  // OK when IsBf16Range; else FAILED_PRECONDITION naming the first tensor
  // that is not BF16.
  absl::Status CheckBf16Range(const UnitPlan& unit, int64_t offset, int64_t length) const;
  struct Source {
    int file = 0;  // Index into files_ / fds_.
    SafetensorsTensorInfo info;
    int64_t data_offset = 0;
  };
  // Bytes [at, at + bytes) of s's file; errors name the tensor.
  absl::Status ReadBytes(const Source& s, const std::string& name, void* dst, int64_t bytes,
                         int64_t at) const;
  struct Fds;  // The open files.
  std::vector<std::string> files_;
  std::shared_ptr<Fds> fds_;
  std::map<std::string, Source> tensors_;
  int64_t data_bytes_ = 0;
};

// fp32 from IEEE 754 binary16 bits (bfloat16: Bf16ToFloat, common/dtype.h).
float HalfToFloat(uint16_t h);

}  // namespace zeroshard
