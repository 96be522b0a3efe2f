// The CPU AdamW's path choice (issue 41, worker/optim/adamw_isa.h): an
// override names a path the CPU runs or is refused naming what it has, and
// fixes the path AdamWCpu then takes. Its own process: the choice is made
// once per process, at the first update.
#include "worker/optim/adamw_isa.h"

#include "gtest/gtest.h"
#include "worker/optim/adamw.h"
#include "worker/optim/adamw_simd.h"

namespace zeroshard {
namespace {

TEST(AdamWIsaTest, AnOverrideFixesThePathAndABadOneIsRefused) {
  const absl::Status bogus = SetAdamWIsa("sse9");
  EXPECT_TRUE(absl::IsInvalidArgument(bogus)) << bogus;
  EXPECT_NE(bogus.message().find("auto, avx512, avx2 or scalar"), std::string::npos) << bogus;
  if (!optim_internal::CpuHasAvx512()) {
    const absl::Status lacking = SetAdamWIsa("avx512");
    EXPECT_TRUE(absl::IsInvalidArgument(lacking)) << lacking;
    EXPECT_NE(lacking.message().find("lacks it"), std::string::npos) << lacking;
  }
  // The scalar path, which every CPU runs and auto never picks where AVX2
  // exists.
  ASSERT_TRUE(SetAdamWIsa("scalar").ok());
  EXPECT_EQ(ChosenAdamWIsa(), AdamWIsa::kScalar);
  EXPECT_STREQ(AdamWCpuIsa(), "scalar");
  // Set after the first choice: no effect.
  ASSERT_TRUE(SetAdamWIsa("auto").ok());
  EXPECT_EQ(ChosenAdamWIsa(), AdamWIsa::kScalar);
}

}  // namespace
}  // namespace zeroshard
