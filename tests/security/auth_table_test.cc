// Every RPC of the coordinator's services against an in-process
// coordinator with a token file: no token and a wrong token get
// UNAUTHENTICATED, a reader token PERMISSION_DENIED on worker and admin
// RPCs (naming the role) and anything else on reader RPCs. The expected
// role of each RPC is written here, independently of auth_policy.cc, and
// the table must cover every method of the services' descriptors.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "google/protobuf/descriptor.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_stack.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {
namespace {

constexpr char kReader[] = "reader-token-0123456789";
constexpr char kWorker[] = "worker-token-0123456789";

using Call = std::function<grpc::Status(grpc::ClientContext*)>;

// A HeartbeatStream with one default request; its final status.
grpc::Status OneStreamedHeartbeat(v1::Coordinator::Stub* s, grpc::ClientContext* ctx) {
  auto stream = s->HeartbeatStream(ctx);
  v1::HeartbeatRequest req;
  v1::HeartbeatResponse resp;
  if (stream->Write(req)) stream->Read(&resp);
  stream->WritesDone();
  return stream->Finish();
}

class AuthTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("zs_auth_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokens")
        << "# role token\nreader " << kReader << "\nworker " << kWorker << "\n";
    std::filesystem::permissions(
        dir_ / "tokens", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    CoordinatorOptions o;
    o.core.job_id = "auth";
    o.metrics_listen = "";
    o.core.settle = absl::Milliseconds(10);
    o.checkpoint_dir = (dir_ / "ckpt").string();
    o.security.token_file = (dir_ / "tokens").string();
    auto stack = StartCoordinatorStack(o, 0);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::move(*stack);
    auto channel =
        grpc::CreateChannel(stack_.server->address(), grpc::InsecureChannelCredentials());
    coord_ = v1::Coordinator::NewStub(channel);
    ckpt_ = v1::CheckpointService::NewStub(channel);
  }
  void TearDown() override {
    stack_.server.reset();
    std::filesystem::remove_all(dir_);
  }

  // One call per RPC, each with a default (mostly empty) request.
  std::map<std::string, Call> Calls() {
    std::map<std::string, Call> c;
    auto* s = coord_.get();
    auto* k = ckpt_.get();
#define ZS_UNARY(stub, svc, rpc, Req, Resp)             \
  c[#svc "/" #rpc] = [stub](grpc::ClientContext* ctx) { \
    Req req;                                            \
    Resp resp;                                          \
    return stub->rpc(ctx, req, &resp);                  \
  }
    ZS_UNARY(s, Coordinator, Join, v1::JoinRequest, v1::JoinResponse);
    ZS_UNARY(s, Coordinator, Heartbeat, v1::HeartbeatRequest, v1::HeartbeatResponse);
    ZS_UNARY(s, Coordinator, Leave, v1::LeaveRequest, v1::LeaveResponse);
    ZS_UNARY(s, Coordinator, ReportFailure, v1::ReportFailureRequest, v1::ReportFailureResponse);
    ZS_UNARY(s, Coordinator, ReportHandoff, v1::ReportHandoffRequest, v1::ReportHandoffResponse);
    ZS_UNARY(s, Coordinator, GetGeneration, v1::GetGenerationRequest, v1::GenerationInfo);
    ZS_UNARY(s, Coordinator, KvSet, v1::KvSetRequest, v1::KvSetResponse);
    ZS_UNARY(s, Coordinator, KvGet, v1::KvGetRequest, v1::KvGetResponse);
    ZS_UNARY(s, Coordinator, KvWait, v1::KvWaitRequest, v1::KvWaitResponse);
    ZS_UNARY(s, Coordinator, KvAdd, v1::KvAddRequest, v1::KvAddResponse);
    ZS_UNARY(s, Coordinator, ReportStep, v1::StepReport, v1::ReportStepResponse);
    ZS_UNARY(s, Coordinator, GetJobStatus, v1::GetJobStatusRequest, v1::JobStatus);
    ZS_UNARY(s, Coordinator, StopJob, v1::StopJobRequest, v1::StopJobResponse);
    ZS_UNARY(k, CheckpointService, BeginCheckpoint, v1::BeginCheckpointRequest,
             v1::BeginCheckpointResponse);
    ZS_UNARY(k, CheckpointService, CommitCheckpoint, v1::CommitCheckpointRequest,
             v1::CommitCheckpointResponse);
    ZS_UNARY(k, CheckpointService, AbortCheckpoint, v1::AbortCheckpointRequest,
             v1::AbortCheckpointResponse);
    ZS_UNARY(k, CheckpointService, ListCheckpoints, v1::ListCheckpointsRequest,
             v1::ListCheckpointsResponse);
    ZS_UNARY(k, CheckpointService, GetCheckpoint, v1::GetCheckpointRequest, v1::CheckpointInfo);
    ZS_UNARY(k, CheckpointService, RequestCheckpoint, v1::RequestCheckpointRequest,
             v1::RequestCheckpointResponse);
    ZS_UNARY(k, CheckpointService, GetCheckpointTrigger, v1::GetCheckpointTriggerRequest,
             v1::GetCheckpointTriggerResponse);
#undef ZS_UNARY
    AddStreamingCalls(c);
    return c;
  }

  // The streaming RPCs: each opened, driven to its end or deadline, closed.
  void AddStreamingCalls(std::map<std::string, Call>& c) {
    auto* s = coord_.get();
    auto* k = ckpt_.get();
    c["Coordinator/WatchGeneration"] = [s](grpc::ClientContext* ctx) {
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
      v1::GetGenerationRequest req;
      auto reader = s->WatchGeneration(ctx, req);
      v1::GenerationInfo info;
      while (reader->Read(&info)) {
      }
      return reader->Finish();
    };
    c["Coordinator/HeartbeatStream"] = [s](grpc::ClientContext* ctx) {
      return OneStreamedHeartbeat(s, ctx);
    };
    c["CheckpointService/UploadShard"] = [k](grpc::ClientContext* ctx) {
      v1::UploadShardResponse resp;
      auto writer = k->UploadShard(ctx, &resp);
      writer->WritesDone();
      return writer->Finish();
    };
    c["CheckpointService/DownloadRange"] = [k](grpc::ClientContext* ctx) {
      v1::DownloadRangeRequest req;
      auto reader = k->DownloadRange(ctx, req);
      v1::RangeChunk chunk;
      while (reader->Read(&chunk)) {
      }
      return reader->Finish();
    };
  }

  std::filesystem::path dir_;
  CoordinatorStack stack_;
  std::unique_ptr<v1::Coordinator::Stub> coord_;
  std::unique_ptr<v1::CheckpointService::Stub> ckpt_;
};

grpc::Status RunWith(const Call& call, const char* token) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (token != nullptr) ctx.AddMetadata("authorization", std::string("Bearer ") + token);
  return call(&ctx);
}

TEST_F(AuthTableTest, EveryRpcChecksTokenAndRole) {
  // The role each RPC needs (issue 16): reader = status, list, download.
  const std::map<std::string, std::string> reader_rpcs = {{"Coordinator/GetJobStatus", ""},
                                                          {"CheckpointService/ListCheckpoints", ""},
                                                          {"CheckpointService/GetCheckpoint", ""},
                                                          {"CheckpointService/DownloadRange", ""}};
  // Admin = operator actions that change the job.
  const std::set<std::string> admin_rpcs = {"CheckpointService/RequestCheckpoint",
                                            "Coordinator/StopJob"};
  std::map<std::string, Call> calls = Calls();
  int methods = 0;
  for (const char* service : {"zeroshard.v1.Coordinator", "zeroshard.v1.CheckpointService"}) {
    const auto* d = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    ASSERT_NE(d, nullptr);
    for (int i = 0; i < d->method_count(); ++i) {
      const std::string name = d->name() + "/" + d->method(i)->name();
      ++methods;
      ASSERT_TRUE(calls.count(name)) << "no table row for " << name;
      const Call& call = calls[name];
      grpc::Status none = RunWith(call, nullptr);
      EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
      EXPECT_NE(none.error_message().find("missing bearer token"), std::string::npos) << name;
      grpc::Status wrong = RunWith(call, "not-a-token-0123456789");
      EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
      grpc::Status reader = RunWith(call, kReader);
      if (reader_rpcs.count(name)) {
        EXPECT_NE(reader.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
        EXPECT_NE(reader.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
      } else {
        EXPECT_EQ(reader.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
        const std::string needed = admin_rpcs.count(name) ? "admin" : "worker";
        EXPECT_NE(reader.error_message().find("needs role " + needed), std::string::npos)
            << name << ": " << reader.error_message();
      }
      if (admin_rpcs.count(name)) {
        grpc::Status worker = RunWith(call, kWorker);
        EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
      }
    }
  }
  EXPECT_EQ(methods, static_cast<int>(calls.size()));
  // A worker token without a member credential may not act as a member.
  grpc::Status kv = RunWith(calls["Coordinator/KvSet"], kWorker);
  EXPECT_EQ(kv.error_code(), grpc::StatusCode::PERMISSION_DENIED) << kv.error_message();
}

}  // namespace
}  // namespace zeroshard
