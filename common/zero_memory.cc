#include "common/zero_memory.h"

namespace zeroshard {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MemoryByKind ZeroFormulaBytes(int stage, int64_t psi, int n, int c, int g) {
  MemoryByKind m;
  m.params = stage >= 3 ? CeilDiv(c * psi, n) : c * psi;
  m.grads = stage >= 2 ? CeilDiv(g * psi, n) : g * psi;
  m.optimizer = stage >= 1 ? CeilDiv(kAdamStateBytesPerParam * psi, n)
                           : kAdamStateBytesPerParam * psi;
  return m;
}

}  // namespace zeroshard
