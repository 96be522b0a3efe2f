#include "worker/optim/adamw_isa.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "worker/optim/adamw_simd.h"

namespace zeroshard {
namespace {

std::mutex g_mu;
std::optional<AdamWIsa> g_override;  // Guarded by g_mu; read once by ChosenAdamWIsa.

bool Supported(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::kAvx512:
      return optim_internal::CpuHasAvx512();
    case AdamWIsa::kAvx2:
      return optim_internal::CpuHasAvx2();
    case AdamWIsa::kScalar:
      return true;
  }
  return false;
}

std::optional<AdamWIsa> Parse(const std::string& name) {
  if (name == "avx512") return AdamWIsa::kAvx512;
  if (name == "avx2") return AdamWIsa::kAvx2;
  if (name == "scalar") return AdamWIsa::kScalar;
  return std::nullopt;
}

// [Note: AdamW path by CPU] Zen 4 runs a 512-bit instruction as two
// 256-bit halves, and on any core this loop is bound by memory, so on AMD
// AVX-512 buys no width; on the AMD EPYC these sessions run on it streamed
// slower: 1,666-2,064 against AVX2's 1,972-2,141 M params/s at 1 thread,
// 2,312 against 2,532-2,560 at 2 (adamw_bench, 16M parameters, medians of 7,
// alternating runs). Elsewhere the widest path the CPU has. On a Zen 5
// EPYC (full 512-bit datapaths), with the loops' 16 KiB prefetch, AVX2
// still leads without a compute copy (2,320-2,415 against 2,191-2,224 M
// params/s, 1 thread, 64 Mi) and AVX-512 leads with a bf16 one (2,123-2,223
// against 1,975-2,065): one path per process, so AVX2 stays.
AdamWIsa Default() {
  if (!Supported(AdamWIsa::kAvx2)) return AdamWIsa::kScalar;
  if (!Supported(AdamWIsa::kAvx512) || __builtin_cpu_is("amd")) return AdamWIsa::kAvx2;
  return AdamWIsa::kAvx512;
}

AdamWIsa Choose() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_override.has_value()) return *g_override;
  }
  if (const char* env = std::getenv("ZEROSHARD_ADAMW_ISA"); env != nullptr && *env != '\0') {
    const std::optional<AdamWIsa> isa = Parse(env);
    if (isa.has_value() && Supported(*isa)) return *isa;
    if (std::string(env) != "auto") {
      std::fprintf(stderr,
                   "zeroshard: ZEROSHARD_ADAMW_ISA=%s is not a path this CPU runs "
                   "(avx512, avx2, scalar or auto); choosing by CPU instead\n",
                   env);
    }
  }
  return Default();
}

}  // namespace

const char* AdamWIsaName(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::kAvx512:
      return "avx512";
    case AdamWIsa::kAvx2:
      return "avx2";
    case AdamWIsa::kScalar:
      return "scalar";
  }
  return "scalar";
}

absl::Status SetAdamWIsa(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (name == "auto") {
    g_override.reset();
    return absl::OkStatus();
  }
  const std::optional<AdamWIsa> isa = Parse(name);
  if (!isa.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--adamw-isa ", name, ": not auto, avx512, avx2 or scalar"));
  }
  if (!Supported(*isa)) {
    return absl::InvalidArgumentError(absl::StrCat("--adamw-isa ", name,
                                                   ": this CPU lacks it (it has ",
                                                   Supported(AdamWIsa::kAvx512) ? "avx512, avx2"
                                                   : Supported(AdamWIsa::kAvx2) ? "avx2"
                                                                                : "neither",
                                                   ")"));
  }
  g_override = *isa;
  return absl::OkStatus();
}

AdamWIsa ChosenAdamWIsa() {
  static const AdamWIsa chosen = Choose();
  return chosen;
}

}  // namespace zeroshard
