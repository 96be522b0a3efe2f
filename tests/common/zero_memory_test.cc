// The ZeRO formula against the paper's worked example: Ψ = 7.5B, N = 64,
// mixed precision (c = g = 2), K = 12 gives 120 GB at stage 0, 31.4 GB at
// stage 1, 16.6 GB at stage 2 and 1.9 GB at stage 3 (SC'20, Figure 1).
#include "common/zero_memory.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ZeroMemoryTest, PaperFigureOne) {
  const int64_t psi = 7'500'000'000;
  const double gb = 1e9;
  EXPECT_NEAR(ZeroFormulaBytes(0, psi, 64, 2, 2).model_state() / gb, 120.0, 0.05);
  EXPECT_NEAR(ZeroFormulaBytes(1, psi, 64, 2, 2).model_state() / gb, 31.4, 0.05);
  EXPECT_NEAR(ZeroFormulaBytes(2, psi, 64, 2, 2).model_state() / gb, 16.6, 0.05);
  EXPECT_NEAR(ZeroFormulaBytes(3, psi, 64, 2, 2).model_state() / gb, 1.875, 0.05);
}

TEST(ZeroMemoryTest, RoundsFractionsUp) {
  MemoryByKind m = ZeroFormulaBytes(3, 10, 3, 4, 4);
  EXPECT_EQ(m.params, 14);
  EXPECT_EQ(m.grads, 14);
  EXPECT_EQ(m.optimizer, 40);
  EXPECT_EQ(m.buffers, 0);
}

}  // namespace
}  // namespace zeroshard
