// A small key-value store for bootstrapping communicators (STYLE.md point 3;
// Gloo gloo/rendezvous/store.h, c10d Store.hpp). The coordinator backs it in
// production (keys namespaced by job and generation); InMemoryStore backs it
// in unit tests with ranks as threads.
//
// Thread safety: implementations are safe to call from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zeroshard {

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value (overwrites).
  virtual absl::Status Set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // The value; NOT_FOUND if absent.
  virtual absl::StatusOr<std::vector<uint8_t>> Get(const std::string& key) = 0;
  // Blocks until every key exists; DEADLINE_EXCEEDED after `timeout`.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
  // Atomically adds delta to the integer at key (absent = 0); returns the sum.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
};

}  // namespace zeroshard
