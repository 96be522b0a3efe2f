// Which rank of the running generation may write a rendezvous key (issue 40,
// least privilege inside the job). Every key a worker writes names its
// writer: a Gloo address is "<prefix>rank_<r>" or "<prefix><r>", a shared-
// memory segment "<prefix>shm/<r>". So the rule is:
//   - a key whose last '/'-separated component is a decimal rank <r>, or
//     "rank_<r>", belongs to rank r: only r sets it or adds to it;
//   - every other key is shared: rank 0, the generation's root, sets it
//     (an NCCL unique id), and any rank adds to it (a counter, as c10d's
//     store is used for barriers).
// KvSet and KvAdd from a member of the job are refused (PERMISSION_DENIED)
// outside that rule, and each owner may hold at most its share of the
// store's bytes (kv_store.h), so one rank cannot overwrite another's
// address or starve the rendezvous.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>

#include "absl/strings/string_view.h"

namespace zeroshard::server {

// The rank that owns `key` (relative to the generation's prefix): the rank
// it names, or 0 for a shared key. A number too large for an int names no
// rank: nullopt.
std::optional<int> KvKeyOwner(absl::string_view key);
// Whether `key` names a rank (its last component is <r> or rank_<r>).
bool KvKeyNamesRank(absl::string_view key);

}  // namespace zeroshard::server
