// Owns a CheckpointStore and its gRPC service, ready to register on the
// coordinator's server:
//
//   auto host = server::CheckpointHost::Open(dir, keep_last);   // once
//   CoordinatorServer::Start(options, {(*host)->service()});
//
// The host must outlive the server (CoordinatorServer::Start's rule for
// extra services). Thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/infra/dir_lock.h"
#include "server/checkpoint/checkpoint_service.h"
#include "server/checkpoint/checkpoint_store.h"

namespace zeroshard::server {

class CheckpointHost {
 public:
  // Opens (creating, cleaning up partial checkpoints in) `dir`, keeping the
  // last `keep_last` committed checkpoints (0 = all). Errors from
  // CheckpointStore::Open.
  // `streams` (may be null: no limit; must outlive the host) counts the
  // service's open streams per caller.
  static absl::StatusOr<std::unique_ptr<CheckpointHost>> Open(const std::string& dir, int keep_last,
                                                              StreamLimits* streams = nullptr) {
    // One coordinator per checkpoint dir: opening the store deletes pending
    // uploads, which another coordinator may be writing.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    auto lock = DirLock::Acquire(dir, ".checkpoints.lock");
    if (!lock.ok()) return lock.status();
    CheckpointStoreOptions o;
    o.dir = dir;
    o.keep_last = keep_last;
    auto store = CheckpointStore::Open(std::move(o));
    if (!store.ok()) return store.status();
    auto host = std::unique_ptr<CheckpointHost>(new CheckpointHost(*std::move(store), streams));
    host->lock_ = *std::move(lock);
    return host;
  }
  CheckpointServiceImpl* service() { return &service_; }
  CheckpointStore* store() { return store_.get(); }

 private:
  CheckpointHost(std::unique_ptr<CheckpointStore> store, StreamLimits* streams)
      : store_(std::move(store)), service_(store_.get(), streams) {}
  std::unique_ptr<DirLock> lock_;
  std::unique_ptr<CheckpointStore> store_;
  CheckpointServiceImpl service_;
};

}  // namespace zeroshard::server
