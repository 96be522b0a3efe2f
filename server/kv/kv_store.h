// The rendezvous key-value store of the running generation: what backs a
// Gloo store and carries an NCCL unique id (STYLE.md point 3). Keys live
// under the generation's prefix "<job_id>/g<generation>/"; Reset drops every
// key when a generation ends, so a new communicator never sees stale
// addresses.
//
// Limits (INVALID_ARGUMENT naming the field when broken): key 1..256 bytes,
// value at most 1 MiB; the store holds at most 65,536 keys and 256 MiB,
// and the keys one rank owns (kv_owner.h) at most its share of the bytes,
// set_owner_limit (RESOURCE_EXHAUSTED beyond, naming the owner).
//
// Thread safety: not thread-safe; CoordinatorCore serialises access (and
// implements KvWait's blocking on top of Has()).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard::server {

inline constexpr size_t kMaxKeyBytes = 256;
inline constexpr size_t kMaxValueBytes = size_t{1} << 20;
inline constexpr size_t kMaxKeys = 65536;
inline constexpr size_t kMaxStoreBytes = size_t{256} << 20;

// "<job_id>/g<generation>/".
std::string KvPrefix(const std::string& job_id, uint64_t generation);

// INVALID_ARGUMENT naming `field` if the key is empty or too long.
absl::Status ValidateKey(const std::string& key, const char* field);

class KvStore {
 public:
  // Drops every key and starts the namespace of `prefix`.
  void Reset(const std::string& prefix);
  // Bytes (keys + values) the keys of one owner may hold; kMaxStoreBytes
  // until set. The core sets kMaxStoreBytes / world size for a generation.
  void set_owner_limit(size_t bytes) { owner_limit_ = bytes; }
  const std::string& prefix() const { return prefix_; }

  absl::Status Set(const std::string& key, std::string value);
  // NOT_FOUND naming the key if absent.
  absl::StatusOr<std::string> Get(const std::string& key) const;
  bool Has(const std::string& key) const;
  // Adds delta to the decimal integer stored at key (absent = 0) and stores
  // the sum as decimal text (as c10d's TCPStore does). FAILED_PRECONDITION if
  // the value is not an integer; OUT_OF_RANGE on int64 overflow.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  size_t size() const { return values_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  std::string prefix_;
  std::map<std::string, std::string> values_;  // Full key (prefix + key) -> value.
  size_t bytes_ = 0;                           // Keys + values held.
  size_t owner_limit_ = kMaxStoreBytes;
  std::map<int, size_t> owner_bytes_;  // By KvKeyOwner (-1: owned by no rank).
};

}  // namespace zeroshard::server
