// CheckpointStore without sockets: atomic commit, cut-off uploads, corrupt
// chunks, manifest/file mismatch, retention, disk full, field validation.
#include "server/checkpoint/checkpoint_store.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/server/checkpoint/store_test_fixture.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

namespace fs = std::filesystem;
using server::CheckpointStore;

TEST_F(StoreTest, CommitsOnlyWhenEveryRankArrivedAndReadsBack) {
  auto s = OpenStore();
  ModelState st = RandomState(OddUnits(), 1);
  std::string id;
  for (int r = 0; r < 4; ++r) id = *s->Begin(MakeBegin(plan_, 6, r));
  EXPECT_EQ(id.substr(0, 16), "step-00000006.0.");
  for (int r = 0; r < 3; ++r) {
    for (const auto& c : RankChunks(id, plan_, st, r, 5)) ASSERT_TRUE(s->WriteChunk(c).ok());
    auto resp = s->Commit(id, r);
    ASSERT_TRUE(resp.ok());
    EXPECT_FALSE(resp->committed());
    ASSERT_EQ(resp->missing_ranks_size(), 3 - r);
    EXPECT_EQ(resp->missing_ranks(0), r + 1);
    EXPECT_TRUE(ListedSteps(*s).empty());
  }
  for (const auto& c : RankChunks(id, plan_, st, 3, 5)) ASSERT_TRUE(s->WriteChunk(c).ok());
  auto resp = s->Commit(id, 3);
  ASSERT_TRUE(resp.ok());
  EXPECT_TRUE(resp->committed());
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{6});
  EXPECT_TRUE(s->Commit(id, 0)->committed());  // Idempotent.

  auto info = s->Get("job", std::nullopt);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->trainer().optimizer_step(), 6);
  EXPECT_EQ(info->trainer().data_cursor(), 96);
  ASSERT_EQ(info->trainer().rng_state_size(), 4);
  EXPECT_EQ(info->trainer().rng_state(2), "rng-2");
  EXPECT_EQ(info->model_config_json(), R"({"d_model":8})");
  EXPECT_EQ(info->summary().world_size(), 4);

  // Any range, crossing shard boundaries, equals the reference.
  for (const UnitPlan& u : plan_.units) {
    for (int k = 0; k < 3; ++k) {
      auto got = Read(*s, 6, u.name, kKinds[k], 1, u.padded_numel - 1);
      ASSERT_EQ(static_cast<int64_t>(got.size()), u.padded_numel - 1);
      for (int64_t e = 1; e < u.padded_numel; ++e) {
        ASSERT_EQ(got[static_cast<size_t>(e - 1)], At(st.at(u.name), k, e)) << u.name << " " << e;
      }
    }
  }
  // A fresh store (coordinator restart) lists and serves it too.
  s.reset();
  auto s2 = OpenStore();
  EXPECT_EQ(ListedSteps(*s2), std::vector<int64_t>{6});
  auto got = Read(*s2, std::nullopt, "embed", v1::TENSOR_KIND_EXP_AVG_SQ, 0, 10, 1 << 20);
  for (int64_t e = 0; e < 10; ++e) EXPECT_EQ(got[e], At(st.at("embed"), 2, e));
}

TEST_F(StoreTest, UploadCutOffMidwayLeavesPreviousAsLatest) {
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 3, RandomState(OddUnits(), 1)).committed());
  ModelState st2 = RandomState(OddUnits(), 2);
  std::string id = *s->Begin(MakeBegin(plan_, 4, 0));
  auto chunks = RankChunks(id, plan_, st2, 0, 7);
  for (size_t i = 0; i < chunks.size() / 2; ++i) ASSERT_TRUE(s->WriteChunk(chunks[i]).ok());
  // The client is gone. Nothing new is visible; commit refuses.
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{3});
  EXPECT_FALSE(s->Commit(id, 0)->committed());
  EXPECT_EQ(s->Get("", std::nullopt)->summary().step(), 3);
  // Coordinator restart: the partial directory is removed.
  s.reset();
  EXPECT_TRUE(fs::exists(dir_ + "/.pending-" + id));
  auto s2 = OpenStore();
  EXPECT_FALSE(fs::exists(dir_ + "/.pending-" + id));
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000004"));
  EXPECT_EQ(ListedSteps(*s2), std::vector<int64_t>{3});
  EXPECT_EQ(s2->PendingCount(), 0);
}

TEST_F(StoreTest, AbortAttemptsAndLaterCommitsRemovePending) {
  auto s = OpenStore();
  std::string id = *s->Begin(MakeBegin(plan_, 4, 0));
  ASSERT_TRUE(s->Abort(id).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/.pending-" + id));
  EXPECT_EQ(s->Abort(id).code(), absl::StatusCode::kNotFound);
  // A higher attempt (a new generation) replaces a cut-off save of a step;
  // the old one's chunks are refused; a lower attempt is refused.
  auto b1 = MakeBegin(plan_, 5, 0);
  b1.set_attempt(1);
  const std::string old_id = *s->Begin(b1);
  auto b2 = b1;
  b2.set_attempt(2);
  const std::string new_id = *s->Begin(b2);
  EXPECT_NE(old_id, new_id);
  EXPECT_EQ(s->WriteChunk(RankChunks(old_id, plan_, RandomState(OddUnits(), 1), 0, 7)[0]).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(s->Begin(b1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*s->Begin(b2), new_id);  // Same attempt joins.
  // Saves of several steps may be pending at once; committing step 7 drops step 5's.
  EXPECT_EQ(s->PendingCount(), 1);
  ASSERT_TRUE(SaveAll(*s, 7, RandomState(OddUnits(), 7)).committed());
  EXPECT_EQ(s->PendingCount(), 0);
  EXPECT_FALSE(fs::exists(dir_ + "/.pending-" + new_id));
}

TEST_F(StoreTest, SavingACommittedStepAgainReplacesIt) {
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 12, RandomState(OddUnits(), 1)).committed());
  const ModelState again = RandomState(OddUnits(), 2);  // A resumed run's step 12.
  ASSERT_TRUE(SaveAll(*s, 12, again).committed());
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{12});
  auto got = Read(*s, 12, "block.0", v1::TENSOR_KIND_MASTER, 0, 20);
  for (int64_t e = 0; e < 20; ++e) EXPECT_EQ(got[e], At(again.at("block.0"), 0, e));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_))
    entries += e.path().filename() != "step-00000012";
  EXPECT_EQ(entries, 0);
  s.reset();
  auto s2 = OpenStore();
  got = Read(*s2, 12, "block.0", v1::TENSOR_KIND_MASTER, 0, 20);
  for (int64_t e = 0; e < 20; ++e) EXPECT_EQ(got[e], At(again.at("block.0"), 0, e));
}

TEST_F(StoreTest, CorruptChunkIsRefusedAndCheckpointNeverCommits) {
  auto s = OpenStore();
  ModelState st = RandomState(OddUnits(), 3);
  std::string id;
  for (int r = 0; r < 4; ++r) id = *s->Begin(MakeBegin(plan_, 2, r));
  auto bad = RankChunks(id, plan_, st, 1, 7)[2];
  bad.mutable_data()->at(3) ^= 0x10;  // One flipped bit; hash left as sent.
  absl::Status refused = s->WriteChunk(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("xxhash64"), std::string::npos) << refused;
  // Even after every correct chunk arrives, it never commits.
  for (int r = 0; r < 4; ++r) {
    for (const auto& c : RankChunks(id, plan_, st, r, 7)) s->WriteChunk(c).IgnoreError();
  }
  auto resp = s->Commit(id, 0);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kDataLoss) << resp.status();
  EXPECT_TRUE(ListedSteps(*s).empty());
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000002"));
}

TEST_F(StoreTest, ManifestThatDoesNotMatchItsFilesIsReportedNotLoaded) {
  auto s = OpenStore();
  ASSERT_TRUE(SaveAll(*s, 1, RandomState(OddUnits(), 1)).committed());
  ASSERT_TRUE(SaveAll(*s, 2, RandomState(OddUnits(), 2)).committed());
  ASSERT_TRUE(SaveAll(*s, 3, RandomState(OddUnits(), 3)).committed());
  s.reset();
  // Step 3: a file shorter than the manifest says (found at Open).
  fs::resize_file(dir_ + "/step-00000003/u0001.exp_avg.bin", 8);
  // Step 2: one byte changed, same size (found when its block is read).
  {
    std::fstream f(dir_ + "/step-00000002/u0000.master.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x7f');
  }
  auto s2 = OpenStore();
  auto list = s2->List("");
  EXPECT_EQ(ListedSteps(*s2), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(list.rejected_size(), 1);
  EXPECT_NE(list.rejected(0).find("step-00000003"), std::string::npos) << list.rejected(0);
  EXPECT_NE(list.rejected(0).find("u0001.exp_avg.bin is 8 bytes"), std::string::npos)
      << list.rejected(0);
  // The files have block hashes, so nothing is read before a range is.
  EXPECT_EQ(s2->Get("", std::nullopt)->summary().step(), 2);
  const std::string master = plan_.units[0].name;
  auto got = ReadStatus(*s2, std::nullopt, master, v1::TENSOR_KIND_MASTER, 0, 4);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("u0000.master.bin block 0"), std::string::npos)
      << got.status();
  EXPECT_EQ(ListedSteps(*s2), std::vector<int64_t>{1});
  EXPECT_EQ(s2->List("").rejected_size(), 2);
  EXPECT_EQ(s2->Get("", std::nullopt)->summary().step(), 1);
  // A manifest that does not parse.
  s2.reset();
  std::ofstream(dir_ + "/step-00000001/manifest.json") << "{ not json";
  auto s3 = OpenStore();
  // Step 2's flipped byte is found again only when read (sizes match).
  EXPECT_EQ(ListedSteps(*s3), std::vector<int64_t>{2});
  EXPECT_FALSE(ReadStatus(*s3, 2, master, v1::TENSOR_KIND_MASTER, 0, 4).ok());
  EXPECT_TRUE(ListedSteps(*s3).empty());
  EXPECT_EQ(s3->Get("", std::nullopt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s3->List("").rejected_size(), 3);
}

TEST_F(StoreTest, OpenRepairsACrashMidReplacement) {
  auto s = OpenStore();
  const ModelState st = RandomState(OddUnits(), 4);
  ASSERT_TRUE(SaveAll(*s, 1, st).committed());
  ASSERT_TRUE(SaveAll(*s, 2, st).committed());
  s.reset();
  // Crash after the old step 1 moved aside, before the new one took its name.
  fs::rename(dir_ + "/step-00000001", dir_ + "/.replaced-step-00000001.3.0000abcd");
  fs::create_directories(dir_ + "/.pending-step-00000001.3.0000abcd");
  // Crash after step 2's new copy took its name, before the old was deleted.
  fs::create_directories(dir_ + "/.replaced-step-00000002.3.0000abcd");
  auto s2 = OpenStore();
  EXPECT_EQ(ListedSteps(*s2), (std::vector<int64_t>{1, 2}));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  }
  auto got = Read(*s2, 1, "head", v1::TENSOR_KIND_EXP_AVG, 0, 9);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(got[i], At(st.at("head"), 1, i));
}

TEST_F(StoreTest, RetentionKeepsLastK) {
  auto s = OpenStore(/*keep_last=*/2);
  for (int step = 1; step <= 4; ++step)
    ASSERT_TRUE(SaveAll(*s, step, RandomState(OddUnits(), step)).committed());
  EXPECT_EQ(ListedSteps(*s), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000001"));
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000002"));
  EXPECT_TRUE(fs::exists(dir_ + "/step-00000003/manifest.json"));
  s.reset();  // The retired directories' removal finishes with the store.
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().rfind(".pending-", 0), std::string::npos) << e.path();
  }
}

TEST_F(StoreTest, DiskFullGivesClearErrorAndKeepsPrevious) {
  int64_t budget = 1 << 30;
  auto s = OpenStore(0, [&](int64_t bytes) {
    budget -= bytes;
    return budget < 0 ? ENOSPC : 0;
  });
  ModelState st1 = RandomState(OddUnits(), 1);
  ASSERT_TRUE(SaveAll(*s, 1, st1).committed());
  budget = 500;  // The disk fills during the next upload.
  std::string id = *s->Begin(MakeBegin(plan_, 2, 0));
  absl::Status last;
  for (const auto& c : RankChunks(id, plan_, RandomState(OddUnits(), 2), 0, 7)) {
    last = s->WriteChunk(c);
    if (!last.ok()) break;
  }
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(last.message().find("disk full"), std::string::npos) << last;
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000002"));
  EXPECT_EQ(ListedSteps(*s), std::vector<int64_t>{1});
  auto got = Read(*s, std::nullopt, "block.1", v1::TENSOR_KIND_MASTER, 0, 50);
  for (int64_t e = 0; e < 50; ++e) EXPECT_EQ(got[e], At(st1.at("block.1"), 0, e));
}

TEST_F(StoreTest, BadFieldsAreRefusedByName) {
  auto s = OpenStore();
  auto b = MakeBegin(plan_, 1, 0);
  b.set_rank(4);
  EXPECT_NE(s->Begin(b).status().message().find("rank"), std::string::npos);
  b = MakeBegin(plan_, 1, 0);
  b.set_world_size(3);
  EXPECT_NE(s->Begin(b).status().message().find("world_size"), std::string::npos);
  b = MakeBegin(plan_, 1, 0);
  b.set_job_id("");
  EXPECT_NE(s->Begin(b).status().message().find("job_id"), std::string::npos);
  b = MakeBegin(plan_, 1, 0);
  b.mutable_plan()->mutable_units(0)->set_padded_numel(3);
  EXPECT_EQ(s->Begin(b).status().code(), absl::StatusCode::kInvalidArgument);
  b = MakeBegin(plan_, -1, 0);
  EXPECT_NE(s->Begin(b).status().message().find("step"), std::string::npos);

  std::string id = *s->Begin(MakeBegin(plan_, 1, 0));
  b = MakeBegin(plan_, 1, 1);
  b.set_stage(2);
  EXPECT_EQ(s->Begin(b).status().code(), absl::StatusCode::kFailedPrecondition);
  auto good = RankChunks(id, plan_, RandomState(OddUnits(), 1), 1, 7)[0];
  struct Case {
    std::function<void(v1::ShardChunk&)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](v1::ShardChunk& c) { c.set_rank(9); }, "rank"},
      {[](v1::ShardChunk& c) { c.set_unit("nope"); }, "unit"},
      {[](v1::ShardChunk& c) { c.set_kind(v1::TENSOR_KIND_UNSPECIFIED); }, "kind"},
      {[](v1::ShardChunk& c) { c.set_dtype(v1::DTYPE_BF16); }, "dtype"},
      {[](v1::ShardChunk& c) { c.set_length(3); }, "data"},
      {[](v1::ShardChunk& c) { c.set_length(0); }, "length"},
      {[](v1::ShardChunk& c) { c.set_offset(0); }, "offset"},  // Rank 1's shard starts later.
      {[](v1::ShardChunk& c) { c.set_checkpoint_id("step-00000009.0.0"); }, "checkpoint_id"},
  };
  for (auto& tc : cases) {
    v1::ShardChunk c = good;
    tc.mutate(c);
    absl::Status st = s->WriteChunk(c);
    EXPECT_FALSE(st.ok()) << tc.field;
    EXPECT_NE(st.message().find(tc.field), std::string::npos) << st;
  }
  EXPECT_TRUE(s->WriteChunk(good).ok());
  ASSERT_TRUE(SaveAll(*s, 1, RandomState(OddUnits(), 1)).committed());
  v1::DownloadRangeRequest req;
  req.set_unit("embed");
  req.set_kind(v1::TENSOR_KIND_MASTER);
  req.set_length(plan_.units[0].padded_numel + 1);
  auto sink = [](const v1::RangeChunk&) { return absl::OkStatus(); };
  EXPECT_EQ(s->ReadRange(req, sink).code(), absl::StatusCode::kInvalidArgument);
  req.set_length(1);
  req.set_unit("nope");
  EXPECT_EQ(s->ReadRange(req, sink).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::testing
