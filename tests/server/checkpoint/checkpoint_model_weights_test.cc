// CheckpointStore::ReadRange with model_weights set (model_weights_read.cc):
// a rank's range of a unit's flat buffer under the running job's plan, read
// from the model directory's safetensors: the weights, then zeros over the
// shard padding, in chunks of chunk_bytes each with its XXH64 (seed 0),
// computed here from the bytes received; and the refusals, by code.
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/formats/hf_weights.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/local_read_server.h"
#include "tests/support/subprocess.h"
#include "worker/checkpoint/local_reads.h"

namespace zeroshard::testing {
namespace {

using server::CheckpointJob;
using server::CheckpointStore;

// "block.0" = w [4, 3] (F32) then b [4] (BF16): 16 elements, padded to 24
// at world size 3 and alignment 4 (the job's plan below).
std::vector<UnitSpec> Units() {
  return {{"embed", {{"e", {5, 3}, DType::kFp32}}},
          {"block.0", {{"w", {4, 3}, DType::kFp32}, {"b", {4}, DType::kFp32}}}};
}

class ModelWeightsReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_model_weights");
    const std::string& dir = dir_;
    for (int i = 0; i < 15; ++i) e_.push_back(0.25f * i);
    for (int i = 0; i < 12; ++i) w_.push_back(1.0f / (i + 3));  // Not exact in bf16: F32 kept.
    auto fill = [this](size_t i, float* dst) {
      const std::vector<float>& v = i == 0 ? e_ : i == 1 ? w_ : b_;
      std::memcpy(dst, v.data(), v.size() * 4);
      return absl::OkStatus();
    };
    ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors",
                                 {{"e", {5, 3}, "F32"}, {"w", {4, 3}, "F32"}, {"b", {4}, "BF16"}},
                                 {}, fill)
                    .ok());
    absl::StatusOr<HfWeights> hf = HfWeights::Open(dir);
    ASSERT_TRUE(hf.ok()) << hf.status();
    weights_ = std::make_shared<const HfWeights>(*std::move(hf));
    server::CheckpointStoreOptions o;
    o.dir = dir + "/store";
    absl::StatusOr<std::unique_ptr<CheckpointStore>> s = CheckpointStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void ServeJob() {
    job_.job_id = "job";
    job_.units = Units();
    job_.alignment = 4;
    job_.max_world_size = 4;
    job_.world_size = 3;
    store_->SetJobSource([this]() -> absl::StatusOr<CheckpointJob> { return job_; });
    store_->SetModelWeights(weights_);
  }
  static v1::DownloadRangeRequest Request(const std::string& unit, int64_t offset, int64_t length) {
    v1::DownloadRangeRequest req;
    req.set_job_id("job");
    req.set_unit(unit);
    req.set_kind(v1::TENSOR_KIND_MASTER);
    req.set_offset(offset);
    req.set_length(length);
    req.set_chunk_bytes(28);  // 7 elements a chunk.
    req.set_model_weights(true);
    return req;
  }
  absl::Status Read(const v1::DownloadRangeRequest& req) {
    chunks_.clear();
    return store_->ReadRange(req, [this](const v1::RangeChunk& c) {
      chunks_.push_back(c);
      return absl::OkStatus();
    });
  }

  std::string dir_;
  std::vector<float> e_, w_, b_ = {1.5f, -0.375f, 6.0f, 0.0f};  // b exact in bf16.
  std::shared_ptr<const HfWeights> weights_;
  std::unique_ptr<CheckpointStore> store_;
  CheckpointJob job_;
  std::vector<v1::RangeChunk> chunks_;
};

TEST_F(ModelWeightsReadTest, NoWeightsIsFailedPrecondition) {
  EXPECT_EQ(Read(Request("block.0", 0, 4)).code(), absl::StatusCode::kFailedPrecondition);
}

// Elements 5..23 of block.0: w[5..11], b[0..3], then 8 of padding, in
// chunks of 7, 7 and 5 elements.
TEST_F(ModelWeightsReadTest, RangeGivesWeightsThenZerosInHashedChunks) {
  ServeJob();
  ASSERT_TRUE(Read(Request("block.0", 5, 19)).ok());
  std::vector<float> want(w_.begin() + 5, w_.end());
  want.insert(want.end(), b_.begin(), b_.end());
  want.resize(19, 0.0f);
  ASSERT_EQ(chunks_.size(), 3u);
  const int64_t offsets[] = {5, 12, 19}, lengths[] = {7, 7, 5};
  std::vector<float> got;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const v1::RangeChunk& c = chunks_[i];
    EXPECT_EQ(c.offset(), offsets[i]);
    EXPECT_EQ(c.length(), lengths[i]);
    ASSERT_EQ(c.data().size(), static_cast<size_t>(4 * c.length()));
    EXPECT_EQ(c.xxhash64(), XXH64(c.data().data(), c.data().size(), 0)) << "chunk " << i;
    const float* f = reinterpret_cast<const float*>(c.data().data());
    got.insert(got.end(), f, f + c.length());
  }
  EXPECT_EQ(got, want);
}

// accept_bf16: a chunk whose tensors are all stored as BF16 (or that is all
// padding) comes as those bits, 2 bytes an element, hashed as sent; one that
// touches the F32 w comes as fp32.
TEST_F(ModelWeightsReadTest, Bf16RangesTravelAsTheirBits) {
  ServeJob();
  v1::DownloadRangeRequest req = Request("block.0", 5, 19);
  req.set_accept_bf16(true);
  ASSERT_TRUE(Read(req).ok());
  ASSERT_EQ(chunks_.size(), 3u);
  const bool bf16[] = {false, true, true};  // [5, 12) w; [12, 19) b + padding; [19, 24) padding.
  std::vector<float> got;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const v1::RangeChunk& c = chunks_[i];
    EXPECT_EQ(c.bf16(), bf16[i]) << "chunk " << i;
    ASSERT_EQ(c.data().size(), static_cast<size_t>((bf16[i] ? 2 : 4) * c.length()));
    EXPECT_EQ(c.xxhash64(), XXH64(c.data().data(), c.data().size(), 0)) << "chunk " << i;
    for (int64_t k = 0; k < c.length(); ++k) {
      if (!bf16[i]) {
        got.push_back(reinterpret_cast<const float*>(c.data().data())[k]);
        continue;
      }
      uint16_t bits;
      std::memcpy(&bits, c.data().data() + 2 * k, 2);
      got.push_back(Bf16ToFloat(bits));
    }
  }
  std::vector<float> want(w_.begin() + 5, w_.end());
  want.insert(want.end(), b_.begin(), b_.end());
  want.resize(19, 0.0f);
  EXPECT_EQ(got, want);
}

// Refused before any chunk is sent.
TEST_F(ModelWeightsReadTest, BadRequestsAreInvalidArgument) {
  ServeJob();
  v1::DownloadRangeRequest exp_avg = Request("block.0", 0, 4);
  exp_avg.set_kind(v1::TENSOR_KIND_EXP_AVG);  // Initial weights have no moments.
  for (const v1::DownloadRangeRequest& req :
       {exp_avg, Request("block.0", 20, 5) /* past 24 */, Request("block.7", 0, 1),
        // offset + length overflows int64 ([Note: overflow-safe ranges]).
        Request("block.0", std::numeric_limits<int64_t>::max() - 3, 16)}) {
    EXPECT_EQ(Read(req).code(), absl::StatusCode::kInvalidArgument) << req.ShortDebugString();
    EXPECT_TRUE(chunks_.empty()) << req.ShortDebugString();
  }
  EXPECT_TRUE(Read(Request("block.0", 23, 1)).ok());  // The last padded element.
  // The padding is the running world size's: at 1 rank, 16 elements pad to 16.
  job_.world_size = 1;
  EXPECT_EQ(Read(Request("block.0", 16, 1)).code(), absl::StatusCode::kInvalidArgument);
}

// Local reads (local_read_server.h): a rank on this host reads the same
// range from the safetensors through descriptors, widening BF16 itself.
TEST_F(ModelWeightsReadTest, ALocalReadGivesTheSameRange) {
  auto server = server::LocalReadServer::Start(store_.get(),
                                               [](absl::string_view) { return absl::OkStatus(); });
  ASSERT_TRUE(server.ok()) << server.status();
  auto reads = checkpoint::LocalReads::Connect((*server)->socket_path(), "", absl::Seconds(10));
  ASSERT_TRUE(reads.ok()) << reads.status();
  const ShardPlan plan = *MakeShardPlan(Units(), 3, 4);
  const UnitPlan& block = *plan.FindUnit("block.0");
  std::vector<float> got(19, -9.f);
  EXPECT_EQ((*reads)->ReadModelWeights("job", block, {5, 19}, got.data()).code(),
            absl::StatusCode::kFailedPrecondition);  // No weights served yet.
  ServeJob();
  auto fresh = checkpoint::LocalReads::Connect((*server)->socket_path(), "", absl::Seconds(10));
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->ReadModelWeights("job", block, {5, 19}, got.data()).ok());
  std::vector<float> want(w_.begin() + 5, w_.end());
  want.insert(want.end(), b_.begin(), b_.end());
  want.resize(19, 0.0f);
  EXPECT_EQ(got, want);
  std::vector<float> embed(15);
  ASSERT_TRUE(
      (*fresh)->ReadModelWeights("job", *plan.FindUnit("embed"), {0, 15}, embed.data()).ok());
  EXPECT_EQ(embed, e_);
  EXPECT_EQ((*fresh)->ReadModelWeights("job", block, {20, 5}, got.data()).code(),
            absl::StatusCode::kInvalidArgument);  // Past the unit's 24 padded elements.
  // A file index past the model's one file.
  v1::LocalReadRequest req;
  req.mutable_file()->set_job_id("job");
  req.mutable_file()->set_model_weights(true);
  req.set_model_file(2);
  EXPECT_EQ(store_->OpenModelWeightsForLocalRead(req).status().code(),
            absl::StatusCode::kInvalidArgument);
  req.mutable_file()->set_job_id("other-job");
  req.set_model_file(0);
  EXPECT_EQ(store_->OpenModelWeightsForLocalRead(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zeroshard::testing
