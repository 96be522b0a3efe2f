// InMemoryStore: a thread-safe Store held in this process, for tests that run
// ranks as threads (STYLE.md point 15). Values are bytes; Add keeps the
// integer as decimal ASCII (as c10d's stores do), so Get of an added key
// returns its digits.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/store.h"

namespace zeroshard {

class InMemoryStore final : public Store {
 public:
  absl::Status Set(const std::string& key, const std::vector<uint8_t>& value) override;
  absl::StatusOr<std::vector<uint8_t>> Get(const std::string& key) override;
  // DEADLINE_EXCEEDED names the first missing key.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  // INVALID_ARGUMENT if the key holds something that is not an integer.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::vector<uint8_t>> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard
