// Gloo TCP transport helpers: device creation and aborting a context from
// another thread.
//
// [Note: aborting a Gloo context] Gloo's collectives block in
// waitRecv/waitSend until their own timeout, and Context::closeConnections
// does not wake them. What does is Gloo's reaction to an application-side
// timeout: when any unbound-buffer wait times out, the TCP context signals an
// IoException to every pair, closes them, and every pending wait on the
// context throws. That path is public, so AbortGlooContext triggers it on
// purpose: a wait of 1 ms on a fresh buffer that nobody sends to. Peers see
// the connections close. (The TCP context's signalException itself is
// protected, and the packaged headers that declare it cannot be included:
// gloo/common/memory.h is missing from libgloo-dev.)
// "Every pending wait" is not every wait: the pairs' error path wakes the
// unbound-buffer ops still waiting to be matched, but not a send already
// queued for writing (or failing with EPIPE, which Gloo's async write
// ignores) nor a receive whose payload is being read. Such a wait returns
// only at its own timeout. So zeroshard runs no op on Gloo's collectives:
// every wait of its own is registered in PendingWaits, which Abort wakes
// directly, and a peer blocked on a rank that aborted learns of it by its own
// failure or Abort.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace zeroshard {

// The unbound buffers a communicator's queue thread waits on in zeroshard's
// own ring algorithms, so Abort can wake those waits itself
// (UnboundBuffer::abortWaitRecv/abortWaitSend). A wait on a peer that died or
// stopped reading is not always reached by the context-wide abort of
// [Note: aborting a Gloo context] (seen as a ring shift hung on its dead
// right neighbour, and a broadcast writing to a stopped peer, until their own
// timeouts); the buffer-level abort always returns the wait, and the op
// reports it as an error.
//
// Thread safety: every method from any thread.
class PendingWaits {
 public:
  // Registers buffers for the scope of their waits; false (nothing
  // registered) once AbortAll has run.
  bool Add(std::span<gloo::transport::UnboundBuffer* const> buffers);
  void Remove(std::span<gloo::transport::UnboundBuffer* const> buffers);
  // From now on Add fails; every registered buffer's waits return.
  void AbortAll();

 private:
  std::mutex mu_;
  std::vector<gloo::transport::UnboundBuffer*> buffers_;
  bool aborted_ = false;
};

// Registers `buffers` (null entries skipped) in `waits` (may be null) for
// this scope; throws gloo::IoException when the communicator was aborted
// already.
class PendingWaitScope {
 public:
  PendingWaitScope(PendingWaits* waits,
                   std::initializer_list<gloo::transport::UnboundBuffer*> buffers);
  ~PendingWaitScope();
  PendingWaitScope(const PendingWaitScope&) = delete;
  PendingWaitScope& operator=(const PendingWaitScope&) = delete;

 private:
  PendingWaits* waits_;
  std::vector<gloo::transport::UnboundBuffer*> buffers_;
};

// A whole op's deadline for its successive waits: Gloo takes a timeout per
// wait, and zeroshard's rings wait many times per op.
class OpDeadline {
 public:
  explicit OpDeadline(std::chrono::milliseconds timeout)
      : deadline_(std::chrono::steady_clock::now() + timeout) {}
  // What is left, at least 1 ms (Gloo reads 0 as "no wait"), so a wait past
  // the deadline still times out promptly.
  std::chrono::milliseconds Remaining() const;

 private:
  std::chrono::steady_clock::time_point deadline_;
};

// The rings' message size: a block travels as segments of this many bytes
// (the last may be shorter), each forwarded as soon as it lands.
inline constexpr size_t kRingSegmentBytes = size_t{1} << 20;

// Segments of kRingSegmentBytes in `bytes` (rounded up): how many slots a
// block's transfer takes.
int64_t RingSegments(size_t bytes);

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share no
// byte: where a ring may receive into one while it reads the other.
bool BytesApart(const void* a, size_t a_bytes, const void* b, size_t b_bytes);

// Throws gloo::IoException("ring <what> aborted") unless `ok`: what an
// unbound buffer's waitRecv/waitSend returns false for (PendingWaits::AbortAll).
void ThrowIfWaitAborted(bool ok, const char* what);

// A TCP device listening on `hostname` (port chosen by the kernel). The first
// call sets SIGPIPE to ignored for the process (see the .cc). Throws
// gloo exceptions (e.g. an unresolvable hostname); the caller maps them.
//
// On a loopback address (common/infra/loopback.h), called from a
// SCHED_OTHER thread, the device's event-loop thread runs under SCHED_BATCH:
// every peer then shares this host's cores, and a loop thread woken by data
// a local peer just wrote no longer preempts that writer mid-copy (see
// [Note: batch loop threads on loopback] in the .cc). Elsewhere the loop
// thread keeps the caller's policy. The calling thread's own policy is
// unchanged on return.
std::shared_ptr<gloo::transport::Device> CreateTcpDevice(const std::string& hostname);

// Makes every pending and later operation on `context` throw
// gloo::IoException ("... timeout caused pair closure"). Safe to call from any
// thread, concurrently with operations, and more than once. Never throws.
void AbortGlooContext(gloo::Context& context);

}  // namespace zeroshard
