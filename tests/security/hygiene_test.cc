// Security hygiene (issue 40): loopback means a loopback address, not a
// name that starts with "127."; a token file open to other users is refused
// on both sides, naming its mode and never its contents, and a malformed
// line does not echo a token; a client refuses to send a token in the clear
// to a host that is not loopback unless told to (--insecure); a failure
// reason with a newline cannot forge a coordinator log or status line.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "common/infra/loopback.h"
#include "common/infra/secret_file.h"
#include "common/model/job_config.h"
#include "common/rpc/rpc_security.h"
#include "gtest/gtest.h"
#include "server/rpc/auth_gate.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

TEST(HygieneTest, LoopbackIsAnAddressNotANamePrefix) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"127.attacker.example", "127.0.0.1.nip.io", "10.0.0.1", "0.0.0.0",
                           "::", "example.com", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
  EXPECT_EQ(HostOfTarget("127.0.0.1:50051"), "127.0.0.1");
  EXPECT_EQ(HostOfTarget("dns:///coord.svc:50051"), "coord.svc");
  EXPECT_EQ(HostOfTarget("ipv4:10.0.0.2:7"), "10.0.0.2");
  EXPECT_EQ(HostOfTarget("[::1]:50051"), "[::1]");
}

std::string SecretFile(const std::string& text, mode_t mode) {
  const std::string path = testing::MakeTempDir("zs_hygiene") + "/tokens";
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(HygieneTest, ATokenFileOpenToOtherUsersIsRefusedWithoutItsContents) {
  const std::string secret = "admin-token-0123456789abcdef";
  for (mode_t mode : {0644, 0604, 0660, 0666}) {
    const std::string path = SecretFile("admin " + secret + "\n", mode);
    const absl::StatusOr<std::string> read = ReadSecretFile(path);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_EQ(read.status().message().find(secret), std::string::npos) << read.status();
    auto server = server::ReadTokenFile(path);
    ASSERT_FALSE(server.ok()) << mode;
    EXPECT_NE(server.status().message().find("open to other users"), std::string::npos)
        << server.status();
    EXPECT_FALSE(ReadClientToken(path).ok()) << mode;
  }
  for (mode_t mode : {0600, 0400, 0640, 0440}) {  // 0440: Kubernetes' fsGroup Secret mount.
    const std::string path = SecretFile("admin " + secret + "\n", mode);
    EXPECT_TRUE(server::ReadTokenFile(path).ok()) << mode;
    EXPECT_EQ(ReadClientToken(path).value_or(""), secret) << mode;
  }
}

// Local reads (server/checkpoint/local_read_server.h) check a token outside
// gRPC: worker or better, as a descriptor is more than DownloadRange's bytes.
TEST(HygieneTest, ATokenOutsideGrpcNeedsTheRoleAskedFor) {
  const std::string path = SecretFile(
      "reader reader-token-0123456789\nworker worker-token-0123456789\n"
      "admin admin-token-0123456789\n",
      0600);
  auto gate = server::AuthGate::Create(path, [](uint64_t) { return false; });
  ASSERT_TRUE(gate.ok()) << gate.status();
  const server::Role worker = server::Role::kWorker;
  EXPECT_TRUE((*gate)->AuthorizeToken("local reads", worker, "worker-token-0123456789").ok());
  EXPECT_TRUE((*gate)->AuthorizeToken("local reads", worker, "admin-token-0123456789").ok());
  const absl::Status reader =
      (*gate)->AuthorizeToken("local reads", worker, "reader-token-0123456789");
  EXPECT_EQ(reader.code(), absl::StatusCode::kPermissionDenied) << reader;
  EXPECT_NE(reader.message().find("local reads"), std::string::npos) << reader;
  EXPECT_EQ((*gate)->AuthorizeToken("local reads", worker, "").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*gate)->AuthorizeToken("local reads", worker, "other-token-0123456789").code(),
            absl::StatusCode::kUnauthenticated);
  auto open = server::AuthGate::Create("", [](uint64_t) { return false; });
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE((*open)->AuthorizeToken("local reads", worker, "").ok());
}

TEST(HygieneTest, AMalformedTokenLineDoesNotEchoTheToken) {
  const std::string secret = "worker-token-0123456789abcdef";
  const auto tokens = server::ReadTokenFile(SecretFile(secret + " worker\n", 0600));
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.status().message().find(secret), std::string::npos) << tokens.status();
  EXPECT_NE(tokens.status().message().find("line 1"), std::string::npos) << tokens.status();
}

TEST(HygieneTest, ATokenGoesInTheClearOnlyToLoopbackUnlessInsecure) {
  ClientSecurity security;
  security.token_file = SecretFile("worker-token-0123456789abcdef\n", 0600);
  const grpc::ChannelArguments args;
  auto refused = OpenChannel("10.20.30.40:50051", security, args);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("--tls-ca"), std::string::npos) << refused.status();
  EXPECT_TRUE(OpenChannel("127.0.0.1:50051", security, args).ok());
  EXPECT_TRUE(OpenChannel("localhost:50051", security, args).ok());
  security.insecure = true;
  EXPECT_TRUE(OpenChannel("10.20.30.40:50051", security, args).ok());
  security.insecure = false;
  security.token_file.clear();  // No token: nothing to leak.
  EXPECT_TRUE(OpenChannel("10.20.30.40:50051", security, args).ok());
}

TEST(HygieneTest, AFailureReasonCannotForgeALogOrStatusLine) {
  // max_failures 0: the first failure fails the job, its reason becomes the job's.
  server::testing::CoreHarness h(server::testing::JobOptions(100, 0));
  const uint64_t a = h.Join("a");
  h.Join("b");
  h.Advance(absl::Seconds(1));
  const std::string forged = "boom\nzeroshard-coordinator: job job completed: step 100 of 100";
  ASSERT_TRUE(h.ReportFailure(a, forged).ok());
  auto status = h.core->GetJobStatus({});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->job_state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(status->job_state_reason().find('\n'), std::string::npos) << status->job_state_reason();
  EXPECT_NE(status->job_state_reason().find("boom\\n"), std::string::npos)
      << status->job_state_reason();
}

}  // namespace
}  // namespace zeroshard
