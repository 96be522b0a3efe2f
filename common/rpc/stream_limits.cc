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

StreamLimits::StreamLimits(int max_per_caller) : max_per_caller_(max_per_caller) {
  ZS_CHECK(max_per_caller >= 1);
}

StreamLimits::Slot::~Slot() {
  if (limits_ != nullptr) limits_->Release(caller_);
}

absl::StatusOr<StreamLimits::Slot> StreamLimits::Open(const std::string& peer,
                                                      const char* method) {
  std::string caller = PeerHost(peer);
  absl::MutexLock lock(&mu_);
  int& open = open_[caller];
  if (open >= max_per_caller_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        method, ": caller ", caller, " has ", open,
        " streams open; the per-caller limit is ", max_per_caller_,
        " (--max-streams-per-caller)"));
  }
  ++open;
  return Slot(this, std::move(caller));
}

int StreamLimits::open_by(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(PeerHost(peer));
  return it == open_.end() ? 0 : it->second;
}

void StreamLimits::Release(const std::string& caller) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(caller);
  ZS_CHECK(it != open_.end() && it->second > 0);
  if (--it->second == 0) open_.erase(it);
}

}  // namespace zeroshard
