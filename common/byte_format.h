// Byte counts for people: the unit is chosen so the figure reads well
// (84.00 GB, 652.00 kB, 21.45 GiB, 0.65 MiB would be 665.60 KiB).
// Decimal units (1 kB = 1e3 bytes) are the ZeRO paper's and `zeroshard
// plan`'s; binary units (1 KiB = 1024 bytes) are the kernel's (MemAvailable,
// VmHWM) and `zeroshard launch`'s. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace zeroshard {

struct ByteUnit {
  const char* name;  // "B", "kB", "MB", "GB", "TB" or "B", "KiB", ... "TiB".
  double bytes;      // Bytes in one unit.
};

// The largest unit that leaves `largest` (bytes, >= 0) at least 1; "B" below
// one kB (KiB). One unit for a whole table: pass its largest figure.
ByteUnit DecimalUnitFor(int64_t largest);
ByteUnit BinaryUnitFor(int64_t largest);

// "%.2f <unit>" in the unit of DecimalUnitFor(|bytes|) / BinaryUnitFor(|bytes|);
// whole bytes print without decimals ("512 B").
std::string FormatDecimalBytes(int64_t bytes);
std::string FormatBinaryBytes(int64_t bytes);
// "%.2f" of `bytes` in `unit` (no unit name).
std::string BytesIn(int64_t bytes, const ByteUnit& unit);

}  // namespace zeroshard
