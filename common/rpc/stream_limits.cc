#include "common/rpc/stream_limits.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {

std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t bracket = peer.rfind(']');
  const bool has_port = colon != std::string::npos && colon > peer.find(':') &&
                        (bracket == std::string::npos || colon > bracket);
  return has_port ? peer.substr(0, colon) : peer;
}

StreamLimits::StreamLimits(int max_per_caller, int max_total)
    : max_per_caller_(max_per_caller), max_total_(max_total > 0 ? max_total : 16 * max_per_caller) {
  ZS_CHECK(max_per_caller >= 1 && max_per_caller <= max_total_);
}

StreamLimits::Slot::~Slot() {
  if (limits_ != nullptr) limits_->Release(caller_);
}

absl::StatusOr<StreamLimits::Slot> StreamLimits::Open(const std::string& peer, const char* method,
                                                      uint64_t member_id) {
  std::string caller = member_id != 0 ? absl::StrCat("member ", member_id) : PeerHost(peer);
  absl::MutexLock lock(&mu_);
  if (total_ >= max_total_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(method, ": ", total_, " streams are open; the coordinator's limit is ",
                     max_total_, " (--max-streams)"));
  }
  int& open = open_[caller];
  if (open >= max_per_caller_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        method, ": caller ", caller, " has ", open, " streams open; the per-caller limit is ",
        max_per_caller_, " (--max-streams-per-caller)"));
  }
  ++open;
  ++total_;
  return Slot(this, std::move(caller));
}

int StreamLimits::open_by(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(PeerHost(peer));
  return it == open_.end() ? 0 : it->second;
}

bool StreamLimits::AwaitOpenBy(const std::string& peer, int count, absl::Duration timeout) const {
  const std::string host = PeerHost(peer);
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {  // Evaluated under mu_ by Await.
    auto it = open_.find(host);
    return (it == open_.end() ? 0 : it->second) == count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

void StreamLimits::Release(const std::string& caller) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(caller);
  ZS_CHECK(it != open_.end() && it->second > 0);
  if (--it->second == 0) open_.erase(it);
  --total_;
}

}  // namespace zeroshard
