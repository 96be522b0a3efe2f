// Test helpers: N ranks as threads over one InMemoryStore, and the input
// values the collective tests use.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_memory_store.h"
#include "worker/comm/shm_communicator.h"

namespace zeroshard::testing {

// Runs fn(rank) on `n` threads and joins them.
inline void ParallelFor(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// n communicators, made[r] = connect(r) on its own thread (they meet).
inline std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> ConnectEach(
    int n, const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int)>& connect) {
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> comms(n);
  ParallelFor(n, [&](int r) { comms[r] = connect(r); });
  return comms;
}

// Connects n Gloo communicators (one per rank, created concurrently).
inline std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> ConnectGloo(
    InMemoryStore& store, const std::string& prefix, int n, GlooOptions opts = {}) {
  return ConnectEach(n, [&](int r) { return CreateGlooCommunicator(store, prefix, r, n, opts); });
}

// The communicators of `connected` that came up; each one that did not is a
// test failure (EXPECT), so callers check the count.
inline std::vector<std::unique_ptr<Communicator>> ExpectConnected(
    std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> connected) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& c : connected) {
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) out.push_back(std::move(*c));
  }
  return out;
}

// n Gloo communicators under the prefix "gen/", every one expected to come up.
inline std::vector<std::unique_ptr<Communicator>> MustConnectGloo(InMemoryStore& store, int n,
                                                                  GlooOptions opts = {}) {
  return ExpectConnected(ConnectGloo(store, "gen/", n, opts));
}

// Connects n shm communicators (one per rank, created concurrently).
inline std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> ConnectShm(
    InMemoryStore& store, const std::string& prefix, int n, ShmOptions opts = {}) {
  return ConnectEach(n, [&](int r) { return CreateShmCommunicator(store, prefix, r, n, opts); });
}

// Input element i of rank r: a multiple of 1/4 in [-2, 2], exactly
// representable in bf16, so sums over <= 8 ranks are exact in fp32 and bf16
// whatever the order; the reference can then be compared exactly.
inline float InputValue(int rank, int64_t i) {
  return static_cast<float>(static_cast<int>((rank * 31 + i * 7) % 17) - 8) * 0.25f;
}

// Rank r's input of `elements` values, starting at value index `first`.
inline std::vector<float> InputValues(int rank, int64_t elements, int64_t first = 0) {
  std::vector<float> v(elements);
  for (int64_t i = 0; i < elements; ++i) v[i] = InputValue(rank, first + i);
  return v;
}

// The reduction over `world_size` ranks of element i, in rank order.
inline float ReducedValue(ReduceOp op, int world_size, int64_t i) {
  float acc = InputValue(0, i);
  for (int r = 1; r < world_size; ++r) {
    acc = op == ReduceOp::kSum ? acc + InputValue(r, i) : std::max(acc, InputValue(r, i));
  }
  return acc;
}

// Buffer of n elements of dtype holding values[i].
inline std::vector<uint8_t> Encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kFp32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const bf16 h = FloatToBf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline std::vector<float> Decode(const std::vector<uint8_t>& bytes, DType dtype) {
  const size_t n = bytes.size() / DTypeSize(dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kFp32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      bf16 h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = Bf16ToFloat(h);
    }
  }
  return out;
}

}  // namespace zeroshard::testing
