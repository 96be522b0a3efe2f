// The role and member rule of every coordinator RPC, and the token file
// format (auth_gate.h). A new RPC without a row here is refused (fail closed).
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/formats/atomic_file.h"
#include "common/infra/secret_file.h"
#include "server/rpc/auth_gate.h"

namespace zeroshard::server {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

const std::vector<RpcPolicy>& AllPolicies() {
  static const std::vector<RpcPolicy> kPolicies = {
      {"Coordinator/Join", Role::kWorker, MemberRule::kNone},
      {"Coordinator/Heartbeat", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/HeartbeatStream", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/Leave", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/ReportFailure", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/ReportHandoff", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/GetGeneration", Role::kWorker, MemberRule::kNone},
      {"Coordinator/WatchGeneration", Role::kWorker, MemberRule::kNone},
      {"Coordinator/KvSet", Role::kWorker, MemberRule::kRank},
      {"Coordinator/KvGet", Role::kWorker, MemberRule::kAnyMember},
      {"Coordinator/KvWait", Role::kWorker, MemberRule::kAnyMember},
      {"Coordinator/KvAdd", Role::kWorker, MemberRule::kRank},
      {"Coordinator/ReportStep", Role::kWorker, MemberRule::kSelf},
      {"Coordinator/GetJobStatus", Role::kReader, MemberRule::kNone},
      {"Coordinator/StopJob", Role::kAdmin, MemberRule::kNone},
      {"CheckpointService/BeginCheckpoint", Role::kWorker, MemberRule::kRank},
      {"CheckpointService/UploadShard", Role::kWorker, MemberRule::kRank},
      {"CheckpointService/CommitCheckpoint", Role::kWorker, MemberRule::kRank},
      {"CheckpointService/AbortCheckpoint", Role::kWorker, MemberRule::kRank},
      {"CheckpointService/ListCheckpoints", Role::kReader, MemberRule::kNone},
      {"CheckpointService/GetCheckpoint", Role::kReader, MemberRule::kNone},
      {"CheckpointService/DownloadRange", Role::kReader, MemberRule::kNone},
      {"CheckpointService/RequestCheckpoint", Role::kAdmin, MemberRule::kNone},
      {"CheckpointService/GetCheckpointTrigger", Role::kWorker, MemberRule::kNone},
  };
  return kPolicies;
}

const RpcPolicy* FindPolicy(absl::string_view method) {
  for (const RpcPolicy& p : AllPolicies()) {
    if (method == p.method) return &p;
  }
  return nullptr;
}

absl::StatusOr<absl::flat_hash_map<std::string, Role>> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--token-file ", text.status().message()));
  }
  absl::flat_hash_map<std::string, Role> tokens;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file ", path, " line ", line_no, ": ",
                                                     why, " (want \"role token\")"));
    };
    if (f.size() != 2) return bad("not two fields");
    Role role;
    if (f[0] == "reader") {
      role = Role::kReader;
    } else if (f[0] == "worker") {
      role = Role::kWorker;
    } else if (f[0] == "admin") {
      role = Role::kAdmin;
    } else {
      // Not echoed: a line written "token role" would print the token.
      return bad("the first field is not reader, worker or admin");
    }
    if (f[1].size() < 16 || f[1].size() > 256) return bad("token is not 16..256 characters");
    if (!tokens.emplace(f[1], role).second) return bad("token repeated");
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--token-file ", path, " holds no token"));
  }
  return tokens;
}

}  // namespace zeroshard::server
