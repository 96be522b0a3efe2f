// Test helper: uploads one rank's shard of the test model (checkpoint_test_util.h,
// seeded state) to a CheckpointService slowly, printing "sent N" after each
// chunk, then commits, so a test can kill it (-9) midway through its upload.
// Against a coordinator (job "job") it first joins with the test model's
// units, since a Begin must match the job's model (issue 16); a bare
// CheckpointService answers that Join UNIMPLEMENTED and is used as it is.
// A joined tool uploads on its client's channel, which carries the member
// credential uploads need (server/rpc/auth_policy.cc), as a worker does.
// Usage: checkpoint_upload_tool HOST:PORT STEP RANK WORLD SEED DELAY_MS
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/rpc/coordinator_client.h"
#include "common/rpc/plan_proto.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace {

// A client of `target`, joined to job "job" as worker "upload-RANK" with
// the test model's units (a bare CheckpointService's UNIMPLEMENTED is
// accepted). Null after printing why.
std::unique_ptr<zeroshard::CoordinatorClient> Connect(const char* target, int rank) {
  auto client = zeroshard::CoordinatorClient::Connect(target);
  if (!client.ok()) return nullptr;
  zeroshard::v1::JoinRequest j;
  j.set_job_id("job");
  j.set_worker_id("upload-" + std::to_string(rank));
  zeroshard::UnitSpecsToProto(zeroshard::testing::OddUnits(), j.mutable_units());
  auto joined = (*client)->Join(j);
  if (!joined.ok() && joined.status().code() != absl::StatusCode::kUnimplemented) {
    std::fprintf(stderr, "Join: %s\n", joined.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(client);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zeroshard;
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s HOST:PORT STEP RANK WORLD SEED DELAY_MS\n", argv[0]);
    return 2;
  }
  const int64_t step = std::atoll(argv[2]);
  const int rank = std::atoi(argv[3]);
  const int world = std::atoi(argv[4]);
  const uint32_t seed = static_cast<uint32_t>(std::atoi(argv[5]));
  const int delay_ms = std::atoi(argv[6]);
  auto plan = MakeShardPlan(testing::OddUnits(), world, 4);
  if (!plan.ok()) return 2;
  auto client = Connect(argv[1], rank);
  if (client == nullptr) return 1;
  auto stub = v1::CheckpointService::NewStub(client->channel());
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(60);
  v1::BeginCheckpointResponse began;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::Status st = stub->BeginCheckpoint(&ctx, testing::MakeBegin(*plan, step, rank), &began);
    if (!st.ok()) {
      std::fprintf(stderr, "BeginCheckpoint: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  v1::UploadShardResponse resp;
  auto writer = stub->UploadShard(&ctx, &resp);
  const auto chunks = testing::RankChunks(began.checkpoint_id(), *plan,
                                          testing::RandomState(testing::OddUnits(), seed), rank, 8);
  int sent = 0;
  for (const auto& c : chunks) {
    // Flushed to the server before "sent" is printed, so the test knows data landed.
    if (!writer->Write(c, grpc::WriteOptions().clear_buffer_hint())) break;
    std::printf("sent %d\n", ++sent);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  std::printf("finished: %s\n", st.ok() ? "ok" : st.error_message().c_str());
  if (!st.ok()) return 1;
  grpc::ClientContext commit_ctx;
  commit_ctx.set_deadline(deadline);
  v1::CommitCheckpointRequest commit;
  commit.set_checkpoint_id(began.checkpoint_id());
  commit.set_rank(rank);
  v1::CommitCheckpointResponse committed;
  st = stub->CommitCheckpoint(&commit_ctx, commit, &committed);
  std::printf("commit: %s committed=%d\n", st.ok() ? "ok" : st.error_message().c_str(),
              committed.committed());
  return st.ok() ? 0 : 1;
}
