// Fused CPU AdamW throughput against this machine's streaming memory
// bandwidth, both measured in the same run (medians of --reps runs).
//
// AdamW must move, per element: read master, m, v, grad (16 B) and write
// master, m, v (12 B) and the compute copy (4 B fp32 / 2 B bf16, none with
// --compute none): 32, 30 or 28 B.
// The limit is a STREAM-style triad a[i] = b[i] + s * c[i] over arrays of the
// same element count, counted as STREAM does (3 arrays x 4 B = 12 B per
// element), run with the same thread count; a plain memcpy of the same
// element count (read + write, 8 B per element); and an in-place add
// a[i] += b[i] (12 B per element), which, like AdamW's in-place master/m/v,
// has no hidden write-allocate traffic (triad and memcpy destinations are
// read into cache before being written, which STREAM does not count); and
// AdamW's own streams with its arithmetic taken out (read four arrays, add
// the fourth into the other three in place: the same 28 B per element in
// the same pattern), the best any AdamW over these bytes could do. The
// limit is the fastest of the four. Reported: parameters/second, effective AdamW bandwidth, and its
// fraction of the limit; for 1 thread and for all hardware threads. The
// machine's load average is printed: on a shared machine, read the figures
// with it.
//
// Usage: adamw_bench [--n ELEMENTS (default 16Mi)] [--reps R (default 7)]
//        [--threads T (default 0: 1 and all)] [--compute none fp32 bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/support/median.h"
#include "common/infra/cli.h"
#include "common/parallel_for.h"
#include "worker/optim/adamw.h"
#include "worker/optim/adamw_isa.h"

namespace zeroshard {
namespace {

using bench::Median;

template <typename Fn>
double TimeMedian(int reps, Fn&& fn) {
  fn();  // Warm-up: page faults and caches out of the measurement.
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return Median(seconds);
}

// The streaming limits above at `threads`, printed; returns the fastest,
// bytes per second.
double MeasureLimit(int64_t n, int reps, int threads) {
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const double triad_s = TimeMedian(reps, [&] {
    ParallelFor(n, threads, 1 << 16, 64, [&](int, int64_t begin, int64_t end) {
      float* __restrict pa = a.data();
      const float* __restrict pb = b.data();
      const float* __restrict pc = c.data();
      for (int64_t i = begin; i < end; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    });
  });
  const double triad_bw = 12.0 * n / triad_s;
  const double copy_s = TimeMedian(reps, [&] {
    ParallelFor(n, threads, 1 << 16, 64, [&](int, int64_t begin, int64_t end) {
      std::memcpy(a.data() + begin, b.data() + begin, (end - begin) * 4);
    });
  });
  const double copy_bw = 8.0 * n / copy_s;
  const double add_s = TimeMedian(reps, [&] {
    ParallelFor(n, threads, 1 << 16, 64, [&](int, int64_t begin, int64_t end) {
      float* __restrict pa = a.data();
      const float* __restrict pb = b.data();
      for (int64_t i = begin; i < end; ++i) pa[i] += pb[i];
    });
  });
  const double add_bw = 12.0 * n / add_s;
  std::vector<float> w(n, 0.5f), x(n, 0.0f), y(n, 0.0f), z(n, 0.01f);
  const double streams_s = TimeMedian(reps, [&] {
    ParallelFor(n, threads, 1 << 16, 64, [&](int, int64_t begin, int64_t end) {
      float* __restrict pw = w.data();
      float* __restrict px = x.data();
      float* __restrict py = y.data();
      const float* __restrict pz = z.data();
      for (int64_t i = begin; i < end; ++i) {
        pw[i] += pz[i];
        px[i] += pz[i];
        py[i] += pz[i];
      }
    });
  });
  const double streams_bw = 28.0 * n / streams_s;
  const double limit = std::max({triad_bw, copy_bw, add_bw, streams_bw});
  std::printf(
      "threads=%d limits: triad %.2f GB/s, memcpy %.2f GB/s, in-place add %.2f GB/s, "
      "AdamW's streams %.2f GB/s (%.1f Mparams/s)\n",
      threads, triad_bw / 1e9, copy_bw / 1e9, add_bw / 1e9, streams_bw / 1e9, n / streams_s / 1e6);
  return limit;
}

void Run(int64_t n, int reps, int threads, const std::vector<std::string>& computes) {
  std::vector<float> master(n, 0.5f), m(n, 0.0f), v(n, 0.0f), grad(n, 0.01f), out32(n);
  std::vector<bf16> out16(n);
  const double limit = MeasureLimit(n, reps, threads);
  const AdamWHyperparams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  int64_t step = 0;
  for (const std::string& name : computes) {
    const DType dtype = name == "bf16" ? DType::kBf16 : DType::kFp32;
    void* out = name == "none"   ? nullptr
                : name == "fp32" ? static_cast<void*>(out32.data())
                                 : static_cast<void*>(out16.data());
    const double s = TimeMedian(reps, [&] {
      AdamWCpu(hp, ++step, 1.0f, {master.data(), m.data(), v.data(), grad.data(), n, out, dtype},
               threads);
    });
    const double bytes = (28.0 + (out == nullptr ? 0 : DTypeSize(dtype))) * n;
    std::printf(
        "threads=%d isa=%s out=%s: %.3f ms, %.1f Mparams/s, %.0f bytes/param, "
        "%.2f GB/s moved, %.2f of the limit\n",
        threads, AdamWCpuIsa(), name.c_str(), s * 1e3, n / s / 1e6, bytes / n, bytes / s / 1e9,
        bytes / s / limit);
  }
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  int64_t n = int64_t{16} << 20;
  int reps = 7;
  CLI::App app(
      "Fused CPU AdamW (fp32 master, m, v; fp32 and bf16 compute copy) at 1 and all "
      "hardware threads, against streaming memory bandwidth of the same bytes");
  app.add_option("--n", n, "elements per tensor")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed repetitions (median reported)")->check(CLI::PositiveNumber);
  int threads = 0;
  app.add_option("--threads", threads, "threads (0: 1 and all hardware threads)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::vector<std::string> computes = {"fp32", "bf16"};
  app.add_option("--compute", computes,
                 "compute copies written in the same pass: none (the 28 bytes of a plain "
                 "AdamW), fp32, bf16")
      ->check(CLI::IsMember({"none", "fp32", "bf16"}))
      ->capture_default_str();
  std::string isa = "auto";
  app.add_option("--adamw-isa", isa, zeroshard::kAdamWIsaHelp)
      ->check(CLI::IsMember(std::vector<std::string>(zeroshard::kAdamWIsaNames.begin(),
                                                     zeroshard::kAdamWIsaNames.end())))
      ->capture_default_str();
  if (std::optional<int> code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  if (absl::Status s = zeroshard::SetAdamWIsa(isa); !s.ok()) {
    std::fprintf(stderr, "adamw_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const int all = zeroshard::ResolveThreads(0);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  std::printf("n=%ld elements, %d reps (medians), hardware threads %d, load average %.2f\n",
              static_cast<long>(n), reps, all, load[0]);
  if (threads > 0) {
    zeroshard::Run(n, reps, threads, computes);
    return 0;
  }
  zeroshard::Run(n, reps, 1, computes);
  if (all > 1) zeroshard::Run(n, reps, all, computes);
  return 0;
}
