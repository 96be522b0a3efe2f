// The CPU worker's own memory around the engine's fit check: the matmuls'
// scratch (oneDNN's packed operands), checked at start, and the address
// space mapped after the check that no memory kind counts. Thread-safe: no
// shared state of its own.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/model/job_config.h"
#include "worker/device/device.h"

namespace zeroshard {

// Checks that `device`'s free memory holds CpuKernelsScratchBytes() and
// compiles the GEMM kernels (WarmUpCpuKernels). A job refusal
// (common/job_refusal.h), RESOURCE_EXHAUSTED naming the bytes, when it does
// not: a GEMM that fails later ends the process.
absl::Status PrepareCpuCompute(Device& device);

// Bytes the worker maps after the engine's fit check that no memory kind
// counts: the stacks of the threads it starts later (the NVMe store's two
// I/O queues, the optimizer's ParallelFor threads, a checkpoint save),
// RLIMIT_STACK each as glibc sizes them, all counted by an RLIMIT_DATA; plus
// 16 MiB of malloc slack. (Measured on `medium`, stage 3, NVMe offload, 2
// threads: six 8 MiB stacks mapped after the check.)
int64_t LateMappingBytes(const JobConfig& job);

}  // namespace zeroshard
