// GuardCoordinatorService (auth_services.h): the Coordinator service behind
// the AuthGate.
#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/rpc_security.h"
#include "server/rpc/auth_services.h"
#include "server/rpc/ranked_caller.h"

namespace zeroshard::server {
namespace {

using grpc::ServerContext;
using grpc::Status;

class GuardedCoordinator final : public AsyncCoordinatorService {
 public:
  GuardedCoordinator(v1::Coordinator::Service* inner, const AuthGate* gate,
                     const CoordinatorCore* core)
      : inner_(inner), gate_(gate), core_(core) {}

  Status Join(ServerContext* c, const v1::JoinRequest* q, v1::JoinResponse* a) override {
    absl::StatusOr<Role> role = gate_->Authorize(*c, "Coordinator/Join");
    if (!role.ok()) return ToGrpcStatus(role.status());
    if (absl::Status id = gate_->CheckWorkerIdentity(*c, q->worker_id()); !id.ok()) {
      return ToGrpcStatus(id);
    }
    // A Join with a live member's worker_id would evict that member: only
    // the member itself (a restarted worker that kept its credential) or an
    // admin may do that; anyone else waits for its lease to expire.
    const std::optional<uint64_t> holder = core_->LiveMemberOf(q->worker_id());
    const bool admin = gate_->tokens_required() && *role == Role::kAdmin;
    if (holder.has_value() && !admin && !gate_->Proves(*c, *holder)) {
      return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
          "Join: worker_id \"", q->worker_id(), "\" ", kWorkerIdHeldPhrase, " ", *holder,
          "; a Join that replaces it must carry that member's credential, or wait for its "
          "lease to expire")));
    }
    Status s = inner_->Join(c, q, a);
    if (s.ok()) a->set_member_secret(gate_->SecretFor(a->member_id()));
    return s;
  }
  Status Heartbeat(ServerContext* c, const v1::HeartbeatRequest* q,
                   v1::HeartbeatResponse* a) override {
    return Guard(c, "Coordinator/Heartbeat", q->member_id(),
                 [&] { return inner_->Heartbeat(c, q, a); });
  }
  Status Leave(ServerContext* c, const v1::LeaveRequest* q, v1::LeaveResponse* a) override {
    return Guard(c, "Coordinator/Leave", q->member_id(), [&] { return inner_->Leave(c, q, a); });
  }
  Status ReportFailure(ServerContext* c, const v1::ReportFailureRequest* q,
                       v1::ReportFailureResponse* a) override {
    return Guard(c, "Coordinator/ReportFailure", q->member_id(),
                 [&] { return inner_->ReportFailure(c, q, a); });
  }
  Status ReportHandoff(ServerContext* c, const v1::ReportHandoffRequest* q,
                       v1::ReportHandoffResponse* a) override {
    return Guard(c, "Coordinator/ReportHandoff", q->member_id(),
                 [&] { return inner_->ReportHandoff(c, q, a); });
  }
  Status GetGeneration(ServerContext* c, const v1::GetGenerationRequest* q,
                       v1::GenerationInfo* a) override {
    return Guard(c, "Coordinator/GetGeneration", 0, [&] { return inner_->GetGeneration(c, q, a); });
  }
  Status WatchGeneration(ServerContext* c, const v1::GetGenerationRequest* q,
                         grpc::ServerWriter<v1::GenerationInfo>* w) override {
    return Guard(c, "Coordinator/WatchGeneration", 0,
                 [&] { return inner_->WatchGeneration(c, q, w); });
  }
  Status KvSet(ServerContext* c, const v1::KvSetRequest* q, v1::KvSetResponse* a) override {
    return Guard(c, "Coordinator/KvSet", 0, [&] {
      absl::Status writer = CheckKvWriter(*gate_, *core_, *c, "KvSet", q->generation(), q->key(),
                                          /*add=*/false);
      return writer.ok() ? inner_->KvSet(c, q, a) : ToGrpcStatus(writer);
    });
  }
  Status KvGet(ServerContext* c, const v1::KvGetRequest* q, v1::KvGetResponse* a) override {
    return Guard(c, "Coordinator/KvGet", 0, [&] { return inner_->KvGet(c, q, a); });
  }
  Status KvAdd(ServerContext* c, const v1::KvAddRequest* q, v1::KvAddResponse* a) override {
    return Guard(c, "Coordinator/KvAdd", 0, [&] {
      absl::Status writer = CheckKvWriter(*gate_, *core_, *c, "KvAdd", q->generation(), q->key(),
                                          /*add=*/true);
      return writer.ok() ? inner_->KvAdd(c, q, a) : ToGrpcStatus(writer);
    });
  }
  Status ReportStep(ServerContext* c, const v1::StepReport* q, v1::ReportStepResponse* a) override {
    return Guard(c, "Coordinator/ReportStep", q->member_id(),
                 [&] { return inner_->ReportStep(c, q, a); });
  }
  Status GetJobStatus(ServerContext* c, const v1::GetJobStatusRequest* q,
                      v1::JobStatus* a) override {
    return Guard(c, "Coordinator/GetJobStatus", 0, [&] { return inner_->GetJobStatus(c, q, a); });
  }
  Status StopJob(ServerContext* c, const v1::StopJobRequest* q, v1::StopJobResponse* a) override {
    return Guard(c, "Coordinator/StopJob", 0, [&] { return inner_->StopJob(c, q, a); });
  }

 private:
  template <typename Call>
  Status Guard(ServerContext* c, const char* method, uint64_t member_id, Call call) {
    absl::StatusOr<Role> role = gate_->Authorize(*c, method, member_id);
    if (!role.ok()) return ToGrpcStatus(role.status());
    return call();
  }

  v1::Coordinator::Service* const inner_;
  const AuthGate* const gate_;
  const CoordinatorCore* const core_;
};

}  // namespace

std::unique_ptr<AsyncCoordinatorService> GuardCoordinatorService(v1::Coordinator::Service* inner,
                                                                 const AuthGate* gate,
                                                                 const CoordinatorCore* core) {
  return std::make_unique<GuardedCoordinator>(inner, gate, core);
}

}  // namespace zeroshard::server
