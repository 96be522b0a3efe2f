#include "common/zero_memory.h"

#include "common/zero_stage.h"

namespace zeroshard {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MemoryByKind ZeroFormulaBytes(int stage, int64_t psi, int n, int c, int g) {
  const ZeroStage& z = ZeroStageOf(stage);
  MemoryByKind m;
  m.params = z.shards_params ? CeilDiv(c * psi, n) : c * psi;
  m.grads = z.shards_grads ? CeilDiv(g * psi, n) : g * psi;
  m.optimizer = z.shards_optimizer ? CeilDiv(kAdamStateBytesPerParam * psi, n)
                                   : kAdamStateBytesPerParam * psi;
  return m;
}

}  // namespace zeroshard
