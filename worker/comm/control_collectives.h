// Collectives over small control values (a restore step, a loss sum, a
// squared norm, a step record): int64 or double, travelling in their own
// dtype. The helpers own the buffers, so a wait that gives up leaves the
// backend writing into memory that stays alive ([Note: failed collective
// buffers] in wait_or_abort.h), never into a caller's stack frame.
//
// Buffers are host memory: pass the host (Gloo) communicator, never one
// that needs device pointers (NCCL). Errors: as WaitOrAbort, which aborts
// the communicator on failure. Thread safety: as the communicator.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {

template <typename T>
constexpr DType ControlDType() {
  static_assert(std::is_same_v<T, int64_t> || std::is_same_v<T, double>,
                "control values are int64_t or double");
  return std::is_same_v<T, int64_t> ? DType::kInt64 : DType::kFp64;
}

namespace control_internal {

// Runs `issue(buffer)` and waits; on failure the buffer is kept forever.
template <typename T, typename Issue>
absl::StatusOr<std::vector<T>> Run(Communicator& comm, std::shared_ptr<std::vector<T>> buffer,
                                   absl::Duration timeout, Issue issue) {
  std::unique_ptr<Work> work = issue(buffer->data());
  absl::Status s = WaitOrAbort(comm, *work, timeout);
  if (!s.ok()) {
    KeepForever(std::move(buffer));
    return s;
  }
  return std::move(*buffer);
}

}  // namespace control_internal

// Element-wise `op` over every rank's `values` (equal lengths on all ranks).
template <typename T>
absl::StatusOr<std::vector<T>> AllReduceControl(Communicator& comm, std::vector<T> values,
                                                ReduceOp op, absl::Duration timeout) {
  const int64_t n = static_cast<int64_t>(values.size());
  auto buffer = std::make_shared<std::vector<T>>(std::move(values));
  return control_internal::Run(comm, buffer, timeout, [&](T* data) {
    return comm.AllReduce(data, data, n, ControlDType<T>(), op, {timeout});
  });
}

// Every rank's `mine` (equal lengths), rank after rank.
template <typename T>
absl::StatusOr<std::vector<T>> AllGatherControl(Communicator& comm, const std::vector<T>& mine,
                                                absl::Duration timeout) {
  const int64_t n = static_cast<int64_t>(mine.size());
  auto buffer = std::make_shared<std::vector<T>>(static_cast<size_t>(n) * comm.world_size());
  std::copy(mine.begin(), mine.end(), buffer->begin() + n * comm.rank());
  return control_internal::Run(comm, buffer, timeout, [&](T* data) {
    return comm.AllGather(data + n * comm.rank(), data, n, ControlDType<T>(), {timeout});
  });
}

// `root`'s `values` on every rank (equal lengths on all ranks).
template <typename T>
absl::StatusOr<std::vector<T>> BroadcastControl(Communicator& comm, std::vector<T> values, int root,
                                                absl::Duration timeout) {
  const int64_t n = static_cast<int64_t>(values.size());
  auto buffer = std::make_shared<std::vector<T>>(std::move(values));
  return control_internal::Run(comm, buffer, timeout, [&](T* data) {
    return comm.Broadcast(data, data, n, ControlDType<T>(), root, {timeout});
  });
}

}  // namespace zeroshard
