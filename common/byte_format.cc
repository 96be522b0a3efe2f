#include "common/byte_format.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zeroshard {
namespace {

ByteUnit UnitFor(int64_t largest, double step, const char* const (&names)[5]) {
  ByteUnit unit{names[0], 1};
  double size = step;
  for (int i = 1; i < 5 && static_cast<double>(largest) >= size; ++i, size *= step) {
    unit = {names[i], size};
  }
  return unit;
}

constexpr const char* kDecimal[5] = {"B", "kB", "MB", "GB", "TB"};
constexpr const char* kBinary[5] = {"B", "KiB", "MiB", "GiB", "TiB"};

std::string Format(int64_t bytes, const ByteUnit& unit) {
  if (unit.bytes == 1) return absl::StrCat(bytes, " B");
  return absl::StrCat(BytesIn(bytes, unit), " ", unit.name);
}

}  // namespace

ByteUnit DecimalUnitFor(int64_t largest) { return UnitFor(largest, 1e3, kDecimal); }
ByteUnit BinaryUnitFor(int64_t largest) { return UnitFor(largest, 1024.0, kBinary); }

std::string FormatDecimalBytes(int64_t bytes) {
  return Format(bytes, DecimalUnitFor(std::llabs(bytes)));
}

std::string FormatBinaryBytes(int64_t bytes) {
  return Format(bytes, BinaryUnitFor(std::llabs(bytes)));
}

std::string BytesIn(int64_t bytes, const ByteUnit& unit) {
  return absl::StrFormat("%.2f", static_cast<double>(bytes) / unit.bytes);
}

}  // namespace zeroshard
