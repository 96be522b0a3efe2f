// Fused AdamW through a Device (worker/device/device.h), in parameters/s and
// as a fraction of a copy of the same bytes on the same device (medians of
// --reps runs, each timed from issue to Synchronize).
//
// Bytes: AdamW reads master, m, v, grad (16 B per parameter) and writes
// master, m, v (12 B) and the compute copy (4 B fp32 / 2 B bf16): 32 or 30 B
// per parameter. The limit is a copy of 16 B per parameter (the four fp32
// state arrays into a second buffer), which moves 32 B per parameter (read +
// write): on CUDA one device-to-device Device::Copy, on CPU a memcpy split
// over the same threads AdamW uses. fraction = AdamW's bytes/s over the
// copy's. On CPU a memcpy destination is also read into cache before it is
// written (write-allocate), traffic not counted here, so AdamW, which writes
// in place, can exceed 1.
//
// Usage: device_adamw_bench [--device cpu|cuda|auto] [--n PARAMS (16Mi)]
//                           [--reps R (7)] [--threads T (cpu; 0 = all)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/device/time_median.h"
#include "common/infra/cli.h"
#include "common/parallel_for.h"
#include "worker/device/device_buffer.h"
#include "worker/device/device_factory.h"

namespace zeroshard {
namespace {

struct Args {
  DeviceOptions device;
  int64_t n = int64_t{16} << 20;
  int reps = 7;
};

using bench::TimeMedian;

absl::Status Run(const Args& args) {
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice(args.device));
  const int64_t n = args.n;
  // One block for master, m, v, grad (so the copy reads exactly AdamW's four
  // inputs), one copy destination, one compute copy big enough for fp32.
  MemoryAccountant accountant;
  DeviceBuffer state_buffer(device.get(), &accountant, MemoryKind::kOptimizer);
  DeviceBuffer copy_buffer(device.get(), &accountant, MemoryKind::kBuffers);
  DeviceBuffer out_buffer(device.get(), &accountant, MemoryKind::kParams);
  ZS_RETURN_IF_ERROR(state_buffer.Allocate(16 * n));
  ZS_RETURN_IF_ERROR(copy_buffer.Allocate(16 * n));
  ZS_RETURN_IF_ERROR(out_buffer.Allocate(4 * n));
  void *state = state_buffer.data(), *copy_dst = copy_buffer.data(), *out = out_buffer.data();
  // Bytes 0x3c make every float 0x3c3c3c3c (about 0.0115): finite, positive
  // v, no denormals to slow the CPU path.
  ZS_RETURN_IF_ERROR(device->Memset(state, 0x3c, 16 * n));
  float* f = static_cast<float*>(state);
  const int threads = ResolveThreads(args.device.cpu_threads);
  ZS_ASSIGN_OR_RETURN(const double copy_s, TimeMedian(*device, args.reps, [&]() -> absl::Status {
                        if (device->kind() != DeviceKind::kCpu)
                          return device->Copy(copy_dst, state, 16 * n);
                        ParallelFor(16 * n, threads, 1 << 20, 64,
                                    [&](int, int64_t begin, int64_t end) {
                                      std::memcpy(static_cast<char*>(copy_dst) + begin,
                                                  static_cast<char*>(state) + begin, end - begin);
                                    });
                        return absl::OkStatus();
                      }));
  const double copy_bw = 32.0 * n / copy_s;
  const std::string where = device->kind() == DeviceKind::kCpu
                                ? device->name() + " threads=" + std::to_string(threads)
                                : device->name();
  std::printf("device=\"%s\" n=%ld reps=%d: copy %ld B: %.3f ms, %.1f GB/s (read+write)\n",
              where.c_str(), static_cast<long>(n), args.reps, static_cast<long>(16 * n),
              copy_s * 1e3, copy_bw / 1e9);
  const AdamWHyperparams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  int64_t step = 0;
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    const AdamWShard shard{f, f + n, f + 2 * n, f + 3 * n, n, out, dtype};
    ZS_ASSIGN_OR_RETURN(const double s, TimeMedian(*device, args.reps, [&] {
                          return device->AdamW(hp, ++step, 1.0f, shard);
                        }));
    const double bytes = (28.0 + DTypeSize(dtype)) * n;
    std::printf(
        "  adamw out=%s: %.3f ms, %.1f Mparams/s, %.1f GB/s moved (%.0f B/param), "
        "%.2f of the copy\n",
        std::string(DTypeName(dtype)).c_str(), s * 1e3, n / s / 1e6, bytes / s / 1e9, bytes / n,
        bytes / s / copy_bw);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Args args;
  CLI::App app(
      "Fused AdamW through the Device layer against a copy of the same bytes on the "
      "same device");
  app.add_option("--device", args.device.kind, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--n", args.n, "elements per tensor")->check(CLI::PositiveNumber);
  app.add_option("--reps", args.reps, "timed repetitions (median)")->check(CLI::PositiveNumber);
  app.add_option("--threads", args.device.cpu_threads, "CPU device threads (0 = hardware)")
      ->check(CLI::NonNegativeNumber);
  if (std::optional<int> code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status status = zeroshard::Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "device_adamw_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
