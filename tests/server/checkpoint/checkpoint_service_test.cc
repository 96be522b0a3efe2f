// CheckpointService on an in-process gRPC server (port 0) with the worker
// CheckpointClient: concurrent 4-rank save, resharding restore at N = 3 and
// N = 1, async save snapshot semantics, checksum and field errors over the
// wire, and the checkpoint trigger.
#include "server/checkpoint/checkpoint_service.h"

#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/reshard.h"

namespace zeroshard::testing {
namespace {

using checkpoint::CheckpointClient;
using checkpoint::RestoreTarget;
using checkpoint::SaveMetadata;
using checkpoint::UnitShardView;

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::CheckpointStoreOptions o;
    o.dir = MakeTempDir("ckpt_service");
    store_ = *server::CheckpointStore::Open(o);
    service_ = std::make_unique<server::CheckpointServiceImpl>(store_.get());
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    checkpoint::CheckpointClientOptions co;
    co.chunk_bytes = 64;  // Many chunks per shard even for a small model.
    auto c = CheckpointClient::Connect("127.0.0.1:" + std::to_string(port_), co);
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }

  // Rank r's views of `state` under `plan` (its shard of each unit).
  struct RankBuffers {
    std::vector<std::vector<float>> bufs;  // 3 per unit
    std::vector<UnitShardView> views;
  };
  static RankBuffers Shard(const ShardPlan& plan, const ModelState& state, int rank) {
    RankBuffers rb;
    rb.bufs.reserve(plan.units.size() * 3);
    auto ranges = checkpoint::SaveRanges(plan, rank);
    for (size_t u = 0; u < plan.units.size(); ++u) {
      UnitShardView v{plan.units[u].name, ranges[u], nullptr, nullptr, nullptr};
      const float* p[3];
      for (int k = 0; k < 3; ++k) {
        auto& b = rb.bufs.emplace_back(static_cast<size_t>(ranges[u].length));
        for (int64_t i = 0; i < ranges[u].length; ++i)
          b[i] = At(state.at(v.unit), k, ranges[u].offset + i);
        p[k] = b.data();
      }
      v.master = p[0];
      v.exp_avg = p[1];
      v.exp_avg_sq = p[2];
      rb.views.push_back(v);
    }
    return rb;
  }
  static SaveMetadata Meta(const ShardPlan& plan, int64_t step, int rank, int stage) {
    SaveMetadata m;
    m.job_id = "job";
    m.step = step;
    m.rank = rank;
    m.stage = stage;
    m.plan = plan;
    m.model_config_json = "{}";
    m.optimizer_step = step;
    m.data_cursor = 10 * step;
    m.rng_state = "r" + std::to_string(rank);
    return m;
  }
  // Saves `state` from every rank of `plan`, concurrently.
  void SaveAllRanks(const ShardPlan& plan, const ModelState& state, int64_t step, int stage) {
    std::vector<std::thread> threads;
    std::vector<absl::StatusOr<checkpoint::SaveResult>> results(plan.world_size);
    std::vector<RankBuffers> bufs;
    for (int r = 0; r < plan.world_size; ++r) bufs.push_back(Shard(plan, state, r));
    for (int r = 0; r < plan.world_size; ++r) {
      threads.emplace_back([&, r] {
        results[r] = client_->Save(Meta(plan, step, r, stage), bufs[r].views, Soon());
      });
    }
    for (auto& t : threads) t.join();
    int committed = 0;
    for (auto& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      committed += r->committed;
    }
    EXPECT_GE(committed, 1);
  }

  std::unique_ptr<server::CheckpointStore> store_;
  std::unique_ptr<server::CheckpointServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<CheckpointClient> client_;
};

TEST_F(ServiceTest, SaveAtFourRestoreAtThreeAndOne) {
  const ModelState state = RandomState(OddUnits(), 42);
  const ShardPlan saved = *MakeShardPlan(OddUnits(), 4, /*alignment=*/4);
  SaveAllRanks(saved, state, 6, /*stage=*/3);
  auto info = client_->GetInfo("job", std::nullopt, Soon());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->summary().step(), 6);
  EXPECT_EQ(info->trainer().data_cursor(), 60);
  EXPECT_EQ(info->trainer().rng_state(3), "r3");

  struct Target {
    int world;
    int stage;
    int64_t alignment;
  };
  for (Target t : {Target{4, 3, 4}, Target{3, 2, 8}, Target{1, 0, 1}}) {
    const ShardPlan now = *MakeShardPlan(OddUnits(), t.world, t.alignment);
    for (int r = 0; r < t.world; ++r) {
      std::vector<ElementRange> ranges;
      for (const UnitPlan& u : now.units) ranges.push_back(OptimizerRange(u, t.stage, r));
      std::vector<std::vector<float>> dst;
      std::vector<RestoreTarget> targets;
      dst.reserve(now.units.size() * 3);
      for (size_t u = 0; u < now.units.size(); ++u) {
        for (int k = 0; k < 3; ++k) {
          auto& d = dst.emplace_back(static_cast<size_t>(ranges[u].length), -99.f);
          targets.push_back({now.units[u].name, kKinds[k], ranges[u], d.data()});
        }
      }
      ASSERT_TRUE(client_->Restore(*info, now, targets, Soon()).ok());
      for (size_t i = 0; i < targets.size(); ++i) {
        const UnitState& ref = state.at(targets[i].unit);
        const int k = static_cast<int>(i % 3);
        for (int64_t e = 0; e < targets[i].range.length; ++e) {
          ASSERT_EQ(dst[i][e], At(ref, k, targets[i].range.offset + e))
              << "N=" << t.world << " rank " << r << " " << targets[i].unit << " kind " << k
              << " elem " << e;
        }
      }
    }
  }
}

TEST_F(ServiceTest, AsyncSaveUploadsTheSnapshotNotLaterWrites) {
  const ShardPlan plan = *MakeShardPlan(OddUnits(), 1, 1);
  const ModelState state = RandomState(OddUnits(), 5);
  RankBuffers rb = Shard(plan, state, 0);
  auto handle = client_->SaveAsync(Meta(plan, 3, 0, 0), rb.views, Soon());
  for (auto& b : rb.bufs) std::fill(b.begin(), b.end(), 7.f);  // Training goes on.
  auto result = handle->Wait(absl::Seconds(20));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->committed);
  auto info = client_->GetInfo("job", 3, Soon());
  ASSERT_TRUE(info.ok());
  const UnitPlan& u = plan.units[1];
  std::vector<float> got(u.numel);
  ASSERT_TRUE(
      client_->Download("job", 3, u.name, v1::TENSOR_KIND_EXP_AVG, {0, u.numel}, got.data(), Soon())
          .ok());
  for (int64_t e = 0; e < u.numel; ++e) ASSERT_EQ(got[e], At(state.at(u.name), 1, e));
}

TEST_F(ServiceTest, ChecksumAndFieldErrorsOverTheWire) {
  const ShardPlan plan = *MakeShardPlan(OddUnits(), 2, 4);
  auto stub = v1::CheckpointService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  v1::BeginCheckpointResponse began;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->BeginCheckpoint(&ctx, MakeBegin(plan, 9, 0), &began).ok());
  }
  auto chunks = RankChunks(began.checkpoint_id(), plan, RandomState(OddUnits(), 1), 0, 16);
  chunks[1].set_xxhash64(chunks[1].xxhash64() + 1);
  grpc::ClientContext ctx;
  v1::UploadShardResponse resp;
  auto writer = stub->UploadShard(&ctx, &resp);
  for (const auto& c : chunks) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();
  EXPECT_NE(st.error_message().find("xxhash64"), std::string::npos);
  {
    grpc::ClientContext c2;
    v1::CommitCheckpointRequest req;
    req.set_checkpoint_id(began.checkpoint_id());
    v1::CommitCheckpointResponse cr;
    EXPECT_EQ(stub->CommitCheckpoint(&c2, req, &cr).error_code(), grpc::StatusCode::DATA_LOSS);
  }
  {
    grpc::ClientContext c3;
    auto b = MakeBegin(plan, 10, 0);
    b.set_stage(7);
    v1::BeginCheckpointResponse r;
    grpc::Status s = stub->BeginCheckpoint(&c3, b, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("stage"), std::string::npos);
  }
  {
    grpc::ClientContext c4;
    v1::DownloadRangeRequest req;  // Nothing committed, all fields empty.
    auto reader = stub->DownloadRange(&c4, req);
    v1::RangeChunk rc;
    EXPECT_FALSE(reader->Read(&rc));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  auto list = client_->List("", Soon());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->checkpoints_size(), 0);
}

// Rank 0's upload of `state` as generated ShardChunk messages, and its commit.
void UploadAsMessages(v1::CheckpointService::Stub& stub, const ShardPlan& plan,
                      const ModelState& state, int64_t step) {
  v1::BeginCheckpointResponse began;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub.BeginCheckpoint(&ctx, MakeBegin(plan, step, 0), &began).ok());
  grpc::ClientContext up;
  v1::UploadShardResponse resp;
  auto writer = stub.UploadShard(&up, &resp);
  int64_t bytes = 0;
  for (const v1::ShardChunk& c : RankChunks(began.checkpoint_id(), plan, state, 0, 5)) {
    ASSERT_TRUE(writer->Write(c));
    bytes += static_cast<int64_t>(c.data().size());
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.bytes(), bytes);
  grpc::ClientContext done;
  v1::CommitCheckpointRequest commit;
  commit.set_checkpoint_id(began.checkpoint_id());
  commit.set_rank(0);
  v1::CommitCheckpointResponse committed;
  ASSERT_TRUE(stub.CommitCheckpoint(&done, commit, &committed).ok());
}

// Elements [1, numel) of unit/kind read as generated RangeChunk messages of
// 3 elements, each checked against its xxhash64 and offset.
std::vector<float> DownloadAsMessages(v1::CheckpointService::Stub& stub, const UnitPlan& u,
                                      v1::TensorKind kind) {
  grpc::ClientContext ctx;
  v1::DownloadRangeRequest req;
  req.set_job_id("job");
  req.set_unit(u.name);
  req.set_kind(kind);
  req.set_offset(1);
  req.set_length(u.numel - 1);
  req.set_chunk_bytes(12);
  auto reader = stub.DownloadRange(&ctx, req);
  v1::RangeChunk rc;
  std::vector<float> got;
  while (reader->Read(&rc)) {
    EXPECT_EQ(rc.offset(), 1 + static_cast<int64_t>(got.size()));
    EXPECT_EQ(rc.data().size(), static_cast<size_t>(rc.length()) * 4);
    EXPECT_EQ(rc.xxhash64(), XXH64(rc.data().data(), rc.data().size(), 0));
    const size_t at = got.size();
    got.resize(at + rc.data().size() / 4);
    std::memcpy(got.data() + at, rc.data().data(), (rc.data().size() / 4) * 4);
  }
  EXPECT_TRUE(reader->Finish().ok());
  return got;
}

// The server moves chunk frames (server/checkpoint/framed_checkpoint_service.h),
// the worker's client too; a client on the generated messages (the stub
// here, grpcio elsewhere) must not notice: rank 0 uploads ShardChunk
// messages, rank 1 uploads through CheckpointClient, and both read back as
// RangeChunk messages (odd chunk sizes) and through the client.
TEST_F(ServiceTest, GeneratedMessagesAndChunkFramesInteroperate) {
  const ShardPlan plan = *MakeShardPlan(OddUnits(), 2, 4);
  const ModelState state = RandomState(OddUnits(), 23);
  auto stub = v1::CheckpointService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  UploadAsMessages(*stub, plan, state, 4);
  RankBuffers rank1 = Shard(plan, state, 1);
  SaveMetadata meta = Meta(plan, 4, 1, 3);
  meta.model_config_json = R"({"d_model":8})";  // As MakeBegin has it.
  meta.data_cursor = 4 * 16;
  auto saved = client_->Save(meta, rank1.views, Soon());
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->committed);
  for (const UnitPlan& u : plan.units) {
    for (int k = 0; k < 3; ++k) {
      const std::vector<float> got = DownloadAsMessages(*stub, u, kKinds[k]);
      std::vector<float> framed(static_cast<size_t>(u.numel - 1));
      ASSERT_TRUE(
          client_->Download("job", 4, u.name, kKinds[k], {1, u.numel - 1}, framed.data(), Soon())
              .ok());
      ASSERT_EQ(got.size(), framed.size());
      for (int64_t e = 1; e < u.numel; ++e) {
        ASSERT_EQ(got[e - 1], At(state.at(u.name), k, e))
            << u.name << " kind " << k << " elem " << e;
        ASSERT_EQ(framed[e - 1], got[e - 1]);
      }
    }
  }
}

TEST_F(ServiceTest, CheckpointTriggerCounts) {
  EXPECT_EQ(*client_->GetCheckpointTrigger(Soon()), 0);
  EXPECT_EQ(*client_->RequestCheckpoint(Soon()), 1);
  EXPECT_EQ(*client_->RequestCheckpoint(Soon()), 2);
  EXPECT_EQ(*client_->GetCheckpointTrigger(Soon()), 2);
}

// The disk fills in the middle of an async save: the upload fails with the
// store's error while its streams may still have chunks queued, and the
// handle (which frees its snapshot) goes at once. The data slices borrow
// the snapshot, so the save must not end before gRPC has let go of them
// (run under scripts/test.sh asan, a read after free shows here).
TEST(CheckpointClientTest, AFailedUploadEndsWithTheServersErrorAndReleasesItsData) {
  server::CheckpointStoreOptions o;
  o.dir = MakeTempDir("ckpt_full");
  std::atomic<int64_t> budget{3000};
  o.write_fault = [&](int64_t bytes) { return (budget -= bytes) < 0 ? ENOSPC : 0; };
  auto store = *server::CheckpointStore::Open(o);
  server::CheckpointServiceImpl service(store.get());
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  checkpoint::CheckpointClientOptions co;
  co.chunk_bytes = 64;
  auto client = *CheckpointClient::Connect("127.0.0.1:" + std::to_string(port), co);
  const ShardPlan plan = *MakeShardPlan(OddUnits(), 1, 1);
  const ModelState state = RandomState(OddUnits(), 4);
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<std::vector<float>> bufs;
    std::vector<UnitShardView> views;
    bufs.reserve(plan.units.size() * 3);
    for (const UnitPlan& u : plan.units) {
      const float* p[3];
      for (int k = 0; k < 3; ++k) {
        auto& v = bufs.emplace_back(static_cast<size_t>(u.padded_numel));
        for (int64_t e = 0; e < u.padded_numel; ++e) v[e] = At(state.at(u.name), k, e);
        p[k] = v.data();
      }
      views.push_back({u.name, {0, u.padded_numel}, p[0], p[1], p[2]});
    }
    SaveMetadata meta;
    meta.job_id = "job";
    meta.step = 1 + attempt;
    meta.plan = plan;
    meta.model_config_json = "{}";
    auto handle = client->SaveAsync(meta, views, Soon());
    auto result = handle->Wait(absl::Seconds(20));
    EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
    handle.reset();  // Frees the snapshot the slices borrowed.
  }
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
}

TEST(CheckpointClientTest, ConnectRefusesStreamsOutsideOneToSixtyFour) {
  for (int streams : {0, -1, 65}) {
    checkpoint::CheckpointClientOptions co;
    co.streams = streams;
    auto c = CheckpointClient::Connect("127.0.0.1:1", co);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << streams;
  }
  checkpoint::CheckpointClientOptions co;
  co.streams = 64;
  EXPECT_TRUE(CheckpointClient::Connect("127.0.0.1:1", co).ok());  // Connects lazily.
}

}  // namespace
}  // namespace zeroshard::testing
