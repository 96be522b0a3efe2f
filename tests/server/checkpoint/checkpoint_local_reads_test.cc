// Local reads (server/checkpoint/local_read_server.h, worker/checkpoint/
// local_reads.h): a rank on the coordinator's host reads checkpoint ranges
// through descriptors handed over a Unix socket. The ranges must equal the
// saved state across block edges; a changed byte is DATA_LOSS, and the
// client's restore then goes through DownloadRange, which drops the
// checkpoint; tokens, bad requests and files without block hashes are
// refused; the server stops with connections open. Also the frames
// themselves (common/rpc/fd_frames.h).
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "common/rpc/fd_frames.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_service.h"
#include "server/checkpoint/local_read_server.h"
#include "tests/server/checkpoint/checkpoint_file_edits.h"
#include "tests/server/checkpoint/store_test_fixture.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/local_reads.h"

namespace zeroshard::testing {
namespace {

using checkpoint::LocalReads;

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

class LocalReadsTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    block_bytes_ = 72;  // 18 elements: ranges cross many block edges.
    state_ = RandomState(OddUnits(), 7);
    store_ = OpenStore();
    SaveAll(*store_, 3, state_);
    StartServer([](absl::string_view) { return absl::OkStatus(); });
  }
  void StartServer(server::LocalReadServer::Authorize authorize) {
    server_.reset();
    auto s = server::LocalReadServer::Start(store_.get(), std::move(authorize));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  std::unique_ptr<LocalReads> Connect(const std::string& token = "") {
    auto c = LocalReads::Connect(server_->socket_path(), token, absl::Seconds(10));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  absl::Status ReadInto(LocalReads& reads, const UnitPlan& u, int k, ElementRange r,
                        std::vector<float>& out) {
    out.assign(static_cast<size_t>(r.length), -99.f);
    return reads.Read("", 3, u.name, kKinds[k], r, out.data());
  }
  std::string Dir() const { return dir_ + "/" + server::CheckpointIdForStep(3); }
  // The CheckpointService over the store, naming the socket, and a client.
  void StartService() {
    service_ = std::make_unique<server::CheckpointServiceImpl>(store_.get());
    service_->SetLocalReadSocket(server_->socket_path());
    int port = 0;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service_.get());
    grpc_server_ = b.BuildAndStart();
    auto client = checkpoint::CheckpointClient::Connect("127.0.0.1:" + std::to_string(port));
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
  }
  void TearDown() override {
    if (grpc_server_ != nullptr) grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  ModelState state_;
  std::unique_ptr<server::CheckpointStore> store_;
  std::unique_ptr<server::LocalReadServer> server_;
  std::unique_ptr<server::CheckpointServiceImpl> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<checkpoint::CheckpointClient> client_;
};

TEST_F(LocalReadsTest, RangesAcrossBlockEdgesEqualTheSavedState) {
  std::unique_ptr<LocalReads> reads = Connect();
  ASSERT_NE(reads, nullptr);
  for (const UnitPlan& u : plan_.units) {
    const int64_t n = u.padded_numel;
    for (ElementRange r : {ElementRange{0, n}, ElementRange{5, std::min<int64_t>(40, n - 5)},
                           ElementRange{std::min<int64_t>(17, n - 2), 2}, ElementRange{n - 1, 1},
                           ElementRange{0, 0}}) {
      for (int k = 0; k < 3; ++k) {
        std::vector<float> got;
        ASSERT_TRUE(ReadInto(*reads, u, k, r, got).ok())
            << u.name << " [" << r.offset << ", +" << r.length << ")";
        for (int64_t e = 0; e < r.length; ++e) {
          ASSERT_EQ(got[e], At(state_.at(u.name), k, r.offset + e)) << u.name << " elem " << e;
        }
      }
    }
  }
  std::vector<float> got;
  const UnitPlan& head = plan_.units.back();
  EXPECT_EQ(ReadInto(*reads, head, 0, {head.padded_numel - 1, 2}, got).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalReadsTest, AChangedByteIsDataLossAndTheRestoreThenDropsTheCheckpoint) {
  FlipByte(Dir() + "/u0000.master.bin", 2 * 72 + 3);  // Block 2: elements 36-53.
  std::unique_ptr<LocalReads> reads = Connect();
  std::vector<float> got;
  EXPECT_TRUE(ReadInto(*reads, plan_.units[0], 0, {0, 36}, got).ok());  // Blocks 0-1 are whole.
  absl::Status bad = ReadInto(*reads, plan_.units[0], 0, {40, 4}, got);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss) << bad;
  EXPECT_NE(bad.message().find("block 2"), std::string::npos) << bad;

  // The client falls back to DownloadRange, where the store finds the same
  // block and drops the checkpoint.
  StartService();
  auto info = client_->GetInfo("", 3, Soon());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->local_read_socket(), server_->socket_path());
  std::vector<float> dst(static_cast<size_t>(plan_.units[0].padded_numel));
  absl::Status st = client_->Restore(
      *info, plan_,
      {{plan_.units[0].name, kKinds[0], {0, plan_.units[0].padded_numel}, dst.data()}}, Soon());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_TRUE(ListedSteps(*store_).empty());
}

TEST_F(LocalReadsTest, TheClientsRestoreReadsLocallyWithNoDownloadRangeToFallBackOn) {
  // A service that answers GetCheckpoint and then goes away: the restore
  // can only have come through the socket.
  StartService();
  auto info = client_->GetInfo("", 3, Soon());
  ASSERT_TRUE(info.ok()) << info.status();
  grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
  const ShardPlan now = *MakeShardPlan(OddUnits(), 3, 8);
  std::vector<std::vector<float>> dst;
  std::vector<checkpoint::RestoreTarget> targets;
  dst.reserve(now.units.size() * 3);
  for (const UnitPlan& u : now.units) {
    const ElementRange r = OptimizerRange(u, 3, 1);
    for (int k = 0; k < 3; ++k) {
      targets.push_back({u.name, kKinds[k], r, dst.emplace_back(r.length, -99.f).data()});
    }
  }
  ASSERT_TRUE(client_->Restore(*info, now, targets, Soon()).ok());
  for (size_t i = 0; i < targets.size(); ++i) {
    for (int64_t e = 0; e < targets[i].range.length; ++e) {
      ASSERT_EQ(dst[i][e], At(state_.at(targets[i].unit), static_cast<int>(i % 3),
                              targets[i].range.offset + e));
    }
  }
}

TEST_F(LocalReadsTest, TokensAndBadRequestsAreRefusedWithTheirCodes) {
  StartServer([](absl::string_view token) {
    return token == "reader-token-0123456789" ? absl::OkStatus()
                                              : absl::UnauthenticatedError("bad token");
  });
  std::vector<float> got;
  const UnitPlan& u = plan_.units[1];
  EXPECT_EQ(ReadInto(*Connect(""), u, 0, {0, 4}, got).code(), absl::StatusCode::kUnauthenticated);
  std::unique_ptr<LocalReads> reads = Connect("reader-token-0123456789");
  EXPECT_TRUE(ReadInto(*reads, u, 0, {0, 4}, got).ok());
  EXPECT_EQ(reads->Read("", 3, "no.such.unit", kKinds[0], {0, 1}, got.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reads->Read("", 9, u.name, kKinds[0], {0, 1}, got.data()).code(),
            absl::StatusCode::kNotFound);

  // Bytes that are no request, and a frame over the limit.
  auto addr = MakeUnixAddress(server_->socket_path());
  ASSERT_TRUE(addr.ok());
  for (size_t size : {size_t{5}, server::LocalReadServer::kMaxRequestBytes + 1}) {
    const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(sock, reinterpret_cast<const sockaddr*>(&addr->addr), addr->size), 0);
    ASSERT_TRUE(SendFrame(sock, std::string(size, '\xff')).ok());
    absl::StatusOr<ReceivedFrame> reply = ReceiveFrame(sock, 1 << 20);
    ASSERT_TRUE(reply.ok()) << reply.status();
    v1::LocalReadReply r;
    ASSERT_TRUE(r.ParseFromString(reply->bytes()));
    EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << r.message();
    EXPECT_EQ(reply->fd_count(), 0u);
    ::close(sock);
  }
}

TEST_F(LocalReadsTest, AFileWithoutBlockHashesIsRefusedAndTheServerStopsWithConnectionsOpen) {
  std::unique_ptr<LocalReads> idle = Connect();
  server_.reset();
  StripBlockHashes(Dir());
  store_ = OpenStore();  // A restart: the manifest as it is now.
  StartServer([](absl::string_view) { return absl::OkStatus(); });
  std::unique_ptr<LocalReads> reads = Connect();
  std::vector<float> got;
  EXPECT_EQ(ReadInto(*reads, plan_.units[0], 0, {0, 4}, got).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Time t0 = absl::Now();
  server_.reset();  // `reads` is still connected.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  EXPECT_EQ(ReadInto(*reads, plan_.units[1], 0, {0, 4}, got).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(LocalReads::Connect("@zeroshard-reads-none", "", absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
}

// A server that answers every request with another request's id (and a
// descriptor that is not the file asked for): the client takes nothing
// from it and uses the connection no more.
TEST(LocalReadsClientTest, AReplyToAnotherRequestBreaksTheConnection) {
  const std::string name = "@zeroshard-test-reads-" + std::to_string(::getpid());
  auto addr = MakeUnixAddress(name);
  ASSERT_TRUE(addr.ok());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&addr->addr), addr->size), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  std::thread fake([listener] {
    const int conn = ::accept(listener, nullptr, nullptr);
    absl::StatusOr<ReceivedFrame> req = ReceiveFrame(conn, 1 << 20);
    v1::LocalReadRequest r;
    if (req.ok() && r.ParseFromString(req->bytes())) {
      v1::LocalReadReply reply;
      reply.set_request_id(r.request_id() + 1);
      const int fd = STDIN_FILENO;
      (void)SendFrame(conn, reply.SerializeAsString(), {&fd, 1});
    }
    ::close(conn);
  });
  auto reads = LocalReads::Connect(name, "", absl::Seconds(5));
  ASSERT_TRUE(reads.ok()) << reads.status();
  float dst[4];
  EXPECT_EQ((*reads)->Read("", 1, "embed", kKinds[0], {0, 4}, dst).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ((*reads)->Read("", 1, "embed", kKinds[0], {0, 4}, dst).code(),
            absl::StatusCode::kUnavailable);
  fake.join();
  ::close(listener);
}

TEST(FdFramesTest, BytesAndDescriptorsArriveAndLimitsHold) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_EQ(::write(pipe_fds[1], "xyz", 3), 3);
  ASSERT_TRUE(SendFrame(sv[0], "hello", {pipe_fds[0]}).ok());
  ::close(pipe_fds[0]);  // The receiver's duplicate stays open.
  absl::StatusOr<ReceivedFrame> got = ReceiveFrame(sv[1], 16);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes(), "hello");
  ASSERT_EQ(got->fd_count(), 1u);
  const int fd = got->TakeFd(0);
  char buf[4] = {};
  EXPECT_EQ(::read(fd, buf, 3), 3);
  EXPECT_STREQ(buf, "xyz");
  EXPECT_EQ(got->TakeFd(0), -1);
  ::close(fd);
  ::close(pipe_fds[1]);

  ASSERT_TRUE(SendFrame(sv[0], std::string(17, 'a')).ok());
  EXPECT_EQ(ReceiveFrame(sv[1], 16).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<int> five(5, sv[0]);
  EXPECT_EQ(SendFrame(sv[0], "x", five).code(), absl::StatusCode::kInvalidArgument);
  ::close(sv[0]);
  ::close(sv[1]);  // Its stream is lost after the frame over the limit.
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(sv[0]);
  EXPECT_EQ(ReceiveFrame(sv[1], 1 << 20).status().code(), absl::StatusCode::kUnavailable);
  ::close(sv[1]);
  EXPECT_EQ(MakeUnixAddress("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeUnixAddress(std::string(200, 'p')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::testing
