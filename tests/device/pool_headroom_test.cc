// The CUDA pool's headroom rule (worker/device/pool_headroom.h) on plain
// numbers: the CUDA device applies it; device_cuda_test checks that it does.
#include "worker/device/pool_headroom.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(PoolHeadroom, OneGibFloorThenAThirtySecond) {
  EXPECT_EQ(PoolHeadroomBytes(16 * kGiB), kGiB);  // 1/32 = 0.5 GiB: the floor.
  EXPECT_EQ(PoolHeadroomBytes(32 * kGiB), kGiB);  // Equal.
  EXPECT_EQ(PoolHeadroomBytes(int64_t{150'000'000'000}), int64_t{150'000'000'000} / 32);
  EXPECT_EQ(PoolHeadroomBytes(kGiB / 2), kGiB / 2);  // Never more than the device.
  EXPECT_EQ(PoolHeadroomBytes(0), 0);
}

TEST(PoolHeadroom, ThresholdIsTheDeviceLessTheHeadroom) {
  const int64_t h200 = int64_t{150'109'880'320};  // An H200's totalGlobalMem.
  EXPECT_EQ(PoolReleaseThreshold(h200), static_cast<uint64_t>(h200 - h200 / 32));
  EXPECT_EQ(PoolReleaseThreshold(24 * kGiB), static_cast<uint64_t>(23 * kGiB));
  EXPECT_EQ(PoolReleaseThreshold(kGiB / 2), 0u);
}

TEST(PoolHeadroom, AllocatableCountsThePoolsIdleMemoryLessTheHeadroom) {
  EXPECT_EQ(PoolAllocatableBytes(10 * kGiB, 3 * kGiB, kGiB), 12 * kGiB);
  EXPECT_EQ(PoolAllocatableBytes(kGiB / 2, 0, kGiB), 0);  // Less than the headroom: none.
  EXPECT_EQ(PoolAllocatableBytes(0, 2 * kGiB, kGiB), kGiB);
}

}  // namespace
}  // namespace zeroshard
