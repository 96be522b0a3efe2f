// How much of a GPU the CUDA device's stream-ordered pool leaves to memory
// it does not own: cuBLAS workspaces, NCCL's buffers and channels, the CUDA
// context's own growth. Those allocate with cudaMalloc, outside the pool, so
// memory the pool keeps is memory they cannot get. Plain arithmetic, no CUDA
// header and header-only, so the CPU build tests it and the CUDA device
// (another target) uses the same code.
//
// The rule: the pool's release threshold (cudaMemPoolAttrReleaseThreshold,
// the bytes it may keep reserved across a synchronisation) is the device's
// total less the headroom, and the free memory the device reports
// (MemoryInfo::free_bytes, what the engine's fit check compares with) is
// what the driver has free plus what the pool holds unused, less the same
// headroom. So a fit check that passes leaves the headroom to the others,
// and the pool gives back what it keeps beyond that at the next sync.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zeroshard {

// Bytes kept for allocations outside the pool on a device of `total_bytes`:
// the larger of 1 GiB and 1/32 of the device (4.4 GiB of an H200's 141 GB;
// NCCL's default buffers take a few hundred MiB for two communicators, a
// cuBLAS workspace 32 MiB a handle). Never more than total_bytes.
inline int64_t PoolHeadroomBytes(int64_t total_bytes) {
  constexpr int64_t kFloor = int64_t{1} << 30;
  return std::min(std::max(kFloor, total_bytes / 32), std::max<int64_t>(total_bytes, 0));
}

// The release threshold for the pool: total_bytes less the headroom, at
// least 0.
inline uint64_t PoolReleaseThreshold(int64_t total_bytes) {
  return static_cast<uint64_t>(std::max<int64_t>(total_bytes - PoolHeadroomBytes(total_bytes), 0));
}

// What an allocation from the pool can still take while leaving the
// headroom: driver_free (cudaMemGetInfo) + pool_idle (reserved by the pool,
// not in use) - headroom, at least 0.
inline int64_t PoolAllocatableBytes(int64_t driver_free, int64_t pool_idle, int64_t headroom) {
  return std::max<int64_t>(driver_free + pool_idle - headroom, 0);
}

}  // namespace zeroshard
