// Consolidated safetensors export: the file parses (offsets cover the data
// exactly; checked by our reader and, when installed, by the `safetensors`
// Python package) and its tensors equal the gathered master weights. Also the
// reader's refusal of malformed files.
#include "server/checkpoint/checkpoint_export.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "common/formats/safetensors.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

// The reference: each parameter's master values, cut from the unit's flat
// state by a running offset over OddUnits() (independent of the plan code).
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> Gathered(
    const ModelState& st) {
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> out;
  for (const UnitSpec& u : OddUnits()) {
    size_t off = 0;
    for (const TensorSpec& t : u.params) {
      size_t n = 1;
      for (int64_t d : t.shape) n *= static_cast<size_t>(d);
      const auto& master = st.at(u.name)[0];
      out[t.name] = {t.shape, std::vector<float>(master.begin() + off, master.begin() + off + n)};
      off += n;
    }
  }
  return out;
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_export");
    state_ = RandomState(OddUnits(), 11);
    const ShardPlan plan = *MakeShardPlan(OddUnits(), 4, 4);
    auto store = *server::CheckpointStore::Open({dir_, 0, nullptr, nullptr});
    for (int step : {5, 8}) {
      const ModelState st = step == 8 ? state_ : RandomState(OddUnits(), 3);
      std::string id;
      for (int r = 0; r < 4; ++r) id = *store->Begin(MakeBegin(plan, step, r));
      for (int r = 0; r < 4; ++r) {
        for (const auto& c : RankChunks(id, plan, st, r, 9)) ASSERT_TRUE(store->WriteChunk(c).ok());
      }
      ASSERT_TRUE(store->Commit(id, 0)->committed());
    }
  }
  std::string dir_;
  ModelState state_;
};

TEST_F(ExportTest, LatestExportParsesAndEqualsGatheredMasterWeights) {
  const std::string out = dir_ + "/model.safetensors";
  auto r = server::ExportSafetensors(dir_, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 8);
  auto info = ReadSafetensorsInfo(out);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->data_offset % 8, 0);
  EXPECT_EQ(info->metadata.at("zeroshard_step"), "8");
  const auto ref = Gathered(state_);
  ASSERT_EQ(info->tensors.size(), ref.size());
  for (const auto& [name, want] : ref) {
    auto got = ReadSafetensorsF32(out, *info, name);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want.second) << name;
    for (const auto& t : info->tensors) {
      if (t.name == name) {
        EXPECT_EQ(t.shape, want.first) << name;
      }
    }
  }
}

TEST_F(ExportTest, PythonSafetensorsPackageReadsIt) {
  if (RunCommand("python3 -c 'import safetensors.numpy, numpy'").exit_code != 0) {
    GTEST_SKIP() << "python3 with the safetensors and numpy packages is not installed "
                    "(scripts/setup-test-tools.sh installs them)";
  }
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_TRUE(server::ExportSafetensors(dir_ + "/step-00000008", out).ok());
  const std::string script = dir_ + "/read.py";
  std::ofstream(script) << "import sys\n"
                           "from safetensors.numpy import load_file\n"
                           "for name, a in sorted(load_file(sys.argv[1]).items()):\n"
                           "    assert str(a.dtype) == 'float32', a.dtype\n"
                           "    print(name, ','.join(map(str, a.shape)), "
                           "' '.join(float(x).hex() for x in a.reshape(-1)))\n";
  CommandResult res = RunCommand("python3 " + script + " " + out);
  ASSERT_EQ(res.exit_code, 0) << res.output;
  const auto ref = Gathered(state_);
  size_t lines = 0;
  for (absl::string_view line : absl::StrSplit(res.output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_GE(parts.size(), 2u) << line;
    const auto& want = ref.at(parts[0]);
    std::vector<int64_t> shape;
    for (absl::string_view d : absl::StrSplit(parts[1], ',', absl::SkipEmpty()))
      shape.push_back(std::stoll(std::string(d)));
    EXPECT_EQ(shape, want.first) << parts[0];
    ASSERT_EQ(parts.size() - 2, want.second.size()) << parts[0];
    for (size_t i = 0; i < want.second.size(); ++i) {
      EXPECT_EQ(static_cast<float>(std::strtod(parts[i + 2].c_str(), nullptr)), want.second[i])
          << parts[0];
    }
    ++lines;
  }
  EXPECT_EQ(lines, ref.size());
}

TEST_F(ExportTest, RefusesACheckpointWhoseFilesDoNotMatch) {
  {
    std::fstream f(dir_ + "/step-00000008/u0002.master.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x01');
  }
  auto r = server::ExportSafetensors(dir_ + "/step-00000008", dir_ + "/x.safetensors");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_FALSE(std::ifstream(dir_ + "/x.safetensors").good());
  EXPECT_EQ(server::ExportSafetensors(dir_ + "/nothing", dir_ + "/y").status().code(),
            absl::StatusCode::kNotFound);
}

// Writes a raw safetensors file with the given header JSON and data bytes.
std::string RawFile(const std::string& dir, const std::string& json, size_t data_bytes) {
  const std::string path = dir + "/raw.safetensors";
  std::ofstream f(path, std::ios::binary);
  uint64_t n = json.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << json << std::string(data_bytes, '\0');
  return path;
}

TEST(SafetensorsTest, ReaderRefusesGapsOverlapsAndBadSizes) {
  const std::string dir = MakeTempDir("safetensors");
  auto code = [&](const std::string& json, size_t bytes) {
    return ReadSafetensorsInfo(RawFile(dir, json, bytes)).status();
  };
  EXPECT_TRUE(
      code(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12)
          .ok());
  absl::Status gap = code(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12);
  EXPECT_NE(gap.message().find("gap"), std::string::npos) << gap;
  absl::Status overlap = code(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8);
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos) << overlap;
  EXPECT_EQ(code(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}})", 4).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("[1,2]", 0).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("{not json", 0).code(), absl::StatusCode::kDataLoss);
  // Round trip of the writer, including a scalar and a zero-size tensor.
  const std::string path = dir + "/w.safetensors";
  std::vector<SafetensorsEntry> entries = {{"s", {}}, {"z", {0, 3}}, {"m", {2, 3}}};
  ASSERT_TRUE(WriteSafetensors(path, entries, {{"k", "v"}}, [](size_t i, float* dst) {
                const int64_t n[] = {1, 0, 6};
                for (int64_t j = 0; j < n[i]; ++j) dst[j] = static_cast<float>(10 * i + j);
                return absl::OkStatus();
              }).ok());
  auto info = ReadSafetensorsInfo(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((8 + info->data_offset - 8) % 8, 0);
  EXPECT_EQ(*ReadSafetensorsF32(path, *info, "m"), (std::vector<float>{20, 21, 22, 23, 24, 25}));
  EXPECT_EQ(*ReadSafetensorsF32(path, *info, "s"), (std::vector<float>{0}));
  EXPECT_TRUE(ReadSafetensorsF32(path, *info, "z")->empty());
  EXPECT_EQ(info->metadata.at("k"), "v");
  EXPECT_EQ(WriteSafetensors(path, {{"a", {1}}, {"a", {1}}}, {}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::testing
