// The worker's HeartbeatStreamClient against coordinators that do not
// stream: one that takes a stream's heartbeat and never answers (the beat
// is DEADLINE_EXCEEDED and the next one opens a new stream), and one of an
// older build with unary Heartbeat only (the client falls back to it).
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/heartbeat_stream_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {
namespace {

// A coordinator of an older build: unary Heartbeat only.
class UnaryOnlyCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* out) override {
    out->set_generation(7);
    ++calls;
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

// A coordinator that takes a stream's heartbeat and never answers.
class SilentCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status HeartbeatStream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::HeartbeatResponse, v1::HeartbeatRequest>* stream) override {
    ++streams;
    v1::HeartbeatRequest r;
    while (stream->Read(&r)) {
    }  // Every beat taken, none answered; the read fails once the call is cancelled.
    return ctx->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
  }
  std::atomic<int> streams{0};
};

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

TEST(HeartbeatStreamFallbackTest, NoAnswerIsDeadlineExceededAndTheNextBeatReopens) {
  SilentCoordinator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);
  CoordinatorClient::Options options;
  options.timeout = absl::Milliseconds(300);
  auto client = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", port), options);
  ASSERT_TRUE(client.ok()) << client.status();
  HeartbeatStreamClient beats(client->get());
  v1::HeartbeatRequest r;
  r.set_member_id(1);
  for (int i = 1; i <= 2; ++i) {
    const absl::Time t0 = absl::Now();
    auto reply = beats.Beat(r);
    EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded) << reply.status();
    EXPECT_LT(absl::Now() - t0, absl::Seconds(2)) << "bounded by the client's timeout";
    EXPECT_EQ(service.streams.load(), i) << "each Beat after a timeout opens a new stream";
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST(HeartbeatStreamFallbackTest, CoordinatorWithoutTheStreamGetsUnaryHeartbeats) {
  UnaryOnlyCoordinator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);
  auto client = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", port));
  ASSERT_TRUE(client.ok()) << client.status();
  HeartbeatStreamClient beats(client->get());
  v1::HeartbeatRequest r;
  r.set_member_id(1);
  for (int i = 0; i < 3; ++i) {
    auto reply = beats.Beat(r);
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->generation(), 7u);
  }
  EXPECT_EQ(beats.streamed(), 0);
  EXPECT_EQ(service.calls.load(), 3);
  server->Shutdown();
}

}  // namespace
}  // namespace zeroshard
