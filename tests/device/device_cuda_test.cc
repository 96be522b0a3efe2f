// Every CUDA device primitive against the CPU device on random inputs with
// odd sizes: bit-equal for Convert, AddInto, Scale and AdamW; SumSquares
// within 1e-12 relative and bit-identical across runs. Needs a GPU: exits 77
// (CTest: skipped) with the reason printed when there is none.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/device/device_test_util.h"
#include "tests/support/gpu_test_main.h"
#include "worker/device/cpu_device.h"
#include "worker/device/cuda_check.h"
#include "worker/device/device_factory.h"
#include "worker/device/pool_headroom.h"

namespace zeroshard {
namespace {

using device_test::Download;
using device_test::RandomBytes;
using device_test::Upload;

std::unique_ptr<Device> MakeCuda() {
  absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice({.kind = "cuda"});
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? std::move(device).value() : nullptr;
}

class CudaVsCpuTest : public ::testing::TestWithParam<std::tuple<int64_t, DType, DType>> {
 protected:
  int64_t n() const { return std::get<0>(GetParam()); }
  DType a() const { return std::get<1>(GetParam()); }
  DType b() const { return std::get<2>(GetParam()); }
  DeviceBuffer ToGpu(const std::vector<uint8_t>& host) { return Upload(*gpu_, accountant_, host); }
  std::vector<uint8_t> FromGpu(const DeviceBuffer& buffer) { return Download(*gpu_, buffer); }

  std::unique_ptr<Device> gpu_ = MakeCuda();
  CpuDevice cpu_;
  MemoryAccountant accountant_;
};

TEST_P(CudaVsCpuTest, ConvertBitEqual) {
  const std::vector<uint8_t> src = RandomBytes(a(), n(), 11, 1.0f, /*any_bits=*/true);
  std::vector<uint8_t> want(static_cast<size_t>(n() * DTypeSize(b())));
  ASSERT_TRUE(cpu_.Convert(src.data(), a(), want.data(), b(), n()).ok());
  DeviceBuffer d_src = ToGpu(src), d_dst = ToGpu(std::vector<uint8_t>(want.size(), 0xee));
  ASSERT_TRUE(gpu_->Convert(d_src.data(), a(), d_dst.data(), b(), n()).ok());
  EXPECT_EQ(FromGpu(d_dst), want);
}

TEST_P(CudaVsCpuTest, AddIntoBitEqual) {
  std::vector<uint8_t> acc = RandomBytes(a(), n(), 21);
  const std::vector<uint8_t> x = RandomBytes(b(), n(), 22, 0.3f);
  DeviceBuffer d_acc = ToGpu(acc), d_x = ToGpu(x);
  ASSERT_TRUE(cpu_.AddInto(acc.data(), a(), x.data(), b(), n()).ok());
  ASSERT_TRUE(gpu_->AddInto(d_acc.data(), a(), d_x.data(), b(), n()).ok());
  EXPECT_EQ(FromGpu(d_acc), acc);
}

TEST_P(CudaVsCpuTest, ScaleBitEqual) {
  std::vector<uint8_t> x = RandomBytes(a(), n(), 31, 4.0f);
  DeviceBuffer d_x = ToGpu(x);
  ASSERT_TRUE(cpu_.Scale(x.data(), a(), 0.37f, n()).ok());
  ASSERT_TRUE(gpu_->Scale(d_x.data(), a(), 0.37f, n()).ok());
  EXPECT_EQ(FromGpu(d_x), x);
}

TEST_P(CudaVsCpuTest, SumSquaresCloseAndDeterministic) {
  const std::vector<uint8_t> x = RandomBytes(a(), n(), 41, 2.0f);
  double want = 0.25;
  ASSERT_TRUE(cpu_.SumSquaresAccumulate(x.data(), a(), n(), &want).ok());
  DeviceBuffer d_x = ToGpu(x);
  double runs[2];
  for (double& run : runs) {
    const double start = 0.25;
    DeviceBuffer d_acc = ToGpu(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&start),
                                                    reinterpret_cast<const uint8_t*>(&start + 1)));
    ASSERT_TRUE(gpu_->SumSquaresAccumulate(d_x.data(), a(), n(), d_acc.as<double>()).ok());
    const std::vector<uint8_t> out = FromGpu(d_acc);
    std::memcpy(&run, out.data(), sizeof(double));
  }
  EXPECT_NEAR(runs[0], want, 1e-12 * want);
  EXPECT_EQ(std::memcmp(&runs[0], &runs[1], sizeof(double)), 0);
}

TEST_P(CudaVsCpuTest, AdamWBitEqual) {
  const int64_t n = this->n();
  const DType out_dtype = b();
  const bool with_out = a() == DType::kFp32;  // a() picks: compute copy or none.
  std::vector<uint8_t> master = RandomBytes(DType::kFp32, n, 49), m(n * 4, 0), v(n * 4, 0);
  std::vector<uint8_t> out(n * DTypeSize(out_dtype), 0);
  DeviceBuffer d_master = ToGpu(master), d_m = ToGpu(m), d_v = ToGpu(v), d_out = ToGpu(out);
  const AdamWHyperparams hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int step = 1; step <= 3; ++step) {
    std::vector<uint8_t> grad = RandomBytes(DType::kFp32, n, 50 + step, 0.1f);
    DeviceBuffer d_grad = ToGpu(grad);
    auto f = [](std::vector<uint8_t>& bytes) { return reinterpret_cast<float*>(bytes.data()); };
    ASSERT_TRUE(
        cpu_.AdamW(hp, step, 0.5f,
                   {f(master), f(m), f(v), f(grad), n, with_out ? out.data() : nullptr, out_dtype})
            .ok());
    ASSERT_TRUE(gpu_->AdamW(hp, step, 0.5f,
                            {d_master.as<float>(), d_m.as<float>(), d_v.as<float>(),
                             d_grad.as<float>(), n, with_out ? d_out.data() : nullptr, out_dtype})
                    .ok());
    ASSERT_TRUE(gpu_->Synchronize(absl::Seconds(60)).ok());  // Before d_grad is freed.
  }
  EXPECT_EQ(FromGpu(d_master), master);
  EXPECT_EQ(FromGpu(d_m), m);
  EXPECT_EQ(FromGpu(d_v), v);
  EXPECT_EQ(FromGpu(d_out), out);
}

INSTANTIATE_TEST_SUITE_P(OddSizes, CudaVsCpuTest,
                         ::testing::Combine(::testing::Values(1, 7, 1000, 10007, (1 << 20) + 3),
                                            ::testing::Values(DType::kFp32, DType::kBf16),
                                            ::testing::Values(DType::kFp32, DType::kBf16)));

TEST(CudaDevice, CopyRoundTripsThroughPinnedAndDeviceMemory) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->kind(), DeviceKind::kCuda);
  EXPECT_EQ(gpu->name().rfind("cuda:", 0), 0u) << gpu->name();
  EXPECT_NE(gpu->stream(), nullptr);
  std::printf("device: %s\n", gpu->name().c_str());
  const std::vector<uint8_t> host = RandomBytes(DType::kFp32, 10007, 7);
  const int64_t bytes = static_cast<int64_t>(host.size());
  absl::StatusOr<void*> pinned = gpu->AllocatePinnedHost(bytes);
  absl::StatusOr<void*> a = gpu->Allocate(bytes), b = gpu->Allocate(bytes);
  ASSERT_TRUE(pinned.ok() && a.ok() && b.ok());
  std::vector<uint8_t> back(host.size(), 0);
  ASSERT_TRUE(gpu->Copy(*a, host.data(), bytes).ok());  // H2D, pageable.
  ASSERT_TRUE(gpu->Copy(*b, *a, bytes).ok());           // D2D.
  ASSERT_TRUE(gpu->Copy(*pinned, *b, bytes).ok());      // D2H, pinned.
  ASSERT_TRUE(gpu->Memset(*a, 0, bytes).ok());
  ASSERT_TRUE(gpu->Copy(*a, *pinned, bytes).ok());      // H2D, pinned.
  ASSERT_TRUE(gpu->Copy(back.data(), *a, bytes).ok());  // D2H, pageable.
  absl::StatusOr<std::unique_ptr<DeviceEvent>> done = gpu->RecordEvent();
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE((*done)->Wait(absl::Seconds(60)).ok());
  EXPECT_EQ(back, host);
  EXPECT_EQ(std::memcmp(*pinned, host.data(), host.size()), 0);
  ASSERT_TRUE(gpu->StreamWaitEvent(**done).ok());
  gpu->Free(*a);
  gpu->Free(*b);
  gpu->FreePinnedHost(*pinned);
}

TEST(CudaDevice, MemoryInfoAndExhaustion) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  absl::StatusOr<MemoryInfo> info = gpu->memory_info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, int64_t{1} << 30);
  EXPECT_GT(info->free_bytes, 0);
  EXPECT_LE(info->free_bytes, info->total_bytes);
  const absl::StatusOr<void*> huge = gpu->Allocate(int64_t{1} << 50);
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("bytes free"), std::string::npos) << huge.status();
  // The failure is not sticky: the device still works.
  absl::StatusOr<void*> small = gpu->Allocate(64);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(gpu->Memset(*small, 1, 64).ok());
  EXPECT_TRUE(gpu->Synchronize(absl::Seconds(60)).ok());
  gpu->Free(*small);
}

// The stream-ordered pool keeps freed memory; memory_info counts it free,
// so a later fit check (a new generation's engine) sees it.
TEST(CudaDevice, MemoryThePoolKeepsCountsAsFree) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  absl::StatusOr<MemoryInfo> before = gpu->memory_info();
  ASSERT_TRUE(before.ok()) << before.status();
  const int64_t bytes = int64_t{1} << 30;
  absl::StatusOr<void*> block = gpu->Allocate(bytes);
  ASSERT_TRUE(block.ok()) << block.status();
  absl::StatusOr<MemoryInfo> held = gpu->memory_info();
  ASSERT_TRUE(held.ok());
  EXPECT_LE(held->free_bytes, before->free_bytes - bytes + (int64_t{64} << 20));
  gpu->Free(*block);
  ASSERT_TRUE(gpu->Synchronize(absl::Seconds(60)).ok());
  absl::StatusOr<MemoryInfo> after = gpu->memory_info();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->free_bytes, before->free_bytes - (int64_t{64} << 20));
}

TEST(CudaDevice, EventWaitTimesOutThenCompletes) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  absl::StatusOr<void*> x = gpu->Allocate(1024);
  ASSERT_TRUE(x.ok());
  // A host function holds the stream for 300 ms: the event cannot complete
  // within the first wait.
  ASSERT_EQ(
      cudaLaunchHostFunc(
          static_cast<cudaStream_t>(gpu->stream()),
          [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }, nullptr),
      cudaSuccess);
  absl::StatusOr<std::unique_ptr<DeviceEvent>> event = gpu->RecordEvent();
  ASSERT_TRUE(event.ok());
  EXPECT_EQ((*event)->Wait(absl::Milliseconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
  // Polling left no error behind for the next launch check to pick up.
  EXPECT_TRUE(gpu->Scale(*x, DType::kFp32, 2.0f, 256).ok());
  EXPECT_TRUE((*event)->Wait(absl::Seconds(60)).ok());
  EXPECT_TRUE(gpu->Synchronize(absl::Seconds(60)).ok());
  gpu->Free(*x);
}

// [Note: launch checks] An unrelated call's leftover error (cudaEventQuery
// on a busy event leaves cudaErrorNotReady as the thread's last error) does
// not fail the next launch, and QueryEvent leaves none.
TEST(CudaDevice, LaunchCheckReadsOnlyItsOwnLaunch) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  absl::StatusOr<void*> x = gpu->Allocate(1024);
  ASSERT_TRUE(x.ok());
  cudaStream_t stream = static_cast<cudaStream_t>(gpu->stream());
  ASSERT_EQ(cudaLaunchHostFunc(
                stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); },
                nullptr),
            cudaSuccess);
  cudaEvent_t busy = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&busy, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(busy, stream), cudaSuccess);
  ASSERT_EQ(QueryEvent(busy), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "QueryEvent left its not-ready behind";
  ASSERT_EQ(cudaEventQuery(busy), cudaErrorNotReady);  // The raw query leaves it.
  EXPECT_TRUE(gpu->Scale(*x, DType::kFp32, 2.0f, 256).ok());
  EXPECT_TRUE(gpu->Synchronize(absl::Seconds(60)).ok());
  cudaEventDestroy(busy);
  gpu->Free(*x);
}

// The pool keeps at most the device less the headroom, and the free memory
// reported leaves the headroom to cuBLAS and NCCL (pool_headroom.h).
TEST(CudaDevice, PoolLeavesHeadroomAndMemoryInfoSaysSo) {
  std::unique_ptr<Device> gpu = MakeCuda();
  ASSERT_NE(gpu, nullptr);
  absl::StatusOr<MemoryInfo> info = gpu->memory_info();
  ASSERT_TRUE(info.ok()) << info.status();
  size_t driver_free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&driver_free, &total), cudaSuccess);
  EXPECT_LE(info->free_bytes, info->total_bytes - PoolHeadroomBytes(info->total_bytes));
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, gpu->ordinal()), cudaSuccess);
  uint64_t threshold = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
            cudaSuccess);
  EXPECT_EQ(threshold, PoolReleaseThreshold(info->total_bytes));
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("device_cuda_test", argc, argv);
}
