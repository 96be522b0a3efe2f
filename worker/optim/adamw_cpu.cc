// AdamWCpu: takes the SIMD path adamw_isa.h chooses (by CPU, or set),
// once, and splits the shard over threads. See adamw.h.
#include <atomic>
#include <cstdlib>

#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "worker/optim/adamw.h"
#include "worker/optim/adamw_element.h"
#include "worker/optim/adamw_isa.h"
#include "worker/optim/adamw_simd.h"

namespace zeroshard {
namespace {

using RangeFn = void (*)(const AdamWScalars&, const AdamWShard&, int64_t, int64_t);

// Below this many elements per thread, more threads cost more than they save.
constexpr int64_t kMinPerThread = 1 << 16;

RangeFn PickRange() {
  switch (ChosenAdamWIsa()) {
    case AdamWIsa::kAvx512:
      return optim_internal::AdamWAvx512Range;
    case AdamWIsa::kAvx2:
      return optim_internal::AdamWAvx2Range;
    case AdamWIsa::kScalar:
      break;
  }
  return AdamWReferenceRange;
}

}  // namespace

const char* AdamWCpuIsa() { return AdamWIsaName(ChosenAdamWIsa()); }

void AdamWCpu(const AdamWHyperparams& hp, int64_t step, float grad_scale, const AdamWShard& shard,
              int num_threads) {
  ZS_CHECK(shard.n >= 0);
  ZS_CHECK(shard.compute_dtype == DType::kFp32 || shard.compute_dtype == DType::kBf16);
  static const RangeFn range = PickRange();
  const AdamWScalars s = MakeAdamWScalars(hp, step, grad_scale);
  ParallelFor(shard.n, num_threads, kMinPerThread, 64,
              [&](int, int64_t begin, int64_t end) { range(s, shard, begin, end); });
}

double SumSquaresCpu(const float* x, int64_t n, int num_threads) {
  static const bool avx512 = optim_internal::CpuHasAvx512();
  const int threads = ResolveThreads(num_threads);
  std::vector<double> partial(threads, 0.0);
  ParallelFor(n, threads, kMinPerThread, 64, [&](int chunk, int64_t begin, int64_t end) {
    const double s = avx512 ? optim_internal::SumSquaresAvx512(x + begin, end - begin)
                            : optim_internal::SumSquaresScalar(x + begin, end - begin);
    partial[static_cast<size_t>(chunk)] = s;
  });
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace zeroshard
