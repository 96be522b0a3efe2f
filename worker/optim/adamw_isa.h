// Which SIMD path AdamWCpu takes (issue 41): chosen by CPU, not by the ISA
// flag alone. AVX-512 is not the faster stream on every x86 server: AMD's
// cores run 512-bit instructions as two 256-bit halves, and on the AMD EPYC
// this was measured on AVX2 streamed faster ([Note: AdamW path by CPU] in
// the .cc). So "auto" takes AVX2 on AMD and the widest path elsewhere. An
// override (`--adamw-isa`, or ZEROSHARD_ADAMW_ISA) names the path:
// "avx512", "avx2", "scalar" or "auto". All paths are bit-identical
// (adamw.h), so the choice changes speed only.
//
// Thread safety: SetAdamWIsa before the first update; ChosenAdamWIsa is
// thread-safe (computed once).
#pragma once

#include <array>
#include <string>

#include "absl/status/status.h"

namespace zeroshard {

enum class AdamWIsa { kScalar, kAvx2, kAvx512 };

// The names SetAdamWIsa takes, and their meaning, for a command line's
// --adamw-isa (the worker's, launch's, adamw_bench's).
inline constexpr std::array<const char*, 4> kAdamWIsaNames = {"auto", "avx512", "avx2", "scalar"};
inline constexpr char kAdamWIsaHelp[] =
    "the CPU AdamW's SIMD path (auto: avx2 on AMD, else the widest the CPU has)";
const char* AdamWIsaName(AdamWIsa isa);

// Fixes the path for this process: "auto" (by CPU), "avx512", "avx2" or
// "scalar". INVALID_ARGUMENT for another name, or for an ISA the CPU lacks
// (naming what it has). Takes effect only before the first ChosenAdamWIsa.
absl::Status SetAdamWIsa(const std::string& name);

// The path AdamWCpu takes: the override, else ZEROSHARD_ADAMW_ISA (an
// unusable value is reported on stderr and ignored), else auto's choice.
AdamWIsa ChosenAdamWIsa();

}  // namespace zeroshard
