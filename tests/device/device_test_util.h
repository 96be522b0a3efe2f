// Helpers shared by the device tests: random inputs, scalar reference loops
// written independently of the code under test, and host<->device transfer
// through DeviceBuffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "gtest/gtest.h"
#include "worker/device/device.h"
#include "worker/device/device_buffer.h"

namespace zeroshard::device_test {

// Odd element counts (STYLE.md point 15).
inline const std::vector<int64_t>& OddSizes() {
  static const std::vector<int64_t> sizes = {1, 7, 1000, 10007};
  return sizes;
}

// Round to nearest even written as "keep the top half, then look at the
// dropped half", not as common/dtype.h's add-and-truncate.
inline uint16_t RefBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const bool nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0;
  if (nan) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t kept = u >> 16, dropped = u & 0xffffu;
  const bool up = dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u) != 0);
  return static_cast<uint16_t>(kept + (up ? 1u : 0u));
}

inline float RefFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// n elements of `dtype` as raw bytes: finite normal(0, scale) values, or,
// with `any_bits`, uniformly random bit patterns (NaN, inf, denormals and
// rounding ties included).
inline std::vector<uint8_t> RandomBytes(DType dtype, int64_t n, uint32_t seed, float scale = 1.0f,
                                        bool any_bits = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint8_t> out(static_cast<size_t>(n * DTypeSize(dtype)));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float f = normal(rng);
    if (dtype == DType::kFp32) {
      if (any_bits) std::memcpy(&f, &bits, 4);
      std::memcpy(out.data() + 4 * i, &f, 4);
    } else {
      const uint16_t h = any_bits ? static_cast<uint16_t>(bits) : RefBf16(f);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Element i of raw `dtype` bytes as a float.
inline float ElementAt(const std::vector<uint8_t>& bytes, DType dtype, int64_t i) {
  if (dtype == DType::kBf16) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return RefFloat(h);
  }
  float f;
  std::memcpy(&f, bytes.data() + 4 * i, 4);
  return f;
}

// Stores f into element i of raw `dtype` bytes, rounding with RefBf16.
inline void SetElement(std::vector<uint8_t>& bytes, DType dtype, int64_t i, float f) {
  if (dtype == DType::kBf16) {
    const uint16_t h = RefBf16(f);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  } else {
    std::memcpy(bytes.data() + 4 * i, &f, 4);
  }
}

// A device buffer holding `host`'s bytes (synchronised).
inline DeviceBuffer Upload(Device& device, MemoryAccountant& accountant,
                           const std::vector<uint8_t>& host) {
  DeviceBuffer buffer(&device, &accountant, MemoryKind::kBuffers);
  EXPECT_TRUE(buffer.Allocate(static_cast<int64_t>(host.size())).ok());
  EXPECT_TRUE(device.Copy(buffer.data(), host.data(), static_cast<int64_t>(host.size())).ok());
  EXPECT_TRUE(device.Synchronize(absl::Seconds(60)).ok());
  return buffer;
}

// The buffer's bytes, after everything issued on the device so far.
inline std::vector<uint8_t> Download(Device& device, const DeviceBuffer& buffer) {
  std::vector<uint8_t> host(static_cast<size_t>(buffer.bytes()));
  EXPECT_TRUE(device.Synchronize(absl::Seconds(60)).ok());
  EXPECT_TRUE(device.Copy(host.data(), buffer.data(), buffer.bytes()).ok());
  EXPECT_TRUE(device.Synchronize(absl::Seconds(60)).ok());
  return host;
}

}  // namespace zeroshard::device_test
