#include "worker/comm/gloo_transport.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <exception>
#include <mutex>

#include "common/infra/loopback.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace zeroshard {

// [Note: batch loop threads on loopback]
// When ranks meet over loopback, a message's sender and its receiver run on
// the same cores. Each write a sender's loop thread makes wakes the
// receiver's loop thread, which under SCHED_OTHER may preempt the writer;
// the two then trade the core in small pieces, and the cores sat idle
// 15-20% of a 64 MiB all-gather at N = 2 on 2 cores (perf, cpu-clock).
// Under SCHED_BATCH a woken thread does not preempt: it waits for the
// running one to block or for the tick, so each side moves more per turn.
// The whole bench under SCHED_RR, which also ends that preemption between
// them, gained as much. comm_bandwidth_bench --worlds 2 --backends gloo,
// ranks as processes, the policy toggled in one binary, three alternating
// rounds: medians at 64 and 256 MiB rose from 0.69-0.78 to 0.81-0.86 of the
// loopback aggregate / N; `zeroshard launch --backend gloo` step times
// (small and medium, stage 3, N = 2) stayed within the noise. A woken batch
// thread still gets its fair share; only its wakeup preemption goes. The op
// queue's thread keeps its policy: under SCHED_BATCH it waited for the
// compute thread's slice before starting a new op. Between hosts the receiver
// has its own cores and a prompt wakeup matters more, so the policy stays.
namespace {

// Sets the calling thread's policy from SCHED_OTHER to SCHED_BATCH for the
// scope, restoring it on exit. Threads started inside inherit SCHED_BATCH
// (pthread_create's default PTHREAD_INHERIT_SCHED). A thread under any other
// policy (an operator's real-time or idle choice) is left alone, and
// failures leave the policy as it was: an optimisation, never an error.
class ScopedBatchPolicy {
 public:
  ScopedBatchPolicy() {
    // The kernel's answer: glibc's cached policy misses outside changes
    // (chrt -p, a library's own sched_setscheduler).
    policy_ = sched_getscheduler(0);
    if (policy_ != SCHED_OTHER || sched_getparam(0, &param_) != 0) return;
    const sched_param zero{};
    set_ = pthread_setschedparam(pthread_self(), SCHED_BATCH, &zero) == 0;
  }
  ~ScopedBatchPolicy() {
    if (set_) pthread_setschedparam(pthread_self(), policy_, &param_);
  }
  ScopedBatchPolicy(const ScopedBatchPolicy&) = delete;
  ScopedBatchPolicy& operator=(const ScopedBatchPolicy&) = delete;

 private:
  int policy_ = SCHED_OTHER;
  sched_param param_{};
  bool set_ = false;
};

}  // namespace

std::shared_ptr<gloo::transport::Device> CreateTcpDevice(const std::string& hostname) {
  // Gloo writes with writev(2), which raises SIGPIPE when a peer has closed
  // its end (an aborted or dead rank). The default action would kill this
  // worker instead of letting Gloo report EPIPE as an error, so the signal is
  // ignored process-wide (as gRPC and most network servers do).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  if (!IsLoopbackHost(hostname)) return gloo::transport::tcp::CreateDevice(attr);
  const ScopedBatchPolicy batch;  // The device's loop thread starts inside.
  return gloo::transport::tcp::CreateDevice(attr);
}

void AbortGlooContext(gloo::Context& context) {
  if (context.size <= 1) return;  // No pairs, nothing can block.
  char dummy = 0;
  try {
    // See [Note: aborting a Gloo context]: the timed-out wait closes every
    // pair of the context with an exception, waking all pending waits.
    auto buffer = context.createUnboundBuffer(&dummy, 1);
    buffer->waitRecv(nullptr, std::chrono::milliseconds(1));
  } catch (const std::exception&) {
    // Expected: the wait reports the timeout it was made to have.
  }
}

std::chrono::milliseconds OpDeadline::Remaining() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline_ - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(1);
}

int64_t RingSegments(size_t bytes) {
  return static_cast<int64_t>((bytes + kRingSegmentBytes - 1) / kRingSegmentBytes);
}

bool BytesApart(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x + a_bytes <= y || y + b_bytes <= x;
}

void ThrowIfWaitAborted(bool ok, const char* what) {
  if (!ok) throw ::gloo::IoException(std::string("ring ") + what + " aborted");
}

bool PendingWaits::Add(std::span<gloo::transport::UnboundBuffer* const> buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return false;
  buffers_.insert(buffers_.end(), buffers.begin(), buffers.end());
  return true;
}

void PendingWaits::Remove(std::span<gloo::transport::UnboundBuffer* const> buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  for (gloo::transport::UnboundBuffer* b : buffers) {
    auto it = std::find(buffers_.begin(), buffers_.end(), b);
    if (it != buffers_.end()) buffers_.erase(it);
  }
}

void PendingWaits::AbortAll() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  for (gloo::transport::UnboundBuffer* b : buffers_) {
    b->abortWaitRecv();
    b->abortWaitSend();
  }
}

PendingWaitScope::PendingWaitScope(PendingWaits* waits,
                                   std::initializer_list<gloo::transport::UnboundBuffer*> buffers)
    : waits_(waits) {
  for (gloo::transport::UnboundBuffer* b : buffers) {
    if (b != nullptr) buffers_.push_back(b);
  }
  if (waits_ != nullptr && !waits_->Add(buffers_)) {
    waits_ = nullptr;
    throw ::gloo::IoException("communicator aborted");
  }
}

PendingWaitScope::~PendingWaitScope() {
  if (waits_ != nullptr) waits_->Remove(buffers_);
}

}  // namespace zeroshard
