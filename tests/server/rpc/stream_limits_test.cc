// Per-caller limits on open streams (issue 16): StreamLimits on its own,
// then over gRPC against an in-process coordinator stack whose limit is 2.
// WatchGeneration and the checkpoint streams share the caller's count; a
// stream past it is RESOURCE_EXHAUSTED naming the limit, and a cancelled
// stream frees its slot. A verified member has its own quota; all callers
// together a total.
#include "common/rpc/stream_limits.h"

#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_security.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_stack.h"
#include "tests/support/subprocess.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {
namespace {

TEST(StreamLimitsTest, CountsPerHostAndFreesOnRelease) {
  StreamLimits limits(2);
  auto a = limits.Open("ipv4:10.0.0.1:5000", "X");
  auto b = limits.Open("ipv4:10.0.0.1:5001", "X");  // Another port, the same caller.
  ASSERT_TRUE(a.ok() && b.ok());
  absl::Status full = limits.Open("ipv4:10.0.0.1:5002", "WatchGeneration").status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("WatchGeneration"), std::string::npos) << full;
  EXPECT_NE(full.message().find("per-caller limit is 2"), std::string::npos) << full;
  EXPECT_TRUE(limits.Open("ipv6:[::1]:5000", "X").ok());  // Another caller (released at once).
  EXPECT_EQ(limits.open_by("ipv4:10.0.0.1:1"), 2);
  { auto gone = std::move(a); }
  EXPECT_EQ(limits.open_by("ipv4:10.0.0.1:1"), 1);
  EXPECT_TRUE(limits.Open("ipv4:10.0.0.1:5003", "X").ok());
}

// A verified member's streams count against it, not its host, so a host's
// other callers cannot use up its quota; all callers together stop at the
// total (issue 40).
TEST(StreamLimitsTest, MembersHaveTheirOwnQuotaAndAllCallersATotal) {
  StreamLimits limits(2, 5);
  const std::string host = "ipv4:10.0.0.1:5000";
  auto a = limits.Open(host, "WatchGeneration");
  auto b = limits.Open(host, "WatchGeneration");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(limits.Open(host, "UploadShard").ok()) << "the host's quota is spent";
  auto m = limits.Open(host, "UploadShard", /*member_id=*/7);
  ASSERT_TRUE(m.ok()) << m.status();
  auto n = limits.Open(host, "UploadShard", 7);
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(limits.Open(host, "UploadShard", 7).ok()) << "the member's own quota is 2 too";
  auto other = limits.Open("ipv4:10.0.0.2:1", "X");
  ASSERT_TRUE(other.ok()) << "5 open in all";
  const absl::Status total = limits.Open("ipv4:10.0.0.3:1", "DownloadRange").status();
  EXPECT_EQ(total.code(), absl::StatusCode::kResourceExhausted) << total;
  EXPECT_NE(total.message().find("--max-streams)"), std::string::npos) << total;
  { auto gone = std::move(other); }
  EXPECT_TRUE(limits.Open("ipv4:10.0.0.3:1", "DownloadRange").ok());
}

// AwaitOpenBy wakes on a release made by another thread, and gives up
// after its timeout on a count that never comes.
TEST(StreamLimitsTest, AwaitOpenByWakesOnARelease) {
  StreamLimits limits(2);
  auto slot = std::make_unique<absl::StatusOr<StreamLimits::Slot>>(
      limits.Open("ipv4:10.0.0.1:7", "WatchGeneration"));
  ASSERT_TRUE(slot->ok());
  std::thread release([&] { slot.reset(); });
  EXPECT_TRUE(limits.AwaitOpenBy("ipv4:10.0.0.1:9", 0, absl::Seconds(20)));
  release.join();
  EXPECT_FALSE(limits.AwaitOpenBy("ipv4:10.0.0.1:9", 1, absl::Milliseconds(50)));
}

class StreamLimitsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("zs_streams");
    CoordinatorOptions o;
    o.metrics_listen = "";
    o.checkpoint_dir = dir_ + "/ckpt";
    o.core.job_id = "streams";
    o.core.min_workers = 1;
    o.core.settle = absl::Milliseconds(10);
    o.core.lease_timeout = absl::Seconds(30);
    o.max_streams_per_caller = 2;
    auto s = StartCoordinatorStack(o, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    stack_.emplace(*std::move(s));
    auto channel =
        grpc::CreateChannel(stack_->server->address(), grpc::InsecureChannelCredentials());
    coord_ = v1::Coordinator::NewStub(channel);
    ckpt_ = v1::CheckpointService::NewStub(channel);
    grpc::ClientContext ctx;
    v1::JoinRequest j;
    j.set_job_id("streams");
    j.set_worker_id("w");
    v1::JoinResponse joined;
    ASSERT_TRUE(coord_->Join(&ctx, j, &joined).ok());
    // Uploads need a member's credential (server/rpc/auth_gate.h).
    credential_ = absl::StrCat(joined.member_id(), ":", joined.member_secret());
    watch_.set_job_id("streams");
    watch_.set_member_id(joined.member_id());
  }
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::GenerationInfo>> reader;
  };
  // Opens a WatchGeneration; true once its first message arrived (it is open
  // on the server and holds a slot).
  bool OpenWatch(Watch* w) {
    w->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    w->reader = coord_->WatchGeneration(&w->ctx, watch_);
    v1::GenerationInfo info;
    return w->reader->Read(&info);
  }
  std::string dir_;
  std::optional<CoordinatorStack> stack_;
  std::unique_ptr<v1::Coordinator::Stub> coord_;
  std::unique_ptr<v1::CheckpointService::Stub> ckpt_;
  v1::GetGenerationRequest watch_;
  std::string credential_;  // "<member_id>:<secret>" of the joined member.
};

TEST_F(StreamLimitsRpcTest, StreamsPastTheLimitAreRefusedAndCancelFreesTheSlot) {
  Watch first, second, third;
  ASSERT_TRUE(OpenWatch(&first));
  ASSERT_TRUE(OpenWatch(&second));
  EXPECT_FALSE(OpenWatch(&third));
  grpc::Status refused = third.reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("per-caller limit is 2"), std::string::npos)
      << refused.error_message();

  // A member's upload counts against the member, not the host whose quota
  // the watches spent (issue 40); the download counts against the host.
  grpc::ClientContext up_ctx;
  up_ctx.AddMetadata(kMemberHeader, credential_);
  v1::UploadShardResponse up;
  auto writer = ckpt_->UploadShard(&up_ctx, &up);
  writer->WritesDone();
  EXPECT_NE(writer->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext down_ctx;
  v1::DownloadRangeRequest down;
  down.set_job_id("streams");
  auto range = ckpt_->DownloadRange(&down_ctx, down);
  v1::RangeChunk chunk;
  EXPECT_FALSE(range->Read(&chunk));
  EXPECT_EQ(range->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  first.ctx.TryCancel();
  EXPECT_EQ(first.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server releases the cancelled stream's slot once it notices the
  // cancel (within WatchGeneration's poll, 0.5 s); then a watch opens again.
  ASSERT_TRUE(stack_->server->options().stream_limits->AwaitOpenBy("ipv4:127.0.0.1:0", 1,
                                                                   absl::Seconds(10)));
  Watch again;
  EXPECT_TRUE(OpenWatch(&again));
  again.ctx.TryCancel();
  again.reader->Finish();
  second.ctx.TryCancel();
  second.reader->Finish();
  stack_->server->Shutdown();
}

}  // namespace
}  // namespace zeroshard
