// A CheckpointStore in a fresh temporary dir with the OddUnits plan at 4
// ranks: open, save every rank's shards, read ranges back, list. Shared by
// the store's tests.
#pragma once

#include <xxhash.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_store");
    auto plan = MakeShardPlan(OddUnits(), 4, 4);
    ASSERT_TRUE(plan.ok());
    plan_ = *plan;
  }
  std::unique_ptr<server::CheckpointStore> OpenStore(int keep_last = 0,
                                                     std::function<int(int64_t)> fault = nullptr) {
    server::CheckpointStoreOptions o;
    o.dir = dir_;
    o.block_bytes = block_bytes_;
    o.keep_last = keep_last;
    o.write_fault = std::move(fault);
    auto s = server::CheckpointStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  // Saves a full checkpoint at `step` from every rank; returns the last commit.
  v1::CommitCheckpointResponse SaveAll(server::CheckpointStore& s, int64_t step,
                                       const ModelState& st) {
    std::string id;
    for (int r = 0; r < plan_.world_size; ++r) {
      auto got = s.Begin(MakeBegin(plan_, step, r));
      EXPECT_TRUE(got.ok()) << got.status();
      id = *got;
    }
    v1::CommitCheckpointResponse last;
    for (int r = 0; r < plan_.world_size; ++r) {
      for (const auto& c : RankChunks(id, plan_, st, r, 7)) EXPECT_TRUE(s.WriteChunk(c).ok());
      auto resp = s.Commit(id, r);
      EXPECT_TRUE(resp.ok()) << resp.status();
      last = *resp;
    }
    return last;
  }
  // ReadRange's data, each chunk checked to continue the range, to carry
  // its data's XXH64, to hold at most chunk_bytes and to stay in a block.
  absl::StatusOr<std::vector<float>> ReadStatus(server::CheckpointStore& s,
                                                std::optional<int64_t> step,
                                                const std::string& unit, v1::TensorKind k,
                                                int64_t off, int64_t len,
                                                int64_t chunk_bytes = 20) {
    v1::DownloadRangeRequest req;
    req.set_has_step(step.has_value());
    req.set_step(step.value_or(0));
    req.set_unit(unit);
    req.set_kind(k);
    req.set_offset(off);
    req.set_length(len);
    req.set_chunk_bytes(chunk_bytes);
    std::vector<float> out;
    int64_t next = off;
    absl::Status st = s.ReadRange(req, [&](const v1::RangeChunk& c) {
      EXPECT_EQ(c.offset(), next);
      EXPECT_LE(c.length() * 4, chunk_bytes);
      if (chunks_within_blocks_) {  // A chunk never crosses a block's edge.
        EXPECT_EQ(c.offset() * 4 / block_bytes_, ((c.offset() + c.length()) * 4 - 1) / block_bytes_)
            << "chunk at " << c.offset() << " of " << c.length();
      }
      EXPECT_EQ(c.xxhash64(), XXH64(c.data().data(), c.data().size(), 0));
      next += c.length();
      const float* f = reinterpret_cast<const float*>(c.data().data());
      out.insert(out.end(), f, f + c.length());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }
  std::vector<float> Read(server::CheckpointStore& s, std::optional<int64_t> step,
                          const std::string& unit, v1::TensorKind k, int64_t off, int64_t len,
                          int64_t chunk_bytes = 20) {
    absl::StatusOr<std::vector<float>> got = ReadStatus(s, step, unit, k, off, len, chunk_bytes);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *std::move(got) : std::vector<float>{};
  }
  std::vector<int64_t> ListedSteps(const server::CheckpointStore& s) {
    std::vector<int64_t> steps;
    const v1::ListCheckpointsResponse list = s.List("");
    for (const auto& c : list.checkpoints()) steps.push_back(c.step());
    return steps;
  }

  std::string dir_;
  ShardPlan plan_;
  int64_t block_bytes_ = server::kCheckpointBlockBytes;  // OpenStore's.
  // ReadStatus checks that chunks end at block edges (false for a
  // checkpoint whose manifest has no block hashes).
  bool chunks_within_blocks_ = true;
};

}  // namespace zeroshard::testing
