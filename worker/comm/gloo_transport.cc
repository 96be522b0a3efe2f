#include "worker/comm/gloo_transport.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <exception>
#include <mutex>

#include "gloo/common/error.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace zeroshard {

std::shared_ptr<gloo::transport::Device> CreateTcpDevice(const std::string& hostname) {
  // Gloo writes with writev(2), which raises SIGPIPE when a peer has closed
  // its end (an aborted or dead rank). The default action would kill this
  // worker instead of letting Gloo report EPIPE as an error, so the signal is
  // ignored process-wide (as gRPC and most network servers do).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
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
