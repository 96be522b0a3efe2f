// The CPU device's element-wise primitives against scalar reference loops
// written here, on odd sizes, fp32 and bf16, bit for bit (SumSquares within
// 1e-12 relative and the same bits every run).
#include <cmath>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/device/device_test_util.h"
#include "worker/device/cpu_device.h"

namespace zeroshard {
namespace {

using device_test::ElementAt;
using device_test::RandomBytes;
using device_test::RefBf16;
using device_test::SetElement;

class CpuPrimitivesTest : public ::testing::TestWithParam<std::tuple<int64_t, DType, DType>> {
 protected:
  int64_t n() const { return std::get<0>(GetParam()); }
  DType a() const { return std::get<1>(GetParam()); }
  DType b() const { return std::get<2>(GetParam()); }
  CpuDevice device_{2};
};

TEST_P(CpuPrimitivesTest, ConvertMatchesReference) {
  // Every bit pattern, so ties, NaN, infinities and denormals are all seen.
  const std::vector<uint8_t> src = RandomBytes(a(), n(), 11, 1.0f, /*any_bits=*/true);
  std::vector<uint8_t> dst(static_cast<size_t>(n() * DTypeSize(b())), 0xee);
  ASSERT_TRUE(device_.Convert(src.data(), a(), dst.data(), b(), n()).ok());
  std::vector<uint8_t> want(dst.size());
  for (int64_t i = 0; i < n(); ++i) {
    if (a() == b()) {
      std::memcpy(want.data() + i * DTypeSize(b()), src.data() + i * DTypeSize(a()),
                  DTypeSize(a()));
    } else {
      SetElement(want, b(), i, ElementAt(src, a(), i));
    }
  }
  EXPECT_EQ(dst, want);
}

TEST_P(CpuPrimitivesTest, AddIntoMatchesReference) {
  std::vector<uint8_t> acc = RandomBytes(a(), n(), 21);
  const std::vector<uint8_t> x = RandomBytes(b(), n(), 22, 0.3f);
  std::vector<uint8_t> want = acc;
  for (int64_t i = 0; i < n(); ++i) {
    SetElement(want, a(), i, ElementAt(acc, a(), i) + ElementAt(x, b(), i));
  }
  ASSERT_TRUE(device_.AddInto(acc.data(), a(), x.data(), b(), n()).ok());
  EXPECT_EQ(acc, want);
}

TEST_P(CpuPrimitivesTest, ScaleMatchesReference) {
  std::vector<uint8_t> x = RandomBytes(a(), n(), 31, 4.0f);
  std::vector<uint8_t> want = x;
  for (int64_t i = 0; i < n(); ++i) SetElement(want, a(), i, ElementAt(x, a(), i) * 0.37f);
  ASSERT_TRUE(device_.Scale(x.data(), a(), 0.37f, n()).ok());
  EXPECT_EQ(x, want);
}

TEST_P(CpuPrimitivesTest, SumSquaresAccumulatesDeterministically) {
  const std::vector<uint8_t> x = RandomBytes(a(), n(), 41, 2.0f);
  long double want = 0.25L;
  for (int64_t i = 0; i < n(); ++i) {
    const long double f = ElementAt(x, a(), i);
    want += f * f;
  }
  double first = 0.25, second = 0.25;
  ASSERT_TRUE(device_.SumSquaresAccumulate(x.data(), a(), n(), &first).ok());
  ASSERT_TRUE(device_.SumSquaresAccumulate(x.data(), a(), n(), &second).ok());
  EXPECT_NEAR(first, static_cast<double>(want), 1e-12 * static_cast<double>(want));
  EXPECT_EQ(std::memcmp(&first, &second, sizeof(double)), 0);
}

TEST_P(CpuPrimitivesTest, AdamWMatchesReference) {
  const int64_t n = this->n();
  const DType out_dtype = b();
  std::vector<float> master(n), m(n, 0.0f), v(n, 0.0f), grad(n);
  const std::vector<uint8_t> init = RandomBytes(DType::kFp32, n, 49);
  std::memcpy(master.data(), init.data(), init.size());
  std::vector<float> ref_master = master, ref_m = m, ref_v = v;
  std::vector<uint8_t> out(n * DTypeSize(out_dtype)), ref_out(out.size());
  const AdamWHyperparams hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int step = 1; step <= 3; ++step) {
    const std::vector<uint8_t> g = RandomBytes(DType::kFp32, n, 50 + step, 0.1f);
    std::memcpy(grad.data(), g.data(), g.size());
    AdamWReference(
        hp, step, 0.5f,
        {ref_master.data(), ref_m.data(), ref_v.data(), grad.data(), n, ref_out.data(), out_dtype});
    ASSERT_TRUE(
        device_
            .AdamW(hp, step, 0.5f,
                   {master.data(), m.data(), v.data(), grad.data(), n, out.data(), out_dtype})
            .ok());
  }
  EXPECT_EQ(std::memcmp(master.data(), ref_master.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(m.data(), ref_m.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(v.data(), ref_v.data(), n * 4), 0);
  EXPECT_EQ(out, ref_out);
}

INSTANTIATE_TEST_SUITE_P(OddSizes, CpuPrimitivesTest,
                         ::testing::Combine(::testing::ValuesIn(device_test::OddSizes()),
                                            ::testing::Values(DType::kFp32, DType::kBf16),
                                            ::testing::Values(DType::kFp32, DType::kBf16)));

TEST(CpuPrimitives, RoundsTiesToEven) {
  // 1 + 2^-8 is halfway between two bf16 values; even is 1.0. 1 + 3 * 2^-8
  // rounds up to the even 1 + 2^-6.
  const float src[2] = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)};
  bf16 dst[2];
  CpuDevice device;
  ASSERT_TRUE(device.Convert(src, DType::kFp32, dst, DType::kBf16, 2).ok());
  EXPECT_EQ(dst[0], 0x3f80);
  EXPECT_EQ(dst[1], 0x3f82);
  EXPECT_EQ(dst[1], RefBf16(src[1]));
}

TEST(CpuPrimitives, RejectsBadArguments) {
  CpuDevice device;
  float x[1] = {1.0f};
  double acc = 0.0;
  EXPECT_EQ(device.Convert(x, DType::kFp16, x, DType::kFp32, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.AddInto(x, DType::kFp32, x, DType::kFp32, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.Scale(x, DType::kFp16, 2.0f, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.SumSquaresAccumulate(x, DType::kFp32, -3, &acc).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.AdamW({}, 0, 1.0f, {x, x, x, x, 1, nullptr, DType::kFp32}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.Memset(x, 0, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device.Copy(x, x, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(device.Convert(x, DType::kFp16, x, DType::kFp32, 1).message().find("fp16"),
            std::string::npos);
}

}  // namespace
}  // namespace zeroshard
