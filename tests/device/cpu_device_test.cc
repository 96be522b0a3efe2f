// The CPU device's memory, stream operations, events and memory figures;
// DeviceBuffer's accounting; the factory's choices and errors.
#include "worker/device/cpu_device.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "worker/device/device_buffer.h"
#include "worker/device/device_factory.h"

namespace zeroshard {
namespace {

TEST(CpuDevice, AllocatesAlignedDistinctMemory) {
  CpuDevice device;
  EXPECT_EQ(device.kind(), DeviceKind::kCpu);
  EXPECT_EQ(device.name(), "cpu");
  EXPECT_EQ(device.stream(), nullptr);
  std::set<void*> seen;
  for (int64_t bytes : {0, 1, 7, 1000, 10007}) {
    absl::StatusOr<void*> p = device.Allocate(bytes);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
    EXPECT_TRUE(seen.insert(*p).second);
  }
  for (void* p : seen) device.Free(p);
  EXPECT_EQ(device.Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuDevice, ExhaustedAllocationNamesBytesAndFreeMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on impossible allocations instead of returning null";
#endif
  CpuDevice device;
  const int64_t huge = int64_t{1} << 62;
  const absl::StatusOr<void*> p = device.Allocate(huge);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find(std::to_string(huge)), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("available"), std::string::npos) << p.status();
}

TEST(CpuDevice, MemsetCopyAndEvents) {
  CpuDevice device;
  char src[13], dst[13];
  ASSERT_TRUE(device.Memset(src, 0x5a, sizeof(src)).ok());
  ASSERT_TRUE(device.Copy(dst, src, sizeof(src)).ok());
  EXPECT_EQ(std::memcmp(dst, std::string(13, '\x5a').data(), 13), 0);
  absl::StatusOr<std::unique_ptr<DeviceEvent>> event = device.RecordEvent();
  ASSERT_TRUE(event.ok());
  EXPECT_EQ((*event)->kind(), DeviceKind::kCpu);
  EXPECT_TRUE((*event)->Wait(absl::ZeroDuration()).ok());
  EXPECT_TRUE(device.StreamWaitEvent(**event).ok());
  EXPECT_TRUE(device.Synchronize(absl::Seconds(1)).ok());
}

TEST(CpuDevice, RefusesToOrderACudaEvent) {
  class FakeCudaEvent : public DeviceEvent {
   public:
    DeviceKind kind() const override { return DeviceKind::kCuda; }
    absl::Status Wait(absl::Duration) override { return absl::OkStatus(); }
  };
  CpuDevice device;
  EXPECT_EQ(device.StreamWaitEvent(FakeCudaEvent()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuDevice, MemoryInfoIsSane) {
  CpuDevice device;
  absl::StatusOr<MemoryInfo> info = device.memory_info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0);
  EXPECT_GT(info->free_bytes, 0);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

TEST(CpuDevice, ParsesMeminfo) {
  absl::StatusOr<MemoryInfo> info =
      ParseMeminfo("MemTotal:       16000 kB\nMemFree:  10 kB\nMemAvailable:    8000 kB\n");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_bytes, 16000 * 1024);
  EXPECT_EQ(info->free_bytes, 8000 * 1024);
  EXPECT_EQ(ParseMeminfo("MemTotal: 1 kB\n").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceBuffer, CountsBytesByKindAndReturnsToZero) {
  CpuDevice device;
  MemoryAccountant accountant;
  {
    DeviceBuffer params(&device, &accountant, MemoryKind::kParams);
    DeviceBuffer grads(&device, &accountant, MemoryKind::kGrads);
    ASSERT_TRUE(params.Allocate(1000).ok());
    ASSERT_TRUE(grads.Allocate(7).ok());
    EXPECT_EQ(accountant.current().params, 1000);
    EXPECT_EQ(accountant.current().grads, 7);
    EXPECT_EQ(accountant.current().optimizer, 0);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(params.as<uint8_t>()[i], 0) << i;
    ASSERT_TRUE(params.Allocate(10007).ok());  // Replaces, does not add.
    EXPECT_EQ(accountant.current().params, 10007);
    EXPECT_EQ(accountant.peak().params, 10007);
    DeviceBuffer moved = std::move(grads);
    EXPECT_FALSE(grads.allocated());
    EXPECT_EQ(moved.bytes(), 7);
    EXPECT_EQ(moved.kind(), MemoryKind::kGrads);
    EXPECT_EQ(accountant.current().grads, 7);
    params = std::move(moved);  // Frees params' 10007, takes the 7 grads bytes.
    EXPECT_EQ(accountant.current().params, 0);
    EXPECT_EQ(accountant.current().grads, 7);
  }
  EXPECT_EQ(accountant.current().total(), 0);
  EXPECT_EQ(accountant.peak_total(), 10007 + 7);
}

TEST(DeviceBuffer, AbandonStopsCountingWithoutFreeing) {
  CpuDevice device;
  MemoryAccountant accountant;
  DeviceBuffer buffer(&device, &accountant, MemoryKind::kBuffers);
  EXPECT_EQ(buffer.Abandon(), nullptr);
  ASSERT_TRUE(buffer.Allocate(64).ok());
  void* data = buffer.data();
  EXPECT_EQ(buffer.Abandon(), data);
  EXPECT_FALSE(buffer.allocated());
  EXPECT_EQ(buffer.bytes(), 0);
  EXPECT_EQ(accountant.current().buffers, 0);
  static_cast<uint8_t*>(data)[63] = 1;  // Still valid: not freed.
  device.Free(data);
}

TEST(DeviceBuffer, FailedAllocationHoldsAndCountsNothing) {
  CpuDevice device;
  MemoryAccountant accountant;
  DeviceBuffer buffer(&device, &accountant, MemoryKind::kOptimizer);
  ASSERT_TRUE(buffer.Allocate(100).ok());
  EXPECT_EQ(buffer.Allocate(-5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(buffer.allocated());
  EXPECT_EQ(accountant.current().optimizer, 0);
}

TEST(DeviceFactory, MakesCpuAndRejectsUnknownKinds) {
  absl::StatusOr<std::unique_ptr<Device>> cpu = CreateDevice({});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->kind(), DeviceKind::kCpu);
  absl::StatusOr<std::unique_ptr<Device>> bogus = CreateDevice({.kind = "bogus"});
  EXPECT_EQ(bogus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("bogus"), std::string::npos);
  EXPECT_EQ(CreateDevice({.kind = "cpu", .cpu_threads = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// "cuda" without a GPU (this machine) is FAILED_PRECONDITION saying why, and
// "auto" then falls back to the CPU; with a GPU both give a CUDA device.
TEST(DeviceFactory, CudaNeedsAVisibleGpuAndAutoFallsBack) {
  absl::StatusOr<std::unique_ptr<Device>> cuda = CreateDevice({.kind = "cuda"});
  absl::StatusOr<std::unique_ptr<Device>> any = CreateDevice({.kind = "auto"});
  ASSERT_TRUE(any.ok()) << any.status();
  if (cuda.ok()) {
    EXPECT_EQ((*cuda)->kind(), DeviceKind::kCuda);
    EXPECT_EQ((*any)->kind(), DeviceKind::kCuda);
    return;
  }
  std::printf("--device cuda here: %s\n", cuda.status().ToString().c_str());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cuda.status().message().rfind("--device cuda: ", 0), 0u) << cuda.status();
  EXPECT_EQ(cuda.status().message().find('\n'), std::string::npos);
  EXPECT_EQ((*any)->kind(), DeviceKind::kCpu);
}

TEST(DeviceFactory, ResolvesOrdinalFromLocalRank) {
  EXPECT_EQ(*ResolveCudaOrdinal(-1, 4, nullptr), 0);
  EXPECT_EQ(*ResolveCudaOrdinal(-1, 4, ""), 0);
  EXPECT_EQ(*ResolveCudaOrdinal(-1, 4, "6"), 2);
  EXPECT_EQ(*ResolveCudaOrdinal(3, 4, "6"), 3);
  EXPECT_EQ(ResolveCudaOrdinal(4, 4, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCudaOrdinal(-2, 4, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCudaOrdinal(-1, 4, "x").status().code(), absl::StatusCode::kInvalidArgument);
}

// Worker r of `launch --device cuda` takes GPU r mod G; more workers than
// GPUs only where collectives are staged through the host.
TEST(DeviceFactory, MoreRanksThanGpusNeedTheHostStagedBackend) {
  for (int r = 0; r < 7; ++r) {
    EXPECT_EQ(*ResolveCudaOrdinal(-1, 3, std::to_string(r).c_str()), r % 3) << r;
  }
  EXPECT_TRUE(CheckRanksPerGpu(2, 2, "nccl").ok());
  EXPECT_TRUE(CheckRanksPerGpu(1, 2, "auto").ok());
  EXPECT_TRUE(CheckRanksPerGpu(4, 1, "host-staged").ok());
  EXPECT_TRUE(CheckRanksPerGpu(4, 1, "gloo").ok());  // Gloo on CUDA is host-staged.
  for (const char* backend : {"nccl", "auto"}) {
    const absl::Status refused = CheckRanksPerGpu(3, 2, backend);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << backend;
    EXPECT_NE(refused.message().find("3 workers but 2 GPU(s)"), std::string::npos) << refused;
    EXPECT_NE(refused.message().find("--backend host-staged"), std::string::npos) << refused;
  }
}

}  // namespace
}  // namespace zeroshard
