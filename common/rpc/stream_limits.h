// Per-caller limits on open streaming RPCs (issue 16): each open
// WatchGeneration, UploadShard or DownloadRange holds one of gRPC's sync
// server threads for as long as it lasts (a HeartbeatStream holds memory
// only, and counts too), so one host opening thousands of them would starve
// every other caller. A handler opens a Slot for its whole
// run; a caller (a peer host, PeerHost below: one host can use any number
// of ports) past `max_per_caller` open streams of any kind is
// refused with RESOURCE_EXHAUSTED naming the limit and its flag
// (--max-streams-per-caller). Streams of a verified member of the job (a
// rank's checkpoint upload) count against that member instead of its host,
// so other callers on the same host (workers of a local launch, or one
// holding a leaked token) cannot use up its quota; and all callers together
// hold at most `max_total` (--max-streams), whatever hosts they come from.
//
// Thread-safe: any method from any thread; a Slot may be destroyed on any
// thread, and must not outlive its StreamLimits.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace zeroshard {

// The host part of a gRPC peer string ("ipv4:127.0.0.1:5000" ->
// "ipv4:127.0.0.1", "ipv6:[::1]:5000" -> "ipv6:[::1]"): the caller that
// per-caller limits count (these and KvWait's), since one host can open any
// number of ports.
std::string PeerHost(const std::string& peer);

class StreamLimits {
 public:
  // 1 <= max_per_caller <= max_total (ZS_CHECK); max_total 0 = 16 x
  // max_per_caller.
  explicit StreamLimits(int max_per_caller, int max_total = 0);
  StreamLimits(const StreamLimits&) = delete;
  StreamLimits& operator=(const StreamLimits&) = delete;

  // One open stream; releases its count when destroyed. Move-only.
  class Slot {
   public:
    Slot(Slot&& other) noexcept : limits_(other.limits_), caller_(std::move(other.caller_)) {
      other.limits_ = nullptr;
    }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();

   private:
    friend class StreamLimits;
    Slot(StreamLimits* limits, std::string caller) : limits_(limits), caller_(std::move(caller)) {}
    StreamLimits* limits_;
    std::string caller_;
  };

  // Opens a stream of `method` (e.g. "UploadShard", for the message) for the
  // gRPC peer string `peer` (ServerContext::peer()), or for the verified
  // member `member_id` when nonzero. RESOURCE_EXHAUSTED when that caller
  // already has max_per_caller open, or all callers max_total.
  absl::StatusOr<Slot> Open(const std::string& peer, const char* method, uint64_t member_id = 0);
  // Open on `limits`, or an unlimited slot when `limits` is null.
  static absl::StatusOr<Slot> OpenOn(StreamLimits* limits, const std::string& peer,
                                     const char* method, uint64_t member_id = 0) {
    if (limits == nullptr) return Slot(nullptr, "");
    return limits->Open(peer, method, member_id);
  }

  int open_by(const std::string& peer) const;  // Streams open for peer's host.
  // Whether peer's host has exactly `count` streams open within `timeout`,
  // woken by each open and release (a finished stream's slot is released
  // on the server's threads, after its client saw the stream end).
  bool AwaitOpenBy(const std::string& peer, int count, absl::Duration timeout) const;
  int max_per_caller() const { return max_per_caller_; }

 private:
  void Release(const std::string& caller);

  const int max_per_caller_;
  const int max_total_;
  mutable absl::Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);  // By caller; no zero entries.
};

}  // namespace zeroshard
