// HfWeights over small model directories written here: F32 and BF16 files
// by WriteSafetensors, an F16 and I32 file byte by byte (what
// transformers writes for fp16 models, and a dtype zeroshard cannot load),
// one file alone and three behind an index. Values are checked against
// references computed in the test: bf16 ties rounded to even by hand, F16
// bit patterns decoded with ldexp; a unit's range crossing files and its
// padding; and each error code with the tensor or file it names.
#include "common/formats/hf_weights.h"

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

namespace fs = std::filesystem;

// A fresh directory, removed with the fixture.
class HfWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "hf_weights_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string dir_;
};

// `values` written as `entries` in order (numel each), via WriteSafetensors.
void Write(const std::string& path, const std::vector<SafetensorsEntry>& entries,
           const std::vector<std::vector<float>>& values) {
  ASSERT_TRUE(WriteSafetensors(path, entries, {}, [&](size_t i, float* dst) {
                std::memcpy(dst, values[i].data(), values[i].size() * 4);
                return absl::OkStatus();
              }).ok());
}

// A safetensors file from raw pieces: {name, dtype, shape, little-endian bytes}.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
void WriteRaw(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string json = header.dump();  // Unpadded: the format allows it.
  const uint64_t n = json.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << json << data;
}

std::string Bytes16(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// binary16 patterns and their values by ldexp: normal, the largest, the
// smallest normal, subnormals, signed zeros, infinities.
const std::vector<std::pair<uint16_t, float>>& HalfCases() {
  static const std::vector<std::pair<uint16_t, float>> cases = {
      {0x3C00, 1.0f},
      {0xC100, -2.5f},
      {0x7BFF, 65504.0f},
      {0x0400, std::ldexp(1.0f, -14)},
      {0x0001, std::ldexp(1.0f, -24)},
      {0x83FF, -std::ldexp(1023.0f, -24)},
      {0x0000, 0.0f},
      {0x8000, -0.0f},
      {0x7C00, std::numeric_limits<float>::infinity()},
      {0xFC00, -std::numeric_limits<float>::infinity()},
      {0x3555, std::ldexp(1365.0f, -12)},  // 0x155 = 341: (1024 + 341) * 2^-10 * 2^-2.
  };
  return cases;
}

TEST(HalfToFloatTest, KnownPatterns) {
  for (const auto& [bits, want] : HalfCases()) {
    EXPECT_TRUE(SameBits(HalfToFloat(bits), want)) << std::hex << bits << ": " << HalfToFloat(bits);
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
}

// One model.safetensors: F32 read exactly, BF16 rounded to nearest even.
TEST_F(HfWeightsTest, SingleFileF32AndBf16) {
  const std::vector<float> w = {0.1f, -3.25f, 1e-20f, 7.0f, -0.0f, 123456.789f};
  // 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: ties go to the
  // even mantissa, 1. 1 + 3 * 2^-8 goes up to 1 + 2^-6; 1 + 2^-8 + 2^-20
  // is past halfway: 1 + 2^-7.
  const std::vector<float> b = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8),
                                1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), -2.0f};
  const std::vector<float> b_want = {1.0f, 1.0f + std::ldexp(1.0f, -6), 1.0f + std::ldexp(1.0f, -7),
                                     -2.0f};
  Write(Path("model.safetensors"), {{"w", {2, 3}, "F32"}, {"b", {4}, "BF16"}}, {w, b});
  absl::StatusOr<HfWeights> hf = HfWeights::Open(dir_);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(hf->files(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(hf->data_bytes(), 6 * 4 + 4 * 2);
  EXPECT_EQ(hf->DType("b"), "BF16");
  EXPECT_EQ(hf->DType("absent"), "");
  std::vector<float> got(4);
  ASSERT_TRUE(hf->Read("w", 1, 4, got.data()).ok());  // A middle range.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(SameBits(got[i], w[1 + i])) << i;
  ASSERT_TRUE(hf->Read("b", 0, 4, got.data()).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i], b_want[i]) << i;
    EXPECT_EQ(got[i], Bf16ToFloat(FloatToBf16(b[i]))) << i;  // What exports write.
  }
  EXPECT_EQ(hf->Read("w", 3, 4, got.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hf->Read("absent", 0, 1, got.data()).code(), absl::StatusCode::kFailedPrecondition);
}

// Three files behind an index, unit "u" = x.weight (F32, file 1), y.weight
// (BF16, file 2), h (F16, file 3). File 3 also holds a stale F16 copy of
// x.bias, which the index places in file 1: the index decides.
class ShardedTest : public HfWeightsTest {
 protected:
  void SetUp() override {
    HfWeightsTest::SetUp();
    for (int i = 0; i < 15; ++i) x_.push_back(0.5f * i - 3.0f);
    Write(Path("a.safetensors"), {{"x.weight", {3, 5}, "F32"}, {"x.bias", {7}, "F32"}},
          {x_, std::vector<float>(7, 9.0f)});
    Write(Path("b.safetensors"), {{"y.weight", {2, 3}, "BF16"}}, {y_});
    std::vector<uint16_t> h;
    for (const auto& [bits, value] : HalfCases()) h.push_back(bits);
    WriteRaw(Path("c.safetensors"), {{"h", "F16", {11}, Bytes16(h)},
                                     {"n.i32", "I32", {2}, std::string(8, '\1')},
                                     {"x.bias", "F16", {7}, Bytes16(std::vector<uint16_t>(7))}});
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", {}}};
    for (auto [t, f] : {std::pair{"x.weight", "a"},
                        {"x.bias", "a"},
                        {"y.weight", "b"},
                        {"h", "c"},
                        {"n.i32", "c"}}) {
      index["weight_map"][t] = std::string(f) + ".safetensors";
    }
    std::ofstream(Path("model.safetensors.index.json")) << index.dump();
  }
  static std::vector<UnitSpec> Units() {
    return {{"u",
             {{"x.weight", {3, 5}, DType::kFp32},
              {"y.weight", {2, 3}, DType::kFp32},
              {"h", {11}, DType::kFp32}}}};
  }
  std::vector<float> x_;
  std::vector<float> y_ = {1.5f, -0.25f, 8.0f, 0.0f, -1.0f, 3.0f};  // Exact in bf16.
};

TEST_F(ShardedTest, ReadUnitRangeCrossesFilesAndZeroesPadding) {
  absl::StatusOr<HfWeights> hf = HfWeights::Open(dir_);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(hf->files().size(), 3u);
  ASSERT_TRUE(hf->CheckUnits(Units()).ok()) << hf->CheckUnits(Units());
  // numel 15 + 6 + 11 = 32; three ranks at alignment 4 pad it to 36.
  const ShardPlan plan = *MakeShardPlan(Units(), 3, 4);
  ASSERT_EQ(plan.units[0].padded_numel, 36);
  std::vector<float> want(x_.begin() + 10, x_.end());  // Elements 10..35.
  want.insert(want.end(), y_.begin(), y_.end());
  for (const auto& [bits, value] : HalfCases()) want.push_back(value);
  want.resize(26, 0.0f);  // Padding.
  std::vector<float> got(26, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(hf->ReadUnitRange(plan.units[0], 10, 26, got.data()).ok());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(SameBits(got[i], want[i])) << 10 + i;
  std::vector<float> bias(7);
  ASSERT_TRUE(hf->Read("x.bias", 0, 7, bias.data()).ok());
  EXPECT_EQ(bias, std::vector<float>(7, 9.0f)) << "read the copy the index does not name";
}

// Each CheckUnits failure is FAILED_PRECONDITION naming the tensor.
TEST_F(ShardedTest, CheckUnitsNamesTheTensor) {
  absl::StatusOr<HfWeights> hf = HfWeights::Open(dir_);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::vector<std::pair<UnitSpec, std::string>> bad = {
      {{"u", {{"missing.weight", {2}, DType::kFp32}}}, "missing.weight"},
      {{"u", {{"y.weight", {3, 2}, DType::kFp32}}}, "y.weight"},  // Transposed.
      {{"u", {{"n.i32", {2}, DType::kFp32}}}, "n.i32"},
  };
  for (const auto& [unit, name] : bad) {
    absl::Status s = hf->CheckUnits({unit});
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << name << ": " << s;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
  }
}

TEST_F(ShardedTest, MissingFilesAreNotFound) {
  fs::remove(Path("b.safetensors"));
  absl::Status s = HfWeights::Open(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("b.safetensors"), std::string::npos) << s;
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  EXPECT_EQ(HfWeights::Open(dir_).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace zeroshard
