// A Store over a directory, for tests whose ranks are forked processes: one
// file per key (hex-encoded name), written to a temporary name and renamed
// so readers never see a partial value; Add serialises through flock on a
// lock file. Values of Add are decimal ASCII, as InMemoryStore's.
// Thread- and process-safe.
#pragma once

#include <string>

#include "worker/comm/store.h"

namespace zeroshard::testing {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Set(const std::string& key, const std::vector<uint8_t>& value) override;
  absl::StatusOr<std::vector<uint8_t>> Get(const std::string& key) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;

 private:
  std::string PathOf(const std::string& key) const;
  std::string dir_;
};

}  // namespace zeroshard::testing
