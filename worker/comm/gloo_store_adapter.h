// GlooStoreAdapter: lets Gloo's rendezvous (connectFullMesh) run over a
// zeroshard::Store (the coordinator's KV in production, InMemoryStore in
// tests). Every key gets `prefix`, so a new generation (a new prefix) never
// sees an old generation's addresses.
//
// Gloo's Store interface reports failure by exception; the adapter throws
// gloo::IoException and also keeps the first failing absl::Status so the
// caller can return the precise code (DEADLINE_EXCEEDED for a rank that never
// showed up) instead of parsing a message.
//
// Thread safety: as the underlying Store; last_error() may be read after the
// Gloo call that threw has returned.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/store.h"

namespace zeroshard {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and wait() calls that carry no timeout.
  GlooStoreAdapter(zeroshard::Store& store, std::string prefix, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key (as Gloo's own stores do), then reads it.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // OK until a call failed; then that call's status.
  absl::Status last_error() const;

 private:
  [[noreturn]] void Fail(absl::Status status);

  zeroshard::Store& store_;
  const std::string prefix_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard
