// The safetensors file format (huggingface/safetensors, "Format" in its
// README): an 8-byte little-endian unsigned header length N, N bytes of JSON
// header, then raw little-endian tensor data. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end)} (byte offsets into
// the data section) and may hold "__metadata__": {string: string}. Offsets
// must cover the data section exactly, without gaps or overlap. zeroshard
// pads the header with spaces to a multiple of 8 bytes so data is aligned.
//
// Writer: "F32", or "BF16" rounded to nearest even from the fp32 values the
// caller fills (what exports write). Reader: validates any file and reads
// F32 tensors (hf_weights.h reads BF16 and F16 too). Errors name the file
// and field.
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard {

struct SafetensorsEntry {
  std::string name;
  std::vector<int64_t> shape;  // Elements per dim; empty = scalar (1 element).
  std::string dtype = "F32";   // "F32" or "BF16" (as written).
};

// Writes `path` atomically (path.tmp, fsync, rename). For tensor i, `fill(i,
// dst)` writes its numel fp32 values to dst. INVALID_ARGUMENT for an empty,
// duplicate or "__metadata__" name, a negative dim or another dtype; fill's
// error otherwise. Memory: one tensor's fp32 values at a time.
absl::Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::function<absl::Status(size_t index, float* dst)>& fill);

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;  // e.g. "F32", "BF16".
  std::vector<int64_t> shape;
  int64_t begin = 0;  // Byte offsets into the data section.
  int64_t end = 0;
};

struct SafetensorsInfo {
  std::vector<SafetensorsTensorInfo> tensors;  // Ordered by begin.
  std::map<std::string, std::string> metadata;
  int64_t data_offset = 0;  // 8 + header length.
  int64_t data_bytes = 0;
};

// Reads and validates the header: JSON object; known dtypes; non-negative
// dims; end - begin = numel * dtype size; offsets cover [0, data_bytes)
// exactly. DATA_LOSS describing the first problem otherwise.
absl::StatusOr<SafetensorsInfo> ReadSafetensorsInfo(const std::string& path);

// Reads one F32 tensor's values. NOT_FOUND if absent, INVALID_ARGUMENT if not F32.
absl::StatusOr<std::vector<float>> ReadSafetensorsF32(const std::string& path,
                                                      const SafetensorsInfo& info,
                                                      const std::string& name);

}  // namespace zeroshard
