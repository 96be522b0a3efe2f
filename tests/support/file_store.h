// FileStore: a Store shared by processes through a directory, for the
// multi-process Gloo test (the coordinator's KV plays this role in
// production). One file per key (name = hex of the key); Set writes a
// temporary file and renames it, so readers never see half a value; Add holds
// an flock on "<dir>/.lock" around its read-modify-write; Wait polls every
// 2 ms until its deadline.
//
// Thread safety: safe from several threads and processes.
#pragma once

#include <string>
#include <vector>

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
