// Block hashes (CheckpointFile.block_bytes / block_xxhash64): recorded at
// commit from the files' bytes; a restarted store serves a checkpoint without
// reading it whole first and verifies each block as a range reads it; a
// changed byte is found in the block that holds it, and the checkpoint is
// dropped; manifests without block hashes are still verified whole.
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "tests/server/checkpoint/checkpoint_file_edits.h"
#include "tests/server/checkpoint/store_test_fixture.h"

namespace zeroshard::testing {
namespace {

namespace fs = std::filesystem;

class BlockHashTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    // 18 elements: OddUnits' files (336, 128 and 16 padded elements) span
    // 19, 8 and 1 blocks, each file's last one shorter.
    block_bytes_ = 72;
  }
  std::string Dir(int64_t step) const { return dir_ + "/" + server::CheckpointIdForStep(step); }
};

TEST_F(BlockHashTest, CommitRecordsEachBlocksHash) {
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, RandomState(OddUnits(), 1)).committed());
  auto m = server::LoadManifest(Dir(1), server::HashCheck::kNone);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const v1::CheckpointFile& f : m->manifest.files()) {
    const std::string bytes = FileBytes(Dir(1) + "/" + f.path());
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), f.bytes());
    EXPECT_EQ(f.xxhash64(), XXH64(bytes.data(), bytes.size(), 0));
    EXPECT_EQ(f.block_bytes(), 72);
    ASSERT_EQ(f.block_xxhash64_size(), (f.bytes() + 71) / 72) << f.path();
    EXPECT_NE(f.bytes() % 72, 0) << f.path() << ": the last block is shorter";
    for (int i = 0; i < f.block_xxhash64_size(); ++i) {
      const size_t begin = static_cast<size_t>(i) * 72;
      const size_t n = std::min<size_t>(72, bytes.size() - begin);
      EXPECT_EQ(f.block_xxhash64(i), XXH64(bytes.data() + begin, n, 0)) << f.path() << " " << i;
    }
  }
}

// Any range and chunk size, after a restart (blocks verified as read, or
// with the manifest stripped of them: the path of older checkpoints): the
// saved values, in chunks that never cross a block's edge where there are
// blocks.
TEST_F(BlockHashTest, RangesReadBackAcrossBlockEdgesAfterARestart) {
  const ModelState st = RandomState(OddUnits(), 2);
  for (bool stripped : {false, true}) {
    auto s = OpenStore();
    ASSERT_TRUE(SaveAll(*s, 1, st).committed());
    if (stripped) StripBlockHashes(Dir(1));
    chunks_within_blocks_ = !stripped;
    s = OpenStore();
    for (const UnitPlan& u : plan_.units) {
      const int64_t n = u.padded_numel;
      for (int64_t chunk_bytes : {20, 72, 1000}) {
        for (auto [off, len] : {std::pair<int64_t, int64_t>{0, n}, {1, n - 1}, {17, n - 30}}) {
          if (len < 1) continue;
          for (int k = 0; k < 3; ++k) {
            auto got = ReadStatus(*s, 1, u.name, kKinds[k], off, len, chunk_bytes);
            ASSERT_TRUE(got.ok()) << got.status();
            ASSERT_EQ(static_cast<int64_t>(got->size()), len);
            for (int64_t e = 0; e < len; ++e) {
              ASSERT_EQ((*got)[static_cast<size_t>(e)], At(st.at(u.name), k, off + e))
                  << u.name << " kind " << k << " element " << off + e << " chunk " << chunk_bytes
                  << (stripped ? " (no block hashes)" : "");
            }
          }
        }
      }
    }
  }
}

TEST_F(BlockHashTest, AChangedByteIsFoundInItsBlockWhenReadAndTheCheckpointIsDropped) {
  const ModelState st = RandomState(OddUnits(), 3);
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, st).committed());
  ASSERT_TRUE(SaveAll(*s, 2, st).committed());
  s = OpenStore();
  const UnitPlan& u = plan_.units[0];
  ASSERT_GE(u.padded_numel, 54);
  FlipByte(Dir(2) + "/u0000.master.bin", 2 * 72 + 3);  // Block 2: elements 36-53.
  // Served without a whole read: Get and the blocks before it pass.
  ASSERT_TRUE(s->Get("", std::nullopt).ok());
  auto before = ReadStatus(*s, 2, u.name, v1::TENSOR_KIND_MASTER, 0, 36);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ((*before)[35], At(st.at(u.name), 0, 35));
  auto bad = ReadStatus(*s, 2, u.name, v1::TENSOR_KIND_MASTER, 40, 2);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("u0000.master.bin block 2 (bytes from 144)"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{1});
  ASSERT_EQ(s->List("").rejected_size(), 1);
  EXPECT_EQ(s->Get("", std::nullopt)->summary().step(), 1);
  // A whole check (export's) names the block too.
  auto whole = server::LoadManifest(Dir(2), server::HashCheck::kWhole);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(whole.status().message().find("u0000.master.bin block 2 has xxhash64"),
            std::string::npos)
      << whole.status();
}

// A chunk that is a whole block (its hash read, checked and sent as one):
// a changed byte there is found too.
TEST_F(BlockHashTest, AChangedByteInAWholeBlockChunkIsFound) {
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, RandomState(OddUnits(), 7)).committed());
  s = OpenStore();
  FlipByte(Dir(1) + "/u0001.exp_avg_sq.bin", 72 + 70);  // Block 1: elements 18-35.
  const UnitPlan& u = plan_.units[1];
  auto bad = ReadStatus(*s, 1, u.name, v1::TENSOR_KIND_EXP_AVG_SQ, 18, 18, 72);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("u0001.exp_avg_sq.bin block 1 (bytes from 72)"),
            std::string::npos)
      << bad.status();
  EXPECT_TRUE(ListedSteps(*s).empty());
}

TEST_F(BlockHashTest, AManifestWithoutBlockHashesIsVerifiedWholeOnFirstRead) {
  const ModelState st = RandomState(OddUnits(), 4);
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, st).committed());
  ASSERT_TRUE(SaveAll(*s, 2, st).committed());
  s.reset();
  for (int64_t step : {1, 2}) StripBlockHashes(Dir(step));
  chunks_within_blocks_ = false;
  FlipByte(Dir(2) + "/u0001.exp_avg.bin", 9);
  s = OpenStore();
  auto got = s->Get("", std::nullopt);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("u0001.exp_avg.bin has xxhash64"), std::string::npos)
      << got.status();
  EXPECT_EQ(s->Get("", std::nullopt)->summary().step(), 1);
  const UnitPlan& u = plan_.units[1];
  auto back = ReadStatus(*s, 1, u.name, v1::TENSOR_KIND_EXP_AVG, 0, u.padded_numel, 64);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[2], At(st.at(u.name), 1, 2));
}

// Hostile or damaged block fields: each checkpoint is rejected at open,
// naming the file, and nothing crashes or allocates by them.
TEST_F(BlockHashTest, BlockHashesOfTheWrongShapeAreRejectedAtOpen) {
  const std::vector<std::function<void(v1::CheckpointFile&)>> edits = {
      [](v1::CheckpointFile& f) { f.mutable_block_xxhash64()->RemoveLast(); },
      [](v1::CheckpointFile& f) { f.set_block_bytes(-8); },
      [](v1::CheckpointFile& f) { f.set_block_bytes(70); },  // Not a multiple of 4.
      [](v1::CheckpointFile& f) { f.set_block_bytes(std::numeric_limits<int64_t>::max() - 3); },
      [](v1::CheckpointFile& f) { f.set_block_bytes(server::kMaxCheckpointBlockBytes + 4); },
      [](v1::CheckpointFile& f) {  // Once overflowed the count: 0 hashes for one huge block.
        f.set_block_bytes(std::numeric_limits<int64_t>::max() - 3);
        f.clear_block_xxhash64();
      },
      [](v1::CheckpointFile& f) { f.set_block_bytes(0); },  // Hashes without a size.
  };
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, RandomState(OddUnits(), 5)).committed());
  for (size_t i = 0; i < edits.size(); ++i) {
    ASSERT_TRUE(SaveAll(*s, 2 + i, RandomState(OddUnits(), 6)).committed());
  }
  s.reset();
  for (size_t i = 0; i < edits.size(); ++i) {
    EditManifest(Dir(2 + i), [&](v1::CheckpointFile& f) {
      if (f.path() == "u0000.exp_avg_sq.bin") edits[i](f);
    });
  }
  s = OpenStore();
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{1});
  const auto list = s->List("");
  ASSERT_EQ(list.rejected_size(), static_cast<int>(edits.size()));
  for (const std::string& why : list.rejected()) {
    EXPECT_NE(why.find("u0000.exp_avg_sq.bin records"), std::string::npos) << why;
  }
}

TEST(CheckpointStoreOptionsTest, BlockBytesMustBeAPositiveMultipleOf4) {
  for (int64_t bad : {int64_t{0}, int64_t{-4}, int64_t{6}, server::kMaxCheckpointBlockBytes + 4}) {
    server::CheckpointStoreOptions o;
    o.dir = MakeTempDir("ckpt_block_opts");
    o.block_bytes = bad;
    auto s = server::CheckpointStore::Open(o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("block_bytes"), std::string::npos) << s.status();
  }
}

}  // namespace
}  // namespace zeroshard::testing
