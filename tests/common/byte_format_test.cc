// Byte counts for people (common/byte_format.h): the unit each figure
// reads in, against values worked out by hand.
#include "common/byte_format.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ByteFormatTest, DecimalUnits) {
  EXPECT_EQ(FormatDecimalBytes(0), "0 B");
  EXPECT_EQ(FormatDecimalBytes(999), "999 B");
  EXPECT_EQ(FormatDecimalBytes(1000), "1.00 kB");
  EXPECT_EQ(FormatDecimalBytes(652'000), "652.00 kB");
  EXPECT_EQ(FormatDecimalBytes(84'000'000'000), "84.00 GB");
  EXPECT_EQ(FormatDecimalBytes(int64_t{3} * 1'000'000'000'000'000), "3000.00 TB");
  EXPECT_EQ(FormatDecimalBytes(-2'500'000), "-2.50 MB");
}

TEST(ByteFormatTest, BinaryUnits) {
  EXPECT_EQ(FormatBinaryBytes(1023), "1023 B");
  EXPECT_EQ(FormatBinaryBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBinaryBytes(int64_t{44} << 20), "44.00 MiB");
  EXPECT_EQ(FormatBinaryBytes(int64_t{3} << 29), "1.50 GiB");
}

TEST(ByteFormatTest, OneUnitForATable) {
  const ByteUnit u = DecimalUnitFor(336'000'000'000);
  EXPECT_STREQ(u.name, "GB");
  EXPECT_EQ(BytesIn(3'500'000'000, u), "3.50");
  EXPECT_EQ(BytesIn(0, u), "0.00");
  EXPECT_STREQ(DecimalUnitFor(600'000'000).name, "MB");
}

}  // namespace
}  // namespace zeroshard
