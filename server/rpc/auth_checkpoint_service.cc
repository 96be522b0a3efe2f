// GuardCheckpointService (auth_services.h): the CheckpointService behind
// the AuthGate.
#include "common/rpc/grpc_status.h"
#include "server/rpc/auth_services.h"
#include "server/rpc/ranked_caller.h"

namespace zeroshard::server {
namespace {

using grpc::ServerContext;
using grpc::Status;

class GuardedCheckpoints final : public FramedCheckpointService {
 public:
  GuardedCheckpoints(FramedCheckpointService* inner, const AuthGate* gate,
                     const CoordinatorCore* core)
      : inner_(inner), gate_(gate) {
    inner_->set_writer_check(
        [gate, core](const grpc::ServerContextBase& ctx,
                     absl::string_view method) -> absl::StatusOr<std::optional<CheckpointWriter>> {
          auto callers = RankedCallers(*gate, *core, ctx, method);
          if (!callers.ok()) return callers.status();
          if (!callers->has_value()) return std::nullopt;
          CheckpointWriter writer{(**callers)[0].generation,
                                  {},
                                  (**callers)[0].world_size,
                                  (**callers)[0].job_step,
                                  (**callers)[0].member_id};
          for (const CoordinatorCore::RankedMember& m : **callers) writer.ranks.push_back(m.rank);
          return writer;
        });
  }

  Status BeginCheckpoint(ServerContext* c, const v1::BeginCheckpointRequest* q,
                         v1::BeginCheckpointResponse* a) override {
    return Guard(c, "CheckpointService/BeginCheckpoint",
                 [&] { return inner_->BeginCheckpoint(c, q, a); });
  }
  Status UploadChunks(ServerContext* c, grpc::ServerReader<ShardChunkIn>* r,
                      v1::UploadShardResponse* a) override {
    return Guard(c, "CheckpointService/UploadShard", [&] { return inner_->UploadChunks(c, r, a); });
  }
  Status CommitCheckpoint(ServerContext* c, const v1::CommitCheckpointRequest* q,
                          v1::CommitCheckpointResponse* a) override {
    return Guard(c, "CheckpointService/CommitCheckpoint",
                 [&] { return inner_->CommitCheckpoint(c, q, a); });
  }
  Status AbortCheckpoint(ServerContext* c, const v1::AbortCheckpointRequest* q,
                         v1::AbortCheckpointResponse* a) override {
    return Guard(c, "CheckpointService/AbortCheckpoint",
                 [&] { return inner_->AbortCheckpoint(c, q, a); });
  }
  Status ListCheckpoints(ServerContext* c, const v1::ListCheckpointsRequest* q,
                         v1::ListCheckpointsResponse* a) override {
    return Guard(c, "CheckpointService/ListCheckpoints",
                 [&] { return inner_->ListCheckpoints(c, q, a); });
  }
  Status GetCheckpoint(ServerContext* c, const v1::GetCheckpointRequest* q,
                       v1::CheckpointInfo* a) override {
    return Guard(c, "CheckpointService/GetCheckpoint",
                 [&] { return inner_->GetCheckpoint(c, q, a); });
  }
  Status DownloadChunks(ServerContext* c, RangeStreamer* s) override {
    return Guard(c, "CheckpointService/DownloadRange",
                 [&] { return inner_->DownloadChunks(c, s); });
  }
  Status RequestCheckpoint(ServerContext* c, const v1::RequestCheckpointRequest* q,
                           v1::RequestCheckpointResponse* a) override {
    return Guard(c, "CheckpointService/RequestCheckpoint",
                 [&] { return inner_->RequestCheckpoint(c, q, a); });
  }
  Status GetCheckpointTrigger(ServerContext* c, const v1::GetCheckpointTriggerRequest* q,
                              v1::GetCheckpointTriggerResponse* a) override {
    return Guard(c, "CheckpointService/GetCheckpointTrigger",
                 [&] { return inner_->GetCheckpointTrigger(c, q, a); });
  }

 private:
  template <typename Call>
  Status Guard(ServerContext* c, const char* method, Call call) {
    absl::StatusOr<Role> role = gate_->Authorize(*c, method);
    if (!role.ok()) return ToGrpcStatus(role.status());
    return call();
  }

  FramedCheckpointService* const inner_;
  const AuthGate* const gate_;
};

}  // namespace

std::unique_ptr<v1::CheckpointService::Service> GuardCheckpointService(
    FramedCheckpointService* inner, const AuthGate* gate, const CoordinatorCore* core) {
  return std::make_unique<GuardedCheckpoints>(inner, gate, core);
}

}  // namespace zeroshard::server
