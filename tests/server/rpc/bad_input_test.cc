// Black-box bad input over gRPC against an in-process coordinator: every
// RPC refuses malformed fields with the right code and a message naming the
// field, oversized messages are refused by gRPC itself, random garbage
// never crashes or wedges the server.
#include <random>

#include "common/rpc/coordinator_client.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"
#include "tests/server/await_generation.h"

namespace zeroshard {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.core.job_id = "bad";
    o.metrics_listen = "";
    o.core.min_workers = 1;
    o.core.settle = absl::Milliseconds(10);
    o.core.lease_timeout = absl::Seconds(30);
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = *CoordinatorClient::Connect(server_->address());
    v1::JoinRequest j;
    j.set_job_id("bad");
    j.set_worker_id("good");
    member_ = client_->Join(j)->member_id();
    ASSERT_TRUE(server::testing::AwaitRunningGeneration(*server_->core(), absl::Seconds(2)));
    ASSERT_EQ(server_->generation(), 1u);
  }

  // Expects `s` to have `code` and mention `field`.
  static void ExpectRefused(const absl::Status& s, absl::StatusCode code,
                            const std::string& field) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(field), std::string::npos) << "want \"" << field << "\" in " << s;
  }

  // Heartbeat, Leave, ReportFailure and GetGeneration with bad fields.
  void ExpectMembershipFieldsRefused() {
    using C = absl::StatusCode;
    v1::HeartbeatRequest hb;
    hb.set_job_id("bad");
    ExpectRefused(client_->Heartbeat(hb).status(), C::kInvalidArgument, "member_id is 0");
    // A member id that is not live is NOT_FOUND (Join again) at the gate
    // (server/rpc/auth_gate.h); a live one without its credential is
    // PERMISSION_DENIED (tests/security/impersonation_test.cc).
    hb.set_member_id(999999);
    ExpectRefused(client_->Heartbeat(hb).status(), C::kNotFound, "member_id 999999");
    hb.set_member_id(member_);
    hb.set_generation(1000);
    ExpectRefused(client_->Heartbeat(hb).status(), C::kInvalidArgument, "generation");

    v1::LeaveRequest leave;
    leave.set_job_id("bad");
    leave.set_member_id(12345);
    ExpectRefused(client_->Leave(leave), C::kNotFound, "member_id 12345");

    v1::ReportFailureRequest f;
    f.set_job_id("bad");
    f.set_member_id(member_);
    f.set_generation(1);
    f.set_failed_rank(-2);
    ExpectRefused(client_->ReportFailure(f).status(), C::kInvalidArgument, "failed_rank");
    f.set_failed_rank(5);
    ExpectRefused(client_->ReportFailure(f).status(), C::kInvalidArgument, "failed_rank");
    f.set_failed_rank(0);
    f.set_reason(std::string(5000, 'r'));
    ExpectRefused(client_->ReportFailure(f).status(), C::kInvalidArgument, "reason");

    v1::GetGenerationRequest g;
    g.set_job_id("bad");
    g.set_member_id(424242);
    ExpectRefused(client_->GetGeneration(g).status(), C::kNotFound, "member_id");
  }

  // ReportStep with each bad field in turn, then a good report.
  void ExpectStepReportFieldsRefused() {
    using C = absl::StatusCode;
    v1::StepReport r;
    r.set_job_id("bad");
    r.set_member_id(member_);
    r.set_generation(1);
    r.set_rank(0);
    r.set_step(-1);
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "step");
    r.set_step(1);
    r.mutable_memory()->set_grads(-5);
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "memory.grads");
    r.mutable_memory()->set_grads(0);
    r.set_step_seconds(std::nan(""));
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "step_seconds");
    r.set_step_seconds(0.1);
    r.add_comm()->set_op("all_to_all");
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "comm[0].op");
    r.clear_comm();
    r.mutable_device_memory()->set_total_bytes(10);
    r.mutable_device_memory()->set_free_bytes(11);
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "device_memory");
    r.clear_device_memory();
    r.set_rank(3);
    ExpectRefused(client_->ReportStep(r), C::kInvalidArgument, "rank");
    r.set_rank(0);
    r.set_generation(7);
    ExpectRefused(client_->ReportStep(r), C::kAborted, "current generation: 1");
    r.set_generation(1);
    EXPECT_TRUE(client_->ReportStep(r).ok());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<CoordinatorClient> client_;
  uint64_t member_ = 0;
};

TEST_F(BadInputTest, JoinFields) {
  using C = absl::StatusCode;
  v1::JoinRequest j;
  j.set_worker_id("w");
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "job_id");
  j.set_job_id("other");
  ExpectRefused(client_->Join(j).status(), C::kFailedPrecondition, "job_id");
  j.set_job_id("bad");
  j.set_worker_id("");
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "worker_id");
  j.set_worker_id(std::string(129, 'w'));
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "worker_id");
  j.set_worker_id("has space");
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "worker_id");
  j.set_worker_id("w");
  j.set_host(std::string(300, 'h'));
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "host");
  j.set_host("h");
  v1::TensorSpec* t = j.add_units()->add_params();
  t->set_name("p");
  t->add_shape(-3);
  t->set_dtype(v1::DTYPE_FP32);
  j.mutable_units(0)->set_name("u");
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "units");
  t->set_shape(0, 1LL << 40);
  t->add_shape(1LL << 40);
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "units");
  t->clear_shape();
  t->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectRefused(client_->Join(j).status(), C::kInvalidArgument, "units");
}

TEST_F(BadInputTest, MembershipAndStepFields) {
  using C = absl::StatusCode;
  ExpectMembershipFieldsRefused();
  ExpectStepReportFieldsRefused();

  v1::GetJobStatusRequest st;
  st.set_job_id("nope");
  ExpectRefused(client_->GetJobStatus(st).status(), C::kFailedPrecondition, "job_id");
}

TEST_F(BadInputTest, KvFieldsAndOversizedMessages) {
  using C = absl::StatusCode;
  v1::KvSetRequest set;
  set.set_job_id("bad");
  set.set_generation(1);
  ExpectRefused(client_->KvSet(set), C::kInvalidArgument, "key");
  set.set_key("k");
  set.set_value(std::string((1 << 20) + 1, 'v'));
  ExpectRefused(client_->KvSet(set), C::kInvalidArgument, "value");
  set.set_value(std::string(20 << 20, 'v'));  // Above the 16 MiB receive limit.
  EXPECT_EQ(client_->KvSet(set).code(), C::kResourceExhausted);
  set.set_value("v");
  set.set_generation(0);
  ExpectRefused(client_->KvSet(set), C::kAborted, "current generation: 1");

  v1::KvWaitRequest wait;
  wait.set_job_id("bad");
  wait.set_generation(1);
  wait.add_keys("k");
  wait.set_timeout_ms(-5);
  ExpectRefused(client_->KvWait(wait), C::kInvalidArgument, "timeout_ms");
  wait.set_timeout_ms(10);
  wait.add_keys("");
  ExpectRefused(client_->KvWait(wait), C::kInvalidArgument, "keys[1]");

  v1::KvAddRequest add;
  add.set_job_id("bad");
  add.set_generation(1);
  add.set_key(std::string(300, 'k'));
  ExpectRefused(client_->KvAdd(add).status(), C::kInvalidArgument, "key");
}

// Sends requests whose every field comes from one seeded random stream (in
// the same order for every run), ignoring the answers.
class GarbageSender {
 public:
  GarbageSender(CoordinatorClient& client, uint64_t member) : client_(client), member_(member) {}

  // One request of a random kind, for the job "bad" or a random one.
  void SendOne() {
    const std::string job = (rng_() % 2) ? "bad" : Text(8);
    const uint64_t gen = rng_() % 3;
    const uint64_t member = (rng_() % 2) ? member_ : rng_();
    switch (rng_() % 8) {
      case 0:
        return Join(job);
      case 1:
        return KvSet(job, gen);
      case 2:
        return KvAdd(job, gen);
      case 3:
        return ReportStep(job, gen, member);
      case 4:
        return KvWait(job, gen);
      case 5:
        return ReportFailure(job, gen);
      case 6:
        return Leave(job, member);
      default:
        return Heartbeat(job, gen, member);
    }
  }

 private:
  std::string Text(size_t max) {
    std::string s(rng_() % (max + 1), '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    return s;
  }

  void Join(const std::string& job) {
    v1::JoinRequest j;
    j.set_job_id(job);
    j.set_worker_id(Text(140));
    j.set_host(Text(20));
    if (rng_() % 2) {
      v1::UnitSpec* u = j.add_units();
      u->set_name(Text(4));
      v1::TensorSpec* t = u->add_params();
      t->set_name(Text(4));
      t->add_shape(static_cast<int64_t>(rng_()));
      t->set_dtype(static_cast<v1::DType>(rng_() % 6));
    }
    client_.Join(j).status().IgnoreError();
  }

  void KvSet(const std::string& job, uint64_t gen) {
    v1::KvSetRequest s;
    s.set_job_id(job);
    s.set_generation(gen);
    s.set_key(Text(300));
    s.set_value(Text(64));
    client_.KvSet(s).IgnoreError();
  }

  void KvAdd(const std::string& job, uint64_t gen) {
    v1::KvAddRequest a;
    a.set_job_id(job);
    a.set_generation(gen);
    a.set_key(Text(4));
    a.set_delta(static_cast<int64_t>(rng_()));
    client_.KvAdd(a).status().IgnoreError();
  }

  void ReportStep(const std::string& job, uint64_t gen, uint64_t member) {
    v1::StepReport r;
    r.set_job_id(job);
    r.set_member_id(member);
    r.set_generation(gen);
    r.set_rank(static_cast<int32_t>(rng_()));
    r.set_step(static_cast<int64_t>(rng_()));
    r.set_loss(static_cast<double>(static_cast<int64_t>(rng_())));
    client_.ReportStep(r).IgnoreError();
  }

  void KvWait(const std::string& job, uint64_t gen) {
    v1::KvWaitRequest w;
    w.set_job_id(job);
    w.set_generation(gen);
    w.add_keys(Text(8));
    w.set_timeout_ms(static_cast<int64_t>(rng_() % 3) - 1);
    client_.KvWait(w).IgnoreError();
  }

  void ReportFailure(const std::string& job, uint64_t gen) {
    v1::ReportFailureRequest f;
    f.set_job_id(job);
    f.set_member_id(rng_());
    f.set_generation(gen);
    f.set_failed_rank(static_cast<int32_t>(rng_()));
    client_.ReportFailure(f).status().IgnoreError();
  }

  void Leave(const std::string& job, uint64_t member) {
    v1::LeaveRequest l;
    l.set_job_id(job);
    l.set_member_id(member);
    l.set_job_completed(rng_() % 2);
    client_.Leave(l).IgnoreError();
  }

  void Heartbeat(const std::string& job, uint64_t gen, uint64_t member) {
    v1::HeartbeatRequest h;
    h.set_job_id(job);
    h.set_member_id(member);
    h.set_generation(gen);
    client_.Heartbeat(h).status().IgnoreError();
  }

  CoordinatorClient& client_;
  const uint64_t member_;
  std::mt19937_64 rng_{12345};
};

TEST_F(BadInputTest, RandomGarbageNeverCrashesOrWedges) {
  GarbageSender garbage(*client_, member_);
  for (int i = 0; i < 300; ++i) garbage.SendOne();
  auto status = client_->GetJobStatus({});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job_id(), "bad");
}

}  // namespace
}  // namespace zeroshard
