// BatchSampler: determinism from (seed, step, sample), independence from the
// world size (the union of ranks' samples at N = 3 equals N = 1), windows
// taken from the right split, and errors.
#include "worker/data/batch_sampler.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

TextCorpus MakeCorpus(int n) {
  const std::string dir = testing::MakeTempDir("sampler");
  std::string text;
  for (int i = 0; i < n; ++i) text += static_cast<char>(' ' + (i * 7919 % 95));
  std::ofstream(dir + "/t.txt", std::ios::binary) << text;
  return *TextCorpus::Load({dir});
}

TEST(SampleRangeTest, ContiguousNearEqualCover) {
  for (int64_t g : {1, 5, 16, 31}) {
    for (int n : {1, 2, 3, 5, 8}) {
      int64_t next = 0;
      for (int r = 0; r < n; ++r) {
        absl::StatusOr<SampleSpan> s = SampleRange(g, n, r);
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(s->begin, next);
        EXPECT_GE(s->size(), g / n);
        EXPECT_LE(s->size(), g / n + 1);
        next = s->end;
      }
      EXPECT_EQ(next, g);
    }
  }
  EXPECT_FALSE(SampleRange(0, 1, 0).ok());
  EXPECT_FALSE(SampleRange(4, 0, 0).ok());
  EXPECT_NE(SampleRange(4, 2, 2).status().message().find("rank"), std::string::npos);
}

TEST(BatchSamplerTest, RanksTogetherSeeTheSingleProcessBatch) {
  const TextCorpus corpus = MakeCorpus(5000);
  const BatchSampler sampler(corpus, Split::kTrain, 42);
  const int T = 16, G = 10;
  for (int64_t step : {0, 1, 99}) {
    std::vector<int32_t> x1(G * T), y1(G * T);
    ASSERT_TRUE(sampler.FillBatch(step, 0, G, T, x1.data(), y1.data()).ok());
    std::vector<int32_t> x3, y3;
    for (int r = 0; r < 3; ++r) {
      const SampleSpan s = *SampleRange(G, 3, r);
      std::vector<int32_t> x(s.size() * T), y(s.size() * T);
      // A separate sampler per rank, as in separate processes.
      const BatchSampler rank_sampler(corpus, Split::kTrain, 42);
      ASSERT_TRUE(rank_sampler.FillBatch(step, s.begin, s.end, T, x.data(), y.data()).ok());
      x3.insert(x3.end(), x.begin(), x.end());
      y3.insert(y3.end(), y.begin(), y.end());
    }
    EXPECT_EQ(x1, x3) << "step " << step;
    EXPECT_EQ(y1, y3) << "step " << step;
  }
}

TEST(BatchSamplerTest, WindowsAreNextByteTargetsFromTheSplit) {
  const TextCorpus corpus = MakeCorpus(3000);
  const int T = 8;
  for (Split split : {Split::kTrain, Split::kValidation}) {
    const absl::string_view text = corpus.split(split);
    const BatchSampler sampler(corpus, split, 1);
    std::vector<int32_t> x(4 * T), y(4 * T);
    ASSERT_TRUE(sampler.FillBatch(3, 0, 4, T, x.data(), y.data()).ok());
    std::set<int64_t> offsets;
    for (int i = 0; i < 4; ++i) {
      const int64_t off = sampler.SampleOffset(3, i, T);
      offsets.insert(off);
      ASSERT_LE(off + T + 1, static_cast<int64_t>(text.size()));
      for (int t = 0; t < T; ++t) {
        EXPECT_EQ(x[i * T + t], static_cast<unsigned char>(text[off + t]));
        EXPECT_EQ(y[i * T + t], static_cast<unsigned char>(text[off + t + 1]));
      }
    }
    EXPECT_EQ(offsets.size(), 4u);  // Distinct windows (collision odds ~1e-5).
  }
}

TEST(BatchSamplerTest, SeedAndStepChangeTheSamples) {
  const TextCorpus corpus = MakeCorpus(100000);
  const BatchSampler a(corpus, Split::kTrain, 1), b(corpus, Split::kTrain, 2);
  EXPECT_EQ(a.SampleOffset(5, 0, 16), a.SampleOffset(5, 0, 16));
  EXPECT_NE(a.SampleOffset(5, 0, 16), b.SampleOffset(5, 0, 16));
  EXPECT_NE(a.SampleOffset(5, 0, 16), a.SampleOffset(6, 0, 16));
}

TEST(BatchSamplerTest, ShortSplitAndBadArgumentsAreErrors) {
  const TextCorpus corpus = MakeCorpus(200);  // Validation: 10 bytes.
  const BatchSampler val(corpus, Split::kValidation, 1);
  std::vector<int32_t> x(64), y(64);
  absl::Status s = val.FillBatch(0, 0, 1, 16, x.data(), y.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("validation"), std::string::npos) << s;
  const BatchSampler train(corpus, Split::kTrain, 1);
  EXPECT_FALSE(train.FillBatch(-1, 0, 1, 8, x.data(), y.data()).ok());
  EXPECT_FALSE(train.FillBatch(0, 2, 1, 8, x.data(), y.data()).ok());
  EXPECT_FALSE(train.FillBatch(0, 0, 1, 0, x.data(), y.data()).ok());
}

}  // namespace
}  // namespace zeroshard
