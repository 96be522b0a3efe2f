#include "common/dtype.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kFp32:
      return "fp32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kInt64:
      return "int64";
    case DType::kFp64:
      return "fp64";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "fp32") return DType::kFp32;
  if (name == "bf16") return DType::kBf16;
  if (name == "fp16") return DType::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected fp32, bf16 or fp16)"));
}

}  // namespace zeroshard
