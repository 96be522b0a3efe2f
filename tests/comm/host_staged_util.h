// Test helpers for the host-staged backend: ranks as threads, each with a
// Device, running one collective on device buffers (uploaded, issued,
// waited, downloaded), and the checks against rank_threads.h's references.
// Shared by the CPU test and the CUDA one; with a plain Gloo communicator
// and a CpuDevice the same runners give Gloo's own results.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/host_staged_communicator.h"
#include "worker/device/device.h"

namespace zeroshard::testing {

// Device memory of `bytes` (at least 1), freed on destruction.
class DeviceBytes {
 public:
  DeviceBytes(Device& device, size_t bytes) : device_(device) {
    absl::StatusOr<void*> p = device.Allocate(static_cast<int64_t>(std::max<size_t>(bytes, 1)));
    EXPECT_TRUE(p.ok()) << p.status();
    ptr_ = static_cast<char*>(p.ok() ? *p : nullptr);
  }
  ~DeviceBytes() { device_.Free(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void Upload(const std::vector<uint8_t>& host, size_t offset = 0) {
    EXPECT_TRUE(device_.Copy(ptr_ + offset, host.data(), host.size()).ok());
    EXPECT_TRUE(device_.Synchronize(absl::Seconds(30)).ok());
  }
  std::vector<uint8_t> Download(size_t offset, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    EXPECT_TRUE(device_.Copy(host.data(), ptr_ + offset, bytes).ok());
    EXPECT_TRUE(device_.Synchronize(absl::Seconds(30)).ok());
    return host;
  }
  char* at(size_t offset) { return ptr_ + offset; }

 private:
  Device& device_;
  char* ptr_ = nullptr;
};

// One collective on every rank: comms[r] with buffers of devices[r].
struct StagedRun {
  std::vector<Communicator*> comms;
  std::vector<Device*> devices;
  int64_t count = 0;
  DType dtype = DType::kFp32;
  bool in_place = false;

  int n() const { return static_cast<int>(comms.size()); }
  size_t Bytes(int64_t elements) const { return elements * DTypeSize(dtype); }
};

// Every rank (a thread): `send` of send_elements holding its input, `recv`
// of recv_elements filled with 0xAB; issue(r, send, recv) starts the op, which
// is waited for; returns what result(r, send, recv) downloads on each rank.
using RankStep = std::function<std::unique_ptr<Work>(int, DeviceBytes&, DeviceBytes&)>;
using RankResult = std::function<std::vector<uint8_t>(int, DeviceBytes&, DeviceBytes&)>;
inline std::vector<std::vector<uint8_t>> RunOnRanks(const StagedRun& run, int64_t send_elements,
                                                    int64_t recv_elements, const RankStep& issue,
                                                    const RankResult& result) {
  std::vector<std::vector<uint8_t>> out(run.n());
  ParallelFor(run.n(), [&](int r) {
    DeviceBytes send(*run.devices[r], run.Bytes(send_elements));
    DeviceBytes recv(*run.devices[r], run.Bytes(recv_elements));
    send.Upload(Encode(InputValues(r, send_elements), run.dtype));
    recv.Upload(std::vector<uint8_t>(run.Bytes(recv_elements), 0xAB));
    std::unique_ptr<Work> work = issue(r, send, recv);
    EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
    out[r] = result(r, send, recv);
  });
  return out;
}

// Rank r's recv: every rank's input, rank after rank. In place, the input
// is first put at block r of recv.
inline std::vector<std::vector<uint8_t>> RunAllGather(const StagedRun& run) {
  const size_t block = run.Bytes(run.count);
  return RunOnRanks(
      run, run.count, run.count * run.n(),
      [&](int r, DeviceBytes& send, DeviceBytes& recv) {
        if (!run.in_place)
          return run.comms[r]->AllGather(send.at(0), recv.at(0), run.count, run.dtype);
        recv.Upload(Encode(InputValues(r, run.count), run.dtype), block * r);
        return run.comms[r]->AllGather(recv.at(block * r), recv.at(0), run.count, run.dtype);
      },
      [&](int, DeviceBytes&, DeviceBytes& recv) { return recv.Download(0, block * run.n()); });
}

// Rank r's block r of the reduction of every rank's n*count input; in place
// it lands in send's block r.
inline std::vector<std::vector<uint8_t>> RunReduceScatter(const StagedRun& run, ReduceOp op) {
  const size_t block = run.Bytes(run.count);
  auto dst = [&](int r, DeviceBytes& send, DeviceBytes& recv) {
    return run.in_place ? send.at(block * r) : recv.at(0);
  };
  return RunOnRanks(
      run, run.count * run.n(), run.count,
      [&](int r, DeviceBytes& send, DeviceBytes& recv) {
        return run.comms[r]->ReduceScatter(send.at(0), dst(r, send, recv), run.count, run.dtype,
                                           op);
      },
      [&](int r, DeviceBytes& send, DeviceBytes& recv) {
        return run.in_place ? send.Download(block * r, block) : recv.Download(0, block);
      });
}

// An op of count elements in and out, recv == send in place.
using FlatIssue = std::function<std::unique_ptr<Work>(int r, const void* send, void* recv)>;
inline std::vector<std::vector<uint8_t>> RunFlat(const StagedRun& run, const FlatIssue& issue) {
  auto dst = [&](DeviceBytes& send, DeviceBytes& recv) -> DeviceBytes& {
    return run.in_place ? send : recv;
  };
  return RunOnRanks(
      run, run.count, run.count,
      [&](int r, DeviceBytes& send, DeviceBytes& recv) {
        return issue(r, send.at(0), dst(send, recv).at(0));
      },
      [&](int, DeviceBytes& send, DeviceBytes& recv) {
        return dst(send, recv).Download(0, run.Bytes(run.count));
      });
}

// Rank r's recv: the reduction of every rank's count input.
inline std::vector<std::vector<uint8_t>> RunAllReduce(const StagedRun& run, ReduceOp op) {
  return RunFlat(run, [&](int r, const void* send, void* recv) {
    return run.comms[r]->AllReduce(send, recv, run.count, run.dtype, op);
  });
}

// Rank r's recv: root's input.
inline std::vector<std::vector<uint8_t>> RunBroadcast(const StagedRun& run, int root) {
  return RunFlat(run, [&](int r, const void* send, void* recv) {
    return run.comms[r]->Broadcast(send, recv, run.count, run.dtype, root);
  });
}

inline void ExpectAllGathered(const StagedRun& run, const std::vector<std::vector<uint8_t>>& got) {
  for (int r = 0; r < run.n(); ++r) {
    std::vector<float> want;
    for (int src = 0; src < run.n(); ++src) {
      const std::vector<float> block = InputValues(src, run.count);
      want.insert(want.end(), block.begin(), block.end());
    }
    ASSERT_EQ(Decode(got[r], run.dtype), want) << "rank " << r << " in_place " << run.in_place;
  }
}

// got[r][i] == the reduction of element first(r) + i over all ranks.
inline void ExpectReduced(const StagedRun& run, ReduceOp op,
                          const std::vector<std::vector<uint8_t>>& got, bool scattered) {
  for (int r = 0; r < run.n(); ++r) {
    const std::vector<float> values = Decode(got[r], run.dtype);
    ASSERT_EQ(static_cast<int64_t>(values.size()), run.count);
    const int64_t first = scattered ? r * run.count : 0;
    for (int64_t i = 0; i < run.count; ++i) {
      ASSERT_EQ(values[i], ReducedValue(op, run.n(), first + i))
          << "rank " << r << " i " << i << " in_place " << run.in_place;
    }
  }
}

// n ranks over `store` (keys under prefix), each Gloo communicator wrapped
// for its own device from make_device().
struct StagedWorld {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::unique_ptr<Communicator>> comms;  // After devices: destroyed first.
};
inline StagedWorld ConnectStaged(
    InMemoryStore& store, const std::string& prefix, int n,
    const std::function<absl::StatusOr<std::unique_ptr<Device>>()>& make_device) {
  StagedWorld world;
  for (auto& c : ConnectGloo(store, prefix, n)) {
    absl::StatusOr<std::unique_ptr<Device>> device = make_device();
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(device.ok()) << device.status();
    if (!c.ok() || !device.ok()) continue;
    world.devices.push_back(std::move(*device));
    auto staged = CreateHostStagedCommunicator(std::move(*c), world.devices.back().get());
    EXPECT_TRUE(staged.ok()) << staged.status();
    if (staged.ok()) world.comms.push_back(std::move(*staged));
  }
  return world;
}

using StagedParam = std::tuple<int, int64_t, DType>;  // world size, count, dtype
inline std::string StagedParamName(const ::testing::TestParamInfo<StagedParam>& info) {
  return absl::StrCat("n", std::get<0>(info.param), "_count", std::get<1>(info.param), "_",
                      std::get<2>(info.param) == DType::kFp32 ? "fp32" : "bf16");
}

}  // namespace zeroshard::testing
