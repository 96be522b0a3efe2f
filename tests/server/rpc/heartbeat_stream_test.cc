// HeartbeatStream (coordinator.proto) against an in-process coordinator:
// each streamed heartbeat is answered as the unary Heartbeat answers it and
// renews the lease; a refused request ends the stream with the unary call's
// status and the next Beat opens a new one; a stream's metadata must prove
// every member it heartbeats for; malformed bytes are INVALID_ARGUMENT; the
// per-caller stream limit sends the worker back to unary heartbeats;
// shutting the server down with streams open is bounded; the open streams
// are a gauge in /metrics. (Coordinators that never answer a stream or lack
// the method: heartbeat_stream_fallback_test.cc.)
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/heartbeat_stream_client.h"
#include "common/rpc/rpc_security.h"
#include "common/rpc/stream_limits.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {
namespace {

constexpr char kJob[] = "beats";
constexpr char kLocalCaller[] = "ipv4:127.0.0.1:1";  // Any port: limits count hosts.

struct Member {
  std::unique_ptr<CoordinatorClient> client;
  uint64_t id = 0;
  std::string secret;
  v1::HeartbeatRequest Beat(uint64_t generation = 0) const {
    v1::HeartbeatRequest r;
    r.set_job_id(kJob);
    r.set_member_id(id);
    r.set_generation(generation);
    return r;
  }
};

class HeartbeatStreamTest : public ::testing::Test {
 protected:
  void Start(int max_streams = 64, absl::Duration lease = absl::Seconds(30),
             const std::string& listen = "127.0.0.1:0") {
    limits_ = std::make_unique<StreamLimits>(max_streams);
    CoordinatorOptions o;
    o.metrics_listen = "";
    o.core.job_id = kJob;
    o.core.min_workers = 1;
    o.core.settle = absl::Milliseconds(10);
    o.core.heartbeat_interval = std::min(absl::Milliseconds(100), lease / 4);
    o.core.lease_timeout = lease;
    o.stream_limits = limits_.get();
    o.listen = listen;
    o.core.job_config_json = R"({"steps": 1})";
    o.clock = &clock_;
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  Member Join(const std::string& worker_id, absl::Duration timeout = absl::Seconds(5)) {
    Member m;
    CoordinatorClient::Options options;
    options.timeout = timeout;
    auto c = CoordinatorClient::Connect(server_->address(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    m.client = *std::move(c);
    v1::JoinRequest j;
    j.set_job_id(kJob);
    j.set_worker_id(worker_id);
    auto joined = m.client->Join(j);
    EXPECT_TRUE(joined.ok()) << joined.status();
    if (joined.ok()) {
      m.id = joined->member_id();
      m.secret = joined->member_secret();
    }
    return m;
  }

  // The stream slots this host holds, once the server's queue threads
  // settled (a finished stream frees its slot on their time).
  int OpenSoon(int want) {
    limits_->AwaitOpenBy(kLocalCaller, want, absl::Seconds(2));
    return limits_->open_by(kLocalCaller);
  }

  // Advances the core's clock and applies it (the ticker thread ticks too).
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    server_->core()->Tick();
  }

  FakeClock clock_;  // Leases and settle run on it: no test sleeps for them.
  std::unique_ptr<StreamLimits> limits_;
  std::unique_ptr<CoordinatorServer> server_;
};

void ExpectSameAnswer(const v1::HeartbeatResponse& streamed, const v1::HeartbeatResponse& unary) {
  EXPECT_EQ(streamed.generation(), unary.generation());
  EXPECT_EQ(streamed.in_generation(), unary.in_generation());
  EXPECT_EQ(streamed.rank(), unary.rank());
  EXPECT_EQ(streamed.world_size(), unary.world_size());
  EXPECT_EQ(streamed.state(), unary.state());
  EXPECT_EQ(streamed.job_state(), unary.job_state());
  EXPECT_EQ(streamed.change_pending(), unary.change_pending());
}

TEST_F(HeartbeatStreamTest, AnswersAsUnaryRenewsTheLeaseOnOneStream) {
  const absl::Duration lease = absl::Milliseconds(800);
  Start(64, lease);
  Member m = Join("w0");
  HeartbeatStreamClient beats(m.client.get());
  // Two leases' worth of streamed heartbeats only: the member stays live.
  int n = 0;
  for (absl::Duration t; t < 2 * lease; t += absl::Milliseconds(100)) {
    auto streamed = beats.Beat(m.Beat());
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    ++n;
    EXPECT_EQ(limits_->open_by(kLocalCaller), 1) << "one stream carries every beat";
    EXPECT_TRUE(server_->core()->IsLiveMember(m.id));
    Advance(absl::Milliseconds(100));
  }
  EXPECT_EQ(beats.streamed(), n);
  EXPECT_NE(server_->metrics()->Render().find("zeroshard_heartbeat_streams 1\n"), std::string::npos)
      << server_->metrics()->Render();
  // Once a generation formed, the streamed answer names it as unary does.
  auto streamed = beats.Beat(m.Beat());
  auto unary = m.client->Heartbeat(m.Beat());
  ASSERT_TRUE(streamed.ok() && unary.ok()) << streamed.status() << " " << unary.status();
  EXPECT_GE(streamed->generation(), 1u);
  ExpectSameAnswer(*streamed, *unary);
  // Silence past the lease: the member is gone, and the stream says so.
  Advance(lease + absl::Milliseconds(400));
  EXPECT_FALSE(server_->core()->IsLiveMember(m.id));
  auto lost = beats.Beat(m.Beat());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kNotFound) << lost.status();
  EXPECT_NE(lost.status().message().find("HeartbeatStream"), std::string::npos) << lost.status();
}

TEST_F(HeartbeatStreamTest, RefusedRequestEndsTheStreamAndTheNextBeatReopens) {
  Start();
  Member m = Join("w0");
  HeartbeatStreamClient beats(m.client.get());
  ASSERT_TRUE(beats.Beat(m.Beat()).ok());
  auto ahead = beats.Beat(m.Beat(/*generation=*/999));
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kInvalidArgument) << ahead.status();
  EXPECT_NE(ahead.status().message().find("ahead of the current generation"), std::string::npos)
      << ahead.status();
  v1::HeartbeatRequest wrong_job = m.Beat();
  wrong_job.set_job_id("other");
  EXPECT_FALSE(beats.Beat(wrong_job).ok());
  auto again = beats.Beat(m.Beat());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(beats.streamed(), 2);
  EXPECT_EQ(OpenSoon(1), 1);
}

// A reply longer than the ones before it on the same stream: the job's
// end, with its reason (the server's reply buffer is reused).
TEST_F(HeartbeatStreamTest, LongerReplyLaterOnTheSameStream) {
  Start();
  Member m = Join("w0");
  HeartbeatStreamClient beats(m.client.get());
  absl::StatusOr<v1::HeartbeatResponse> r;
  int n = 0;
  for (int i = 0; i < 300; ++i) {  // Until the generation of one runs.
    r = beats.Beat(m.Beat());
    ++n;
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->state() == v1::GenerationInfo::STATE_RUNNING) break;
    Advance(absl::Milliseconds(10));
  }
  ASSERT_EQ(r->state(), v1::GenerationInfo::STATE_RUNNING);
  v1::StepReport step;
  step.set_job_id(kJob);
  step.set_member_id(m.id);
  step.set_generation(r->generation());
  step.set_step(1);  // The job config's last step: the job completes.
  step.set_loss(2.5);
  ASSERT_TRUE(m.client->ReportStep(step).ok());
  auto done = beats.Beat(m.Beat(r->generation()));
  ++n;
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->job_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_FALSE(done->job_state_reason().empty());
  EXPECT_GT(done->ByteSizeLong(), r->ByteSizeLong());
  ASSERT_TRUE(beats.Beat(m.Beat(r->generation())).ok());
  EXPECT_EQ(beats.streamed(), n + 1);
  EXPECT_EQ(OpenSoon(1), 1) << "one stream carried them all";
}

// The coordinator restarts on the same port (its members are gone): the
// worker's first heartbeat after it, on the broken stream, still gets the
// new coordinator's NOT_FOUND, so the worker rejoins at once.
TEST_F(HeartbeatStreamTest, RestartedCoordinatorSaysNotFoundOnTheFirstBeat) {
  Start();
  Member m = Join("w0");
  HeartbeatStreamClient beats(m.client.get());
  ASSERT_TRUE(beats.Beat(m.Beat()).ok());
  const int port = server_->port();
  server_->Shutdown();
  server_.reset();
  Start(64, absl::Seconds(30), absl::StrCat("127.0.0.1:", port));
  auto r = beats.Beat(m.Beat());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

// A raw stream on `m`'s channel (its credential in the metadata): writes
// one request for each id and returns the stream's final status.
grpc::Status RawStream(v1::Coordinator::Stub* stub, const std::vector<uint64_t>& ids,
                       int* answered) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->HeartbeatStream(&ctx);
  *answered = 0;
  for (uint64_t id : ids) {
    v1::HeartbeatRequest r;
    r.set_job_id(kJob);
    r.set_member_id(id);
    v1::HeartbeatResponse reply;
    if (!stream->Write(r) || !stream->Read(&reply)) break;
    ++*answered;
  }
  stream->WritesDone();
  return stream->Finish();
}

TEST_F(HeartbeatStreamTest, EveryMemberNamedMustBeProvenByTheStream) {
  Start();
  Member a = Join("a");
  Member b = Join("b");
  auto stub = v1::Coordinator::NewStub(a.client->channel());
  int answered = 0;
  grpc::Status s = RawStream(stub.get(), {a.id, a.id}, &answered);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answered, 2);
  s = RawStream(stub.get(), {a.id, b.id, a.id}, &answered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find(absl::StrCat("member ", b.id)), std::string::npos)
      << s.error_message();
  EXPECT_EQ(answered, 1);
  // A channel with no credential at all.
  auto bare = v1::Coordinator::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  s = RawStream(bare.get(), {a.id}, &answered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(answered, 0);
}

TEST_F(HeartbeatStreamTest, StreamLimitSendsTheWorkerToUnaryHeartbeats) {
  Start(/*max_streams=*/1);
  Member a = Join("a");
  Member b = Join("b");
  HeartbeatStreamClient first(a.client.get()), second(b.client.get());
  ASSERT_TRUE(first.Beat(a.Beat()).ok());
  EXPECT_EQ(first.streamed(), 1);
  for (int i = 0; i < 3; ++i) {
    auto r = second.Beat(b.Beat());
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(second.streamed(), 0);
  EXPECT_EQ(limits_->open_by(kLocalCaller), 1);
}

// Bytes that are no HeartbeatRequest, sent through the generic stub (the
// generated one cannot): INVALID_ARGUMENT, not a quiet end of the stream.
TEST_F(HeartbeatStreamTest, MalformedRequestIsInvalidArgument) {
  Start();
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(&ctx, "/zeroshard.v1.Coordinator/HeartbeatStream", &queue);
  const auto step = [&queue](auto issue) {
    int tag = 0;
    issue(&tag);
    void* got = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&got, &ok));
    EXPECT_EQ(got, &tag);
  };
  step([&](void* t) { call->StartCall(t); });
  grpc::Slice bytes(std::string("\xff\xff\xff"));
  grpc::ByteBuffer message(&bytes, 1);
  step([&](void* t) { call->Write(message, t); });
  step([&](void* t) { call->WritesDone(t); });
  grpc::Status status;
  step([&](void* t) { call->Finish(&status, t); });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("not a valid HeartbeatRequest"), std::string::npos);
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
}

TEST_F(HeartbeatStreamTest, ShutdownWithOpenStreamsIsBoundedAndBeatsThenFail) {
  Start();
  std::vector<Member> members;
  std::vector<std::unique_ptr<HeartbeatStreamClient>> beats;
  for (int i = 0; i < 20; ++i) {
    members.push_back(Join(absl::StrCat("w", i), absl::Seconds(2)));
    beats.push_back(std::make_unique<HeartbeatStreamClient>(members.back().client.get()));
    ASSERT_TRUE(beats.back()->Beat(members.back().Beat()).ok());
  }
  EXPECT_EQ(limits_->open_by(kLocalCaller), 20);
  const absl::Time t0 = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  EXPECT_EQ(limits_->open_by(kLocalCaller), 0) << "every stream's slot is freed";
  EXPECT_NE(server_->metrics()->Render().find("zeroshard_heartbeat_streams 0\n"),
            std::string::npos);
  const absl::Time t1 = absl::Now();
  auto r = beats[0]->Beat(members[0].Beat());
  EXPECT_FALSE(r.ok());
  EXPECT_LT(absl::Now() - t1, absl::Seconds(5)) << r.status();
}

}  // namespace
}  // namespace zeroshard
