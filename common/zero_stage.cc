#include "common/zero_stage.h"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace zeroshard {
namespace {

constexpr std::array<ZeroStage, 4> kStages = {{
    {0, false, false, false, GradReduction::kAllReduceAtStep, false},
    {1, true, false, false, GradReduction::kReduceScatterAtStep, true},
    {2, true, true, false, GradReduction::kReduceScatterInBackward, true},
    {3, true, true, true, GradReduction::kReduceScatterInBackward, false},
}};

}  // namespace

std::span<const ZeroStage> ZeroStages() { return kStages; }

bool IsZeroStage(int stage) {
  for (const ZeroStage& s : kStages) {
    if (s.number == stage) return true;
  }
  return false;
}

const ZeroStage& ZeroStageOf(int stage) {
  for (const ZeroStage& s : kStages) {
    if (s.number == stage) return s;
  }
  std::fprintf(stderr, "zeroshard: ZeroStageOf(%d): not a ZeRO stage (unchecked input)\n", stage);
  std::abort();
}

}  // namespace zeroshard
